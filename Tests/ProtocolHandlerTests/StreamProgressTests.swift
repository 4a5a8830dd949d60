import Foundation
import ProtocolHandler
import Testing
import TetherSchema
import TetherTesting
import TetherWire

/// `conv.stream` in deltas: readers follow a reply by offset, a whole text now and then.
@Suite struct StreamProgressTests {
    private let id = MessageID("reply")

    private func delta(_ chunk: String, at offset: Int, index: Int, whole: String? = nil) -> StreamProgress {
        StreamProgress(id: id, chunkIndex: index, chunk: chunk, offset: offset, content: whole, isFinal: false)
    }

    @Test func chunksAreAppendedWhereTheirOffsetSays() throws {
        let first = try #require(delta("Hel", at: 0, index: 0, whole: "Hel").following(nil))
        let second = try #require(delta("lo", at: 3, index: 1).following(first))
        let third = try #require(delta(" 你好", at: 5, index: 2).following(second))
        #expect(third.content == "Hello 你好")
        #expect(third.length == "Hello 你好".utf8.count, "offsets count UTF-8 bytes")
        #expect(delta("lo", at: 3, index: 1).following(third) == nil, "an older progress changes nothing")
        #expect(delta(" 你好", at: 5, index: 2).following(third) == nil, "the same progress twice does not append twice")
    }

    @Test func aReaderJoiningMidReplyStartsAtTheNextWholeText() throws {
        #expect(delta("lo", at: 3, index: 1).following(nil) == nil, "a chunk alone is not the reply")
        let joined = try #require(delta(" there", at: 5, index: 2, whole: "Hello there").following(nil))
        #expect(joined.content == "Hello there")
        #expect(delta("!", at: 11, index: 3).following(joined)?.content == "Hello there!")
    }

    @Test func aLostChunkIsNoticedByItsOffsetAndRepairedByTheNextWholeText() throws {
        let first = try #require(delta("one", at: 0, index: 0, whole: "one").following(nil))
        // " two" (offset 3) is lost: " three" claims offset 7, the reader has 3 bytes.
        #expect(delta(" three", at: 7, index: 2).following(first) == nil)
        #expect(delta(" four", at: 13, index: 3).following(first) == nil, "still behind: nothing is appended after a gap")
        let repaired = try #require(delta(" five", at: 18, index: 4, whole: "one two three four five").following(first))
        #expect(repaired.content == "one two three four five")
        #expect(delta(" six", at: 23, index: 5).following(repaired)?.content == "one two three four five six")
    }

    @Test func aProgressWrittenBeforeOffsetsExistedStillReads() throws {
        let old = #"{"id": {"value": "reply"}, "chunkIndex": 2, "chunk": "lo", "content": "Hello", "isFinal": false}"#
        let progress = try BusSchema.makeDecoder().decode(StreamProgress.self, from: Data(old.utf8))
        #expect(progress.offset == 3)
        #expect(progress.content == "Hello")
        let noOffset = #"{"id": {"value": "reply"}, "chunkIndex": 2, "chunk": "lo", "isFinal": false}"#
        #expect(throws: DecodingError.self) { try BusSchema.makeDecoder().decode(StreamProgress.self, from: Data(noOffset.utf8)) }
    }
}

extension DeliveryStateMachineTests {
    /// protod publishing a reply of 1 MB in 10,000 chunks, 50 ms apart at most: what a reader
    /// assembles is the reply exactly, and the bytes published grow linearly.
    @Test func aOneMegabyteReplyIsAssembledExactlyFromLinearlyGrowingBytes() throws {
        var driver = Self.connected(resuming: true)
        let piece = String(repeating: "é", count: 50)  // 100 UTF-8 bytes
        var expected = ""
        for index in 0..<10_000 {
            let chunk = piece + "\(index % 10)"
            expected += chunk
            _ = driver.frame(Self.chunk("r", index, chunk, final: index == 9_999, sequence: 3 + index), at: 10 + Double(index) * 0.001)
        }
        let published = driver.log.compactMap { action -> StreamProgress? in
            guard case .publishStream(let progress) = action else { return nil }
            return progress
        }
        #expect(published.followedTexts.last == expected, "the reply as followed is not the reply")
        #expect(!published.followedTexts.contains("⟂"))
        let bytes = try published.map { try BusSchema.makeEncoder().encode($0).count }.reduce(0, +)
        let wholes = published.filter { $0.content != nil }.count
        print("1 MB reply: \(published.count) progresses, \(wholes) whole, \(bytes) bytes published for \(expected.utf8.count)")
        #expect(bytes <= 4 * expected.utf8.count, "\(bytes) bytes for a reply of \(expected.utf8.count)")
        #expect(wholes <= 16, "the whole text goes at the start and at each doubling only")
    }
}
