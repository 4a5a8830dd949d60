import CZeroMQ
import Foundation
import Testing
import TetherBus

@testable import BusProxy

/// How the proxy's threads are told to stop: the command arrives, or the failure is said in
/// words, never ignored (a thread not told would be waited for for ever).
@Suite struct ProxyControlTests {
    @Test func theCommandReachesTheThreadsControlSocket() async throws {
        let endpoint = "inproc://tether-test-control-\(UUID().uuidString)"
        let control = try ZMQSocket(type: ZMQ_PAIR, context: .shared)
        defer { control.close() }
        try control.bind(endpoint)
        try sendControl("TERMINATE", to: endpoint)
        var received: [[UInt8]]?
        for _ in 0..<200 where received == nil {
            received = try control.receive()
            if received == nil { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(received == [Array("TERMINATE".utf8)])
    }

    @Test func aCommandThatCannotBeSentIsAControlErrorInWords() {
        do {
            try sendControl("TERMINATE", to: "nowhere://at-all")
            Issue.record("a command to an endpoint libzmq cannot connect to was said to be sent")
        } catch {
            #expect(error.code == .control)
            #expect(error.description.hasPrefix("cannot connect to nowhere://at-all to send TERMINATE: "), "\(error)")
        }
    }
}
