import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema

/// The approvals protod keeps: what arrives, what ends and how, event by event, with time
/// passed in; and the machine asking the gateway for its lists on every connection.
@Suite struct ApprovalBookTests {
    static let t0 = Date(timeIntervalSince1970: 1_776_060_000)
    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
    static func milliseconds(_ seconds: Double) -> Int { Int((at(seconds).timeIntervalSince1970 * 1000).rounded()) }

    static func exec(
        _ id: String, _ command: String = "rm -rf build", created: Double = 0, expires: Double = 60, ask: String = "on-miss"
    )
        -> ApprovalRecord
    {
        ApprovalRecord(
            id: id,
            request: .init(
                command: command, cwd: "/home/me", host: "gateway", agentId: "main", sessionKey: "agent:main:main", ask: ask,
                allowedDecisions: ask == "always" ? ["allow-once", "deny"] : ["allow-once", "allow-always", "deny"]),
            createdAtMs: milliseconds(created), expiresAtMs: milliseconds(expires))
    }

    var book = ApprovalBook()

    @Test mutating func anApprovalArrivesOnceAndEndsWithItsAnswer() throws {
        let arrived = book.handle(.requested(Self.exec("3f0c9c2e-aaaa")), now: Self.at(1))
        #expect(arrived.count == 1)
        let approval = try #require(arrived.first?.arrived)
        #expect(approval.summary == "rm -rf build" && approval.host == "gateway" && approval.workingDirectory == "/home/me" && approval.kind == .exec)
        #expect(approval.expiresAt == Self.at(60))
        #expect(approval.shortID == "3f0c9c2e")
        // The same event again (a list after a reconnect, a replay): nothing new.
        #expect(book.handle(.requested(Self.exec("3f0c9c2e-aaaa")), now: Self.at(2)).isEmpty)
        let resolved = book.handle(.resolved(.init(id: "3f0c9c2e-aaaa", decision: "deny", resolvedBy: "openclaw-control-ui", ts: nil)), now: Self.at(3))
        let ended = try #require(resolved.first?.ended)
        #expect(ended.how == .resolved && ended.decision == .deny && ended.by == "openclaw-control-ui")
        #expect(ended.words == "denied by openclaw-control-ui")
        #expect(book.pending.isEmpty && resolved.first?.pending.isEmpty == true)
        // The gateway's resolved event after Tether's own answer ended it: nothing more.
        #expect(book.handle(.resolved(.init(id: "3f0c9c2e-aaaa", decision: "deny", resolvedBy: nil, ts: nil)), now: Self.at(4)).isEmpty)
    }

    @Test mutating func anApprovalExpiresByItsOwnTimeForTheGatewaySaysNothing() throws {
        _ = book.handle(.requested(Self.exec("a1", expires: 30)), now: Self.at(0))
        _ = book.handle(.requested(Self.exec("b2", expires: 90)), now: Self.at(0))
        #expect(book.nextExpiry == Self.at(30))
        #expect(book.handle(.tick, now: Self.at(29.9)).isEmpty)
        let expired = book.handle(.tick, now: Self.at(30))
        #expect(expired.map { $0.ended?.approval.id } == ["a1"])
        #expect(expired.first?.ended?.how == .expired)
        #expect(book.pending.map(\.id) == ["b2"] && book.nextExpiry == Self.at(90))
        // One that arrives already expired (a list long after) is not shown at all.
        #expect(book.handle(.requested(Self.exec("c3", expires: 50)), now: Self.at(60)).isEmpty)
    }

    @Test mutating func theGatewaysListAfterAReconnectBringsWhatWasMissedAndEndsWhatIsGone() {
        _ = book.handle(.requested(Self.exec("kept")), now: Self.at(0))
        _ = book.handle(.requested(Self.exec("answered-elsewhere")), now: Self.at(0))
        let updates = book.handle(.listed(.exec, [Self.exec("kept"), Self.exec("raised-while-away", "make deploy")]), now: Self.at(10))
        #expect(updates.compactMap { $0.ended?.approval.id } == ["answered-elsewhere"])
        #expect(updates.compactMap { $0.ended?.how } == [.gone])
        #expect(updates.compactMap { $0.arrived?.id } == ["raised-while-away"])
        #expect(book.pending.map(\.id) == ["kept", "raised-while-away"])
        // A list of the other kind leaves these alone.
        #expect(book.handle(.listed(.plugin, []), now: Self.at(11)).isEmpty)
    }

    @Test mutating func aPluginApprovalIsShownByItsTitleAndTakesEveryDecision() throws {
        let record = ApprovalRecord(
            id: "plugin:6b2d1f0e-2c5e", request: .init(agentId: "main", pluginId: "mail-guard", title: "Send email?", description: "to bob@example.com"),
            createdAtMs: Self.milliseconds(0), expiresAtMs: Self.milliseconds(120))
        let approval = try #require(book.handle(.requested(record), now: Self.at(0)).first?.arrived)
        #expect(approval.kind == .plugin && approval.summary == "Send email?" && approval.detail == "to bob@example.com")
        #expect(approval.severity == "warning", "no severity is read as a warning, as the gateway's own clients do")
        #expect(approval.allowedDecisions == ApprovalDecision.allCases)
    }

