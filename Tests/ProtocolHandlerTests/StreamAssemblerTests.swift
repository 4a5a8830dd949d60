import ProtocolHandler
import Testing
import TetherWire

@Suite struct StreamAssemblerTests {
    private func chunk(_ index: Int, _ text: String, final: Bool = false, id: String = "stream-1") -> StreamingChunk {
        StreamingChunk(messageID: MessageID(id), chunkIndex: index, content: text, isFinal: final)
    }

    /// The seed's example: "Hello " then "World!" (final) make "Hello World!".
    @Test func inOrder() throws {
        var assembler = StreamAssembler()
        let first = try #require(assembler.add(chunk(0, "Hello ")) as StreamAssembler.Progress?)
        #expect(first.content == "Hello ")
        #expect(!first.isComplete)
        #expect(first.isFirst)
        let last = try #require(assembler.add(chunk(1, "World!", final: true)) as StreamAssembler.Progress?)
        #expect(last.content == "Hello World!")
        #expect(last.isComplete)
        #expect(assembler.openStreams.isEmpty)
    }

    @Test func outOfOrderAndDuplicated() {
        var assembler = StreamAssembler()
        let early = assembler.add(chunk(2, "c", final: true))
        #expect(early?.content == "")
        #expect(early?.isComplete == false)
        let start = assembler.add(chunk(0, "a"))
        #expect(start?.content == "a")
        let repeated = assembler.add(chunk(0, "a"))
        #expect(repeated?.isDuplicate == true)
        let done = assembler.add(chunk(1, "b"))
        #expect(done?.content == "abc")
        #expect(done?.isComplete == true)
        // A chunk repeated after the end does not open the stream again.
        let late = assembler.add(chunk(1, "b"))
        #expect(late == nil)
    }

    @Test func streamsAreIndependent() {
        var assembler = StreamAssembler()
        _ = assembler.add(chunk(0, "one ", id: "a"))
        _ = assembler.add(chunk(0, "two ", id: "b"))
        let finished = assembler.add(chunk(1, "!", final: true, id: "a"))
        #expect(finished?.content == "one !")
        #expect(assembler.openStreams == [MessageID("b")])
    }
}
