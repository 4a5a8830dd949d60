import Foundation
import Testing
import TetherTesting

/// A bounded run of the libFuzzer targets (scripts/fuzz): the gateway protocol codec and the
/// bus message decoder, built with the fuzzer and address sanitizers.
@Suite struct FuzzTests {
    @Test func codecAndBusDecoderSurviveFiftyThousandInputsEach() throws {
        let run = try TestRunDirectory()
        let fuzz = try ChildProcess("/bin/bash", [Programs.packageRoot + "/scripts/fuzz", "--runs", "50000"], outputDirectory: run.path, name: "fuzz")
        let status = try fuzz.waitForExit(timeout: .seconds(1200))
        #expect(status == 0, "scripts/fuzz failed:\n\(fuzz.standardError.suffix(4000))")
        #expect(fuzz.standardOutput.contains("fuzz-wire: 50000 inputs, no crash"), "\(fuzz.standardOutput)")
        #expect(fuzz.standardOutput.contains("fuzz-bus: 50000 inputs, no crash"), "\(fuzz.standardOutput)")
        print(fuzz.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