    @Test mutating func allowAlwaysIsNotOfferedWhenThePolicyAsksEveryTime() throws {
        let approval = try #require(book.handle(.requested(Self.exec("x", ask: "always")), now: Self.at(0)).first?.arrived)
        #expect(approval.allowedDecisions == [.allowOnce, .deny])
    }

    @Test mutating func anIdIsFoundByAUniquePrefixAndWordsSayWhyNot() {
        _ = book.handle(.requested(Self.exec("3f0c9c2e-aaaa")), now: Self.at(0))
        _ = book.handle(.requested(Self.exec("3f0d0000-bbbb")), now: Self.at(0))
        #expect((try? book.approval(named: "3f0c").get())?.id == "3f0c9c2e-aaaa")
        #expect((try? book.approval(named: " 3F0D ").get())?.id == "3f0d0000-bbbb")
        guard case .failure(let ambiguous) = book.approval(named: "3f0") else {
            Issue.record("an ambiguous prefix was taken")
            return
        }
        #expect(ambiguous.description.contains("names 2 waiting approvals"))
        guard case .failure(let unknown) = book.approval(named: "zz") else {
            Issue.record("an unknown id was taken")
            return
        }
        #expect(unknown.description.contains("3f0c9c2e") && unknown.description.contains("3f0d0000"))
    }

    @Test mutating func withoutTheScopeNoneIsKeptAndTheWordsSayWhy() {
        _ = book.handle(.requested(Self.exec("a")), now: Self.at(0))
        let updates = book.handle(.availability("lacks the scope"), now: Self.at(1))
        #expect(updates.compactMap { $0.ended?.how } == [.gone])
        #expect(book.pending.isEmpty && book.unavailable == "lacks the scope")
        #expect(updates.last?.unavailable == "lacks the scope")
        #expect(book.handle(.availability("lacks the scope"), now: Self.at(2)).isEmpty)
        #expect(book.handle(.availability(nil), now: Self.at(3)).map(\.unavailable) == [nil])
    }

    @Test mutating func theGatewaysClockIsTakenOutOfItsTimes() throws {
        // The gateway's clock runs 5 s ahead of protod's: its "expires at 60" is protod's 55.
        let approval = try #require(book.handle(.requested(Self.exec("a")), now: Self.at(0), clockOffset: 5000).first?.arrived)
        #expect(approval.expiresAt == Self.at(55))
    }

    @Test func theMachineAsksForTheListsOnEveryConnectionWithTheScopeAndRetainsWhatArrives() throws {
        var machine = DeliveryStateMachine(settings: .init(probeAfter: 2, probeDeadline: 2, streamInterval: 0), now: Self.t0)
        let codec = OpenClawCodec()
        let started = machine.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0)), now: Self.at(0))
        #expect(started.contains { if case .retainApprovals(let update) = $0 { update.unavailable != nil } else { false } })
        var gateway = GatewayInfo(dialect: .openclaw, protocolVersion: 3, mainSessionKey: "agent:main:main", scopes: ["operator.read", "operator.write"])
        let without = machine.handle(.connectionUp(epoch: 1, id: "c1", gateway: gateway), now: Self.at(1))
        let methods = { (actions: [DeliveryStateMachine.Action]) in
            actions.compactMap { action -> String? in
                guard case .write(let frame) = action, case .request(_, let method, _)? = try? codec.decode(frame.text) else { return nil }
                return method
            }
        }
        #expect(!methods(without).contains { $0.contains("approval") })
        #expect(machine.approvals.unavailable?.contains("operator.approvals") == true)
        _ = machine.handle(.connectionDown, now: Self.at(2))
        gateway.scopes?.append(OpenClawProtocol.approvalsScope)
        let with = machine.handle(.connectionUp(epoch: 2, id: "c2", gateway: gateway), now: Self.at(3))
        #expect(methods(with).filter { $0.contains("approval") }.sorted() == ["exec.approval.list", "plugin.approval.list"])
        #expect(machine.approvals.unavailable == nil)
        let event = codec.encode(.event(name: "exec.approval.requested", payload: try JSONValue(encoding: Self.exec("e1", expires: 30)), seq: 1))
        let arrived = machine.handle(.openClawFrame(try codec.decode(event)), now: Self.at(4))
        #expect(arrived.contains { if case .retainApprovals(let update) = $0 { update.arrived?.id == "e1" } else { false } })
        #expect(machine.nextDeadline.map { $0 <= Self.at(30) } == true, "its expiry is a deadline of the machine")
        let expired = machine.handle(.tick, now: Self.at(30))
        #expect(expired.contains { if case .retainApprovals(let update) = $0 { update.ended?.how == .expired } else { false } })
    }
}
