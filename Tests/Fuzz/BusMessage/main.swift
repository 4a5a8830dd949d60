import CFuzzer
import Foundation
import TetherBus
import TetherSchema

/// One input: any bytes, split at zero bytes into frames, as a message off the bus.
/// The decoder must accept it or throw, never crash; it must read a header as Foundation's
/// JSONDecoder reads it (or refuse it as that does), write it as JSONEncoder writes it, and
/// a header it reads must read back the same.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzBusMessage(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let bytes else { return 0 }
    let input = UnsafeBufferPointer(start: bytes, count: count)
    let frames = input.split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false).map { Array($0) }
    if frames.count > 1 {
        let read = try? BusHeader(jsonBytes: frames[1])
        let reference = try? BusSchema.makeDecoder().decode(BusHeader.self, from: Data(frames[1]))
        guard read == reference else { fatalError("the header reader and JSONDecoder disagree: \(String(decoding: frames[1], as: UTF8.self))") }
        if let read, read.jsonBytes() != (try? Array(BusSchema.makeEncoder().encode(read))) {
            fatalError("the header writer and JSONEncoder disagree: \(read)")
        }
    }
    // The same for the body of a wire frame, the bus's busiest body.
    if let body = frames.last {
        let read = body.withUnsafeBytes { try? WireFrame(jsonBytes: $0) }
        guard read == (try? BusSchema.makeDecoder().decode(WireFrame.self, from: Data(body))) else {
            fatalError("the wire frame reader and JSONDecoder disagree: \(String(decoding: body, as: UTF8.self))")
        }
        if let read, read.jsonBytes() != (try? Array(BusSchema.makeEncoder().encode(read))) {
            fatalError("the wire frame writer and JSONEncoder disagree: \(read)")
        }
    }
    guard let message = try? BusMessage(frames: frames) else { return 0 }
    guard let header = try? BusSchema.makeEncoder().encode(message.header),
        let again = try? BusMessage(frames: [Array(message.topic.name.utf8), Array(header), Array(message.body)]),
        again.header == message.header
    else {
        fatalError("a bus header does not read back the same: \(message.header)")
    }
    return 0
}

// libFuzzer's command line: a corpus folder, seed folders, -runs=N, -max_total_time=S, …
// (Whichever main the linker keeps, SwiftPM's or libFuzzer's, ends in the driver.)
var argumentCount = CommandLine.argc
var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &arguments, fuzzBusMessage))
