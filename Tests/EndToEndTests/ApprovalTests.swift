import Foundation
import Logging
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherTesting

@testable import ConnectionManager

/// OpenClaw's exec approvals through the real programs, against the development gateway
/// (a message `exec: COMMAND` makes its agent ask to run COMMAND): protod keeps what the
/// gateway waits for while no front end runs, `tether approvals` lists it and `tether
/// approve` answers it; one that expires says so; without the scope, the words say why.
@Suite(.serialized) struct ApprovalTests {
    /// The pending approvals, as `tether approvals --json` prints them.
    static func approvals(_ set: ComposedSet) throws -> ApprovalsUpdate {
        let listed = try set.tether(["approvals", "--json"])
        guard listed.status == 0 else { throw TestFailure("tether approvals: \(listed.status) \(listed.standardError)") }
        return try BusSchema.makeDecoder().decode(ApprovalsUpdate.self, from: Data(listed.standardOutput.utf8))
    }

    @Test func anApprovalRaisedWhileNoFrontEndRanIsListedAndAnsweredFromTheCommandLine() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        // Waits for the reply in the background; the approval is raised and waits on its own.
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: make deploy", "--run-dir", set.run.path], outputDirectory: set.outputs.path,
            name: "send")
        defer { sender.stop() }
        var pending: [PendingApproval] = []
        #expect(
            try await eventually(timeout: .seconds(20)) {
                pending = try Self.approvals(set).pending
                return !pending.isEmpty
            }, "no approval listed")
        let approval = try #require(pending.first)
        #expect(approval.summary == "make deploy" && approval.kind == .exec && approval.host == "gateway", "\(approval)")
        #expect(approval.allowedDecisions == [.allowOnce, .allowAlways, .deny])
        let listed = try set.tether(["approvals"])
        #expect(listed.standardOutput.contains("\(approval.shortID)  run `make deploy` on gateway"), "\(listed.standardOutput)")
        let answered = try set.tether(["approve", approval.shortID, "allow-once"])
        #expect(answered.status == 0, "\(answered.standardError)")
        #expect(answered.standardOutput.contains("allowed once"), "\(answered.standardOutput)")
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        #expect(sender.standardOutput == "Ran `make deploy` (allowed once): done.\n", "\(sender.standardOutput)")
        #expect(try Self.approvals(set).pending.isEmpty)
        // Answered again: refused in words, nothing sent.
        let again = try set.tether(["approve", approval.shortID, "deny"])
        #expect(again.status != 0 && again.standardError.contains("no approval is waiting"), "\(again.standardError)")
    }

    @Test func anApprovalThatExpiresIsSaidToHaveExpiredAndAFrontEndStartedLaterSeesWhatWaits() async throws {
        let set = try await ComposedSet.openClaw(
            environment: ["TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0", "TETHER_GATEWAY_APPROVAL_TIMEOUT": "6"])
        defer { set.stop() }
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: rm -rf build", "--run-dir", set.run.path], outputDirectory: set.outputs.path,
            name: "send")
        defer { sender.stop() }
        #expect(try await eventually(timeout: .seconds(20)) { try !Self.approvals(set).pending.isEmpty }, "no approval listed")
        // A front end started after the approval was raised is shown it, then its end.
        let watch = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch")
        defer { watch.stop() }
        #expect(await eventually(timeout: .seconds(10)) { watch.standardOutput.contains("approval waiting: ") }, "\(watch.standardOutput)")
        #expect(await eventually(timeout: .seconds(15)) { watch.standardOutput.contains("expired unanswered") }, "\(watch.standardOutput)")
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        #expect(sender.standardOutput == "Did not run `rm -rf build`: nobody answered the approval in time.\n", "\(sender.standardOutput)")
        #expect(try Self.approvals(set).pending.isEmpty)
    }

    @Test func aWiderScopeForAPairedDeviceWaitsForAPersonAsOnTheRealGateway() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let identity = DeviceIdentity()
        let chat = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: OpenClawProtocol.chatScopes)
        guard case .ready = chat else { throw TestFailure("the chat scopes: \(chat)") }
        let wider = OpenClawProtocol.chatScopes + [OpenClawProtocol.approvalsScope]
        let upgrade = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: wider)
        guard case .refused(.scopeUpgradeRequired(let request?, let words)) = upgrade else { throw TestFailure("a wider scope: \(upgrade)") }
        #expect(words.contains("operator.approvals") && words.contains(request), "\(words)")
        #expect(try set.approve(request).status == 0)
        let approved = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: wider)
        guard case .ready(let info, _) = approved else { throw TestFailure("after the approval: \(approved)") }
        #expect(info.scopes?.contains(OpenClawProtocol.approvalsScope) == true)
    }

    @Test func withoutTheScopeTheWordsSayWhyAndTheGatewayHasNobodyToAsk() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let update = try Self.approvals(set)
        #expect(update.unavailable?.contains("operator.approvals") == true, "\(String(describing: update.unavailable))")
        let listed = try set.tether(["approvals"])
        #expect(
            listed.standardOutput.hasPrefix("no approvals: Tether's connection to the gateway lacks the scope operator.approvals"), "\(listed.standardOutput)")
        // As the real gateway does: with no client that may approve, the request ends at once.
        let send = try set.tether(["send", "exec: ls"])
        #expect(send.standardOutput == "Did not run `ls`: nobody answered the approval in time.\n", "\(send.standardOutput)")
    }
}
