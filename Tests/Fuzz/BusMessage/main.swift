import CFuzzer
import Foundation
import TetherBus
import TetherSchema

/// One input: any bytes, split at zero bytes into frames, as a message off the bus.
/// The decoder must accept it or throw, never crash; a header it reads must read back the same.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzBusMessage(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let bytes else { return 0 }
    let input = UnsafeBufferPointer(start: bytes, count: count)
    let frames = input.split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false).map { Array($0) }
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
