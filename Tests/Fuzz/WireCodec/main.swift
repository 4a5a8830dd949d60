import CFuzzer
import Foundation
import TetherWire

/// One input: any bytes as a frame from the gateway. The codec must answer with a
/// message or an error, never crash; a message it reads must encode, and read back as
/// the same message (the same bytes when encoded again).
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzWireCodec(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let bytes else { return 0 }
    let codec = WireCodec()
    guard let message = try? codec.decode(Data(bytes: bytes, count: count)) else { return 0 }
    if case .unknown = message { return 0 }
    guard let encoded = try? codec.encode(message) else { fatalError("a message the codec read cannot be encoded: \(message)") }
    guard let again = try? codec.decode(encoded), (try? codec.encode(again)) == encoded else {
        fatalError("a message does not read back the same after encoding: \(message)")
    }
    return 0
}

// libFuzzer's command line: a corpus folder, seed folders, -runs=N, -max_total_time=S, …
// (Whichever main the linker keeps, SwiftPM's or libFuzzer's, ends in the driver.)
var argumentCount = CommandLine.argc
var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &arguments, fuzzWireCodec))
