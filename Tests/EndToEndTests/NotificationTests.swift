import Foundation
import Testing
import TetherSchema
import TetherTesting

/// A private D-Bus session bus (dbus-daemon in the test's run directory) with a stand-in for
/// the desktop's notification service on it (Tests/Notifications/notification_service.py,
/// which owns `org.freedesktop.Notifications` and records each call).
final class NotificationServiceStandIn {
    static let script = Programs.packageRoot + "/Tests/Notifications/notification_service.py"

    /// Why the stand-in cannot run here, or nil when it can.
    static let unavailable: String? = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            return "dbus-daemon is not installed (scripts/bootstrap --tests installs dbus-daemon)"
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
            let check = try? ChildProcess(
                "/usr/bin/python3", ["-c", "import dbus, dbus.service, dbus.mainloop.glib, gi"], outputDirectory: "/tmp", name: "check"),
            (try? check.waitForExit(timeout: .seconds(10))) == 0
        else { return "Debian's python3 with python3-dbus and python3-gi is needed (scripts/bootstrap --tests installs them)" }
        return nil
    }()

    let address: String
    private let daemon: ChildProcess
    private let service: ChildProcess
    private let log: String

    init(directory: String) async throws {
        address = "unix:path=\(directory)/session-bus.socket"
        log = directory + "/notifications.jsonl"
        daemon = try ChildProcess(
            "/usr/bin/dbus-daemon", ["--session", "--nofork", "--print-address", "--address=\(address)"], outputDirectory: directory, name: "dbus")
        let listening = await eventually(timeout: .seconds(10)) { [daemon] in daemon.standardOutput.contains("unix:path=") }
        if !listening { throw TestFailure("dbus-daemon did not start: \(daemon.standardError)") }
        service = try ChildProcess(
            "/usr/bin/python3", [Self.script, log], environment: ["DBUS_SESSION_BUS_ADDRESS": address], outputDirectory: directory, name: "notifications")
        let ready = await eventually(timeout: .seconds(10)) { [service] in service.standardOutput.contains("ready") }
        if !ready { throw TestFailure("the notification service did not start: \(service.standardError)") }
    }

    deinit {
        service.stop()
        daemon.stop()
    }

    /// The calls the service answered so far, oldest first.
    var calls: [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    var shown: [[String: Any]] { calls.filter { $0["call"] as? String == "Notify" } }
    var closed: [Int] { calls.filter { $0["call"] as? String == "CloseNotification" }.compactMap { $0["id"] as? Int } }

    /// Waits until `count` notifications were shown; returns them all.
    func waitForShown(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [[String: Any]] {
        guard await eventually(timeout: timeout, { self.shown.count >= count }) else {
            throw TestFailure("\(count) notifications were not shown within \(timeout): \(calls)")
        }
        return shown
    }
}

/// tether-notify through the real programs: the set composed with its session bus pointing
/// at a private dbus-daemon with a stand-in notification service.
@Suite(.serialized, .enabled(if: NotificationServiceStandIn.unavailable == nil, "\(NotificationServiceStandIn.unavailable ?? "")"))
struct NotificationTests {
    /// How long to wait for a notification that must not come, after the reply is on the bus.
    static let quiet: Duration = .milliseconds(1500)

    /// The attention of the front ends of `kind` that `tether status --json` lists.
    static func attention(of kind: String, in set: ComposedSet) throws -> [String] {
        let status = try set.tether(["status", "--json"])
        let json = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any]
        let frontEnds = json?["frontEnds"] as? [[String: Any]] ?? []
        return frontEnds.filter { $0["frontEnd"] as? String == kind }.map { $0["attention"] as? String ?? "unknown" }
    }

    /// tether-notify's state word, as `tether status` shows its heartbeat.
    static func notifyState(_ set: ComposedSet) throws -> String? {
        let status = try set.tether(["status"])
        let row = status.standardOutput.split(separator: "\n").first { $0.hasPrefix("tether-notify") }
        return row?.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.map(String.init)
    }

    static func send(_ text: String, _ set: ComposedSet) throws {
        let sent = try set.tether(["send", text])
        guard sent.status == 0 else {
            throw TestFailure("tether send \(text): \(sent.status.map(String.init) ?? "running") \(sent.standardOutput) \(sent.standardError)")
        }
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func aReplyNobodyLooksAtIsNotifiedAndTheTerminalsFocusDecides() async throws {
        let directory = try TestRunDirectory()
        let notifications = try await NotificationServiceStandIn(directory: directory.path)
        let set = try await ComposedSet(environment: ["DBUS_SESSION_BUS_ADDRESS": notifications.address, "TETHER_CHUNK_DELAY": "0"], in: directory)
        defer { set.stop() }
        #expect(await eventually { set.log(of: "notify").contains("desktop notifications are shown through org.freedesktop.Notifications") })

        // No front end: tether send is nobody's eyes. The first line of the reply, markup escaped.
        try Self.send("deploy <now> & then\nthe second line", set)
        let first = try await notifications.waitForShown(1)
        print("shown with no front end attached: \(first)")
        #expect(first[0]["summary"] as? String == "Opta replied", "\(first)")
        #expect(first[0]["body"] as? String == "You said: deploy &lt;now&gt; &amp; then", "\(first)")
        #expect(first[0]["app"] as? String == "Tether" && first[0]["category"] as? String == "im.received")
        try await Task.sleep(for: Self.quiet)
        #expect(notifications.shown.count == 1, "the user's own message is not notified: \(notifications.calls)")

        // The terminal UI attached: it may be looked at, so the notification shown is closed.
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 100, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor("You said: deploy")
        #expect(await eventually { notifications.closed == [first[0]["id"] as? Int ?? -1] }, "\(notifications.calls)")
        // Focus in, as the terminal reports it (CSI I) once the UI asked for focus reports.
        try ui.press("-H", "1b", "5b", "49")
        #expect(await eventually { (try? Self.attention(of: "tether", in: set)) == ["focused"] })
        try Self.send("while looking", set)
        _ = try await ui.waitFor("You said: while looking")
        try await Task.sleep(for: Self.quiet)
        #expect(notifications.shown.count == 1, "a front end has the user's attention: \(notifications.calls)")

        // Focus out (CSI O): the next reply is notified.
        try ui.press("-H", "1b", "5b", "4f")
        #expect(await eventually { (try? Self.attention(of: "tether", in: set)) == ["away"] })
        try Self.send("while away", set)
        let second = try await notifications.waitForShown(2)
        #expect(second[1]["summary"] as? String == "Opta replied" && second[1]["body"] as? String == "You said: while away", "\(second)")
        #expect(second[1]["replaces"] as? Int == 0, "a new notification, not the closed one again")
        // The notification may come before the screen's next draw: the reply is waited for there.
        let drawn = await eventually(timeout: .seconds(10)) { ui.screen().contains("You said: while away") }
        #expect(drawn, "the screen is unchanged by focus reports: \(ui.screen())")
        print("calls: \(notifications.calls)")
    }

    @Test func anApprovalWaitingIsNotifiedAndClosedOnceAnswered() async throws {
        let directory = try TestRunDirectory()
        let notifications = try await NotificationServiceStandIn(directory: directory.path)
        let set = try await ComposedSet(
            environment: [
                "TETHER_DIALECT": "openclaw", "DBUS_SESSION_BUS_ADDRESS": notifications.address, "TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0",
            ], in: directory)
        defer { set.stop() }
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: make deploy TOKEN=s3cret", "--run-dir", set.run.path],
            outputDirectory: set.outputs.path, name: "send")
        defer { sender.stop() }
        let shown = try await notifications.waitForShown(1, timeout: .seconds(20))
        print("the approval's notification: \(shown)")
        #expect(shown[0]["summary"] as? String == "Approval needed: run a command", "\(shown)")
        #expect(shown[0]["body"] as? String == "make deploy TOKEN=&lt;redacted&gt;", "the secret is hidden: \(shown)")
        #expect(shown[0]["urgency"] as? Int == 2)
        let pending = try ApprovalTests.approvals(set).pending
        let approval = try #require(pending.first)
        let answered = try set.tether(["approve", approval.shortID, "allow-once"])
        #expect(answered.status == 0, "\(answered.standardError)")
        #expect(
            await eventually { notifications.closed.contains(shown[0]["id"] as? Int ?? -1) }, "answered: its notification is closed: \(notifications.calls)")
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        // The run's words while the approval waited, then the gateway's turn after it: each a reply notified.
        let replied = await eventually(timeout: .seconds(10)) {
            // Within 10 s the second replaces the first ("Bot: 2 replies").
            notifications.shown.contains {
                ($0["summary"] as? String)?.hasPrefix("Bot") == true && ($0["body"] as? String)?.hasPrefix("Ran `make deploy") == true
            }
        }
        #expect(replied, "\(notifications.shown)")
    }

    @Test func offByTheFlagNothingIsShown() async throws {
        let directory = try TestRunDirectory()
        let notifications = try await NotificationServiceStandIn(directory: directory.path)
        let set = try await ComposedSet(
            environment: ["DBUS_SESSION_BUS_ADDRESS": notifications.address, "TETHER_NOTIFICATIONS": "off", "TETHER_CHUNK_DELAY": "0"], in: directory)
        defer { set.stop() }
        try Self.send("hello", set)
        try await Task.sleep(for: Self.quiet)
        #expect(notifications.calls.isEmpty, "\(notifications.calls)")
        #expect(set.log(of: "notify").contains("desktop notifications are off: --notifications off"), "\(set.log(of: "notify"))")
        #expect(try Self.notifyState(set) == "off")
    }

    @Test func withoutASessionBusTheSetRunsAndSaysSoOnce() async throws {
        let directory = try TestRunDirectory()
        let set = try await ComposedSet(
            environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(directory.path)/no-session-bus.socket", "TETHER_CHUNK_DELAY": "0"], in: directory)
        defer { set.stop() }
        try Self.send("one", set)
        try Self.send("two", set)
        try await Task.sleep(for: Self.quiet)
        let log = set.log(of: "notify")
        print("tether-notify's log:\n\(log)")
        let said = log.components(separatedBy: "desktop notifications are not shown: cannot connect to the session bus").count - 1
        #expect(said == 1, "said once, whatever the replies: \(log)")
        #expect(set.state()?.programs.first { $0.name == "notify" }?.restarts == 0, "it never crashed")
        // The state travels in tether-notify's heartbeat: read until it arrives, and say what was read.
        var state: String?
        let reported = await eventually(timeout: .seconds(10)) {
            state = try? Self.notifyState(set)
            return state == "unavailable"
        }
        #expect(reported, "tether status says tether-notify is \(state ?? "absent")")
    }
}
