import BusProxy
import Foundation
import Testing
import TetherSchema

/// The relay's routing, without sockets.
@Suite struct CommandRelayTests {
    let caller: [UInt8] = [0, 1, 2]
    let start = ContinuousClock.now

    func frames(_ endpoint: String, _ requestID: String) -> [[UInt8]] {
        [caller, Array(endpoint.utf8), Array(requestID.utf8), Array("send".utf8), Array("{}".utf8)]
    }

    @Test func aCommandGoesToItsOwnerAndTheReplyBackToItsCaller() {
        var table = CommandRelayTable(endpoints: ["protod.cmd", "snapd.cmd"])
        #expect(
            table.fromCaller(frames("protod.cmd", "r1"), now: start)
                == .forward(endpoint: "protod.cmd", frames: [Array("r1".utf8), Array("send".utf8), Array("{}".utf8)]))
        let reply = [Array("r1".utf8), Array("ok".utf8), Array("{}".utf8)]
        #expect(table.fromOwner(reply) == .answer(frames: [caller] + reply))
        #expect(table.fromOwner(reply) == .drop, "answered once")
    }

    @Test func anUnknownEndpointOrAMalformedCommandIsAnsweredInWords() throws {
        var table = CommandRelayTable(endpoints: ["protod.cmd"])
        let unknown = try #require(Self.answer(table.fromCaller(frames("secret.cmd", "r2"), now: start)))
        #expect(unknown.prefix(3) == [caller, Array("r2".utf8), Array("error".utf8)])
        let error = try JSONDecoder().decode(CommandErrorReply.self, from: Data(unknown[3]))
        #expect(error.code == .unknownMethod && error.message.contains("protod.cmd"))
        let short = try #require(Self.answer(table.fromCaller([caller, Array("protod.cmd".utf8)], now: start)))
        #expect(try JSONDecoder().decode(CommandErrorReply.self, from: Data(short[3])).code == .malformed)
    }

    static func answer(_ action: CommandRelayTable.Action) -> [[UInt8]]? {
        if case .answer(let frames) = action { frames } else { nil }
    }

    @Test func aCallerIsForgottenAfterTheMemory() {
        var table = CommandRelayTable(endpoints: ["protod.cmd"], memory: .seconds(60))
        _ = table.fromCaller(frames("protod.cmd", "old"), now: start)
        _ = table.fromCaller(frames("protod.cmd", "new"), now: start + .seconds(61))
        #expect(table.fromOwner([Array("old".utf8), Array("ok".utf8), []]) == .drop)
        #expect(table.fromOwner([Array("new".utf8), Array("ok".utf8), []]) != .drop)
    }
}
