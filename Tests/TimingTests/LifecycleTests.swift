import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting
import TetherWire

/// The connection's lifecycle through the whole set: suspend and resume by command, by the
/// last front end leaving, and by the machine sleeping.
@Suite(.serialized) struct LifecycleTests {
    /// Prints a recorded flow, one line a message, with the time since the first.
    private func printFlow(_ entries: [TopicRecorder.Entry]) {
        guard let start = entries.first?.receivedAt else { return }
        for entry in entries {
            let offset = start.duration(to: entry.receivedAt)
            let body = String(decoding: entry.message.body, as: UTF8.self).prefix(140)
            print("  +\(offset.formatted(.units(allowed: [.milliseconds]))) \(entry.topic) \(body)")
        }
    }

    @Test func suspendThenResumeSavesThenReconnectsInOrderOnTheBus() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "lifecycle-test", runDirectory: set.run.runDirectory, logger: Logger(label: "lifecycle-test"))
        let flow = try await TopicRecorder(bus: client, prefixes: [Topic.connectionState.name, Topic.snapshotSaved.name])
        let hello = try set.tether(["send", "hello"])
        #expect(hello.status == 0, "\(hello.standardError)")
        let before = try #require(await flow.waitFor(.connectionState, as: ConnectionStatus.self) { $0.phase == .connected }.decode(ConnectionStatus.self))

        // The front end's part of a suspend (what the terminal UI does on Ctrl-Z): save what is on screen.
        let screen = ["You: hello", "Opta: You said: hello"]
        _ = try await client.request(
            SaveDisplayCommand.self, DisplaySnapshot(frontEnd: "lifecycle-test", screen: screen, scrollOffset: 0, draft: "half a thou", history: ["hello"]))
        let suspendAsked = ContinuousClock.now
        let suspend = try set.tether(["suspend"])
        #expect(suspend.status == 0, "\(suspend.standardError)")
        #expect(suspend.standardOutput.contains("Disconnected (app suspended)"))
        let suspended = try await flow.waitFor(.connectionState, as: ConnectionStatus.self, since: suspendAsked) { $0.phase == .suspended }
        #expect(suspended.decode(ConnectionStatus.self)?.suspendReason == .command)
        let closed = await eventually(timeout: .seconds(5)) { set.log(of: "gateway").contains("client disconnected") }
        #expect(closed, "the gateway did not see a graceful close within the 5 s deadline")
        print("suspend: \"Disconnected (app suspended)\" \(suspendAsked.duration(to: suspended.receivedAt)) after the command")
        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("Disconnected (app suspended)"), "\(status.standardOutput)")

        // Coming back: the first frame is the snapshot, whatever the connection is doing.
        let frameAsked = ContinuousClock.now
        let frame = try await client.request(SnapshotCommand.self, .init(frontEnd: "lifecycle-test"))
        print("first frame on resume (display, identity, transcript) in \(frameAsked.duration(to: .now))")
        #expect(frame.display?.screen == screen)
        #expect(frame.display?.draft == "half a thou")
        #expect(frame.identity == before.identity, "the saved identity is the one connd connected with")
        #expect(frame.transcript.entries.map(\.content).suffix(2) == ["hello", "You said: hello"])

        let resumeAsked = ContinuousClock.now
        let resume = try set.tether(["resume"])
        #expect(resume.status == 0, "\(resume.standardError)")
        let connected = try await flow.waitFor(.connectionState, as: ConnectionStatus.self, since: resumeAsked) { $0.phase == .connected }
        let after = try #require(connected.decode(ConnectionStatus.self))
        #expect(after.identity == before.identity, "reconnected with the same identity and the stored credential, nothing asked")
        #expect(after.epoch == before.epoch + 1)
        print("resume: connected \(resumeAsked.duration(to: connected.receivedAt)) after the command")
        let again = try set.tether(["send", "back again"])
        #expect(again.standardOutput.contains("You said: back again"))

        // The flow, in order, as the bus carried it.
        let entries = await flow.entries.filter { !$0.message.header.replay && $0.receivedAt >= suspendAsked.advanced(by: .seconds(-5)) }
        let steps = entries.compactMap { entry -> String? in
            if entry.topic == .snapshotSaved, let saved = entry.decode(SnapshotSaved.self), saved.kind == .display { return "display saved" }
            guard entry.topic == .connectionState, let state = entry.decode(ConnectionStatus.self) else { return nil }
            return state.phase.rawValue
        }
        // "Returning from background reconnects": coming back from a suspend is a reconnect
        // ("Reconnecting…"), not a first connect, after the display was saved.
        let expected = ["display saved", "suspended", "reconnecting", "connected"]
        let firstSaved = steps.firstIndex(of: "display saved")
        #expect(firstSaved != nil)
        if let firstSaved {
            let ordered = steps[firstSaved...].reduce(into: [String]()) { seen, step in
                if seen.last != step { seen.append(step) }
            }
            #expect(Array(ordered.prefix(4)) == expected, "the flow on the bus: \(ordered)")
        }
        print("suspend and resume on the bus:")
        printFlow(entries)
        await client.close()
    }

    @Test func lastFrontEndLeavingSuspendsAfterTheGracePeriodAndOneArrivingResumes() async throws {
        let set = try await ComposedSet(environment: ["TETHER_IDLE_SUSPEND": "1"])
        defer { set.stop() }
        let client = try BusClient(source: "lifecycle-test", runDirectory: set.run.runDirectory, logger: Logger(label: "lifecycle-test"))
        let states = try await BusRecorder(bus: client, topic: .connectionState, as: ConnectionStatus.self)
        let presences = try await TopicRecorder(bus: client, prefixes: [Topic.frontEndPresence.name])
        let first = try await states.waitFor { $0.phase == .connected }.value
        // No front end has come yet: nothing to suspend for.
        try await Task.sleep(for: .seconds(2))
        #expect(await states.latest?.phase == .connected)

        // A front end attaches, then quits (SIGTERM: it says it leaves).
        let watch = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch-1")
        defer { watch.stop() }
        let present: TopicRecorder.Entry
        do {
            present = try await presences.waitFor(.frontEndPresence, as: FrontEndPresence.self) { $0.frontEnd == "tether watch" && $0.state == .active }
        } catch {
            Issue.record(
                "tether watch never said it was there (\(watch.isRunning ? "running" : "exited")): \(watch.standardError)\nsnapd: \(set.log(of: "snapd").suffix(2000))"
            )
            throw error
        }
        let announced = present.decode(FrontEndPresence.self)
        let instance = announced?.instance
        #expect(announced?.renewalSeconds == 30, "renewed seldom: \(String(describing: announced))")
        // Longer than a presence renewed every second would last (3 s): it renews every 30 s, and lasts three of them.
        try await Task.sleep(for: .seconds(4))
        #expect(await states.latest?.phase == .connected, "suspended while a front end was attached")
        let left = ContinuousClock.now
        watch.signal(SIGTERM)
        #expect(try watch.waitForExit(timeout: .seconds(5)) == 0, "tether watch did not end cleanly: \(watch.standardError)")
        _ = try await presences.waitFor(.frontEndPresence, as: FrontEndPresence.self, since: left) { $0.instance == instance && $0.state == .leaving }
        let idle = try await states.waitFor(timeout: .seconds(10), since: left) { $0.phase == .suspended }
        #expect(idle.value.suspendReason == .idle)
        #expect(idle.value.words == "Disconnected (app suspended)")
        let grace = left.duration(to: idle.receivedAt)
        #expect(grace >= .milliseconds(900), "suspended before the 1 s grace period: \(grace)")
        print("last front end left: suspended \(grace) later (grace period 1 s)")

        // A front end comes back: the connection resumes by itself.
        let arrived = ContinuousClock.now
        // It renews its presence every second, so that its crash is noticed in 3 s rather than 90.
        let second = try ChildProcess(
            Programs.path("tether"), ["watch", "--run-dir", set.run.path], environment: [PresenceAnnouncer.renewalVariable: "1"],
            outputDirectory: set.run.path, name: "watch-2")
        defer { second.stop() }
        let resumed = try await states.waitFor(since: arrived) { $0.phase == .connected }
        #expect(resumed.value.epoch == first.epoch + 1)
        #expect(resumed.value.identity == first.identity)
        print("a front end started: connected again \(arrived.duration(to: resumed.receivedAt)) after it started")

        // One that dies without a word counts as gone once its presence lapses (3 s), then the grace period.
        let killed = ContinuousClock.now
        second.signal(SIGKILL)
        let lapsed = try await states.waitFor(timeout: .seconds(15), since: killed) { $0.phase == .suspended }
        #expect(lapsed.value.suspendReason == .idle)
        print("front end killed: suspended \(killed.duration(to: lapsed.receivedAt)) later (three missed renewals of 1 s + grace 1 s)")

        // A command suspend is not undone by a front end arriving.
        #expect(try set.tether(["resume"]).status == 0)
        _ = try await states.waitFor(since: lapsed.receivedAt) { $0.phase == .connected }
        #expect(try set.tether(["suspend"]).status == 0)
        let third = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch-3")
        defer { third.stop() }
        try await Task.sleep(for: .seconds(2))
        let latest = await states.latest
        #expect(latest?.phase == .suspended && latest?.suspendReason == .command, "a front end resumed a command suspend: \(String(describing: latest))")
        await client.close()
    }

    @Test(.enabled(if: DBus.available, "dbus-daemon and dbus-monitor are needed to stand in for logind"))
    func machineSleepingSuspendsAndWakingResumes() async throws {
        let run = try TestRunDirectory()
        let dbus = try DBus(directory: run.path)
        defer { dbus.stop() }
        let set = try await ComposedSet(environment: ["TETHER_LOGIND": dbus.address])
        defer { set.stop() }
        let client = try BusClient(source: "lifecycle-test", runDirectory: set.run.runDirectory, logger: Logger(label: "lifecycle-test"))
        let states = try await BusRecorder(bus: client, topic: .connectionState, as: ConnectionStatus.self)
        let first = try await states.waitFor { $0.phase == .connected }.value
        let following = await eventually(timeout: .seconds(10)) { set.log(of: "connd").contains("following logind's sleep signals") }
        #expect(following, "connd did not start following logind: \(set.log(of: "connd"))")
        try await Task.sleep(for: .milliseconds(300))

        let sleeping = ContinuousClock.now
        try dbus.prepareForSleep(true)
        let suspended = try await states.waitFor(since: sleeping) { $0.phase == .suspended }
        #expect(suspended.value.suspendReason == .sleep)
        print("logind PrepareForSleep(true): suspended \(sleeping.duration(to: suspended.receivedAt)) later")
        let closed = await eventually(timeout: .seconds(5)) { set.log(of: "gateway").contains("client disconnected") }
        #expect(closed, "the connection was not closed before sleeping")

        let woke = ContinuousClock.now
        try dbus.prepareForSleep(false)
        let connected = try await states.waitFor(since: woke) { $0.phase == .connected }
        #expect(connected.value.epoch == first.epoch + 1)
        print("logind PrepareForSleep(false): connected \(woke.duration(to: connected.receivedAt)) later")
        await client.close()
    }
}

/// A private D-Bus bus standing in for the system bus, where a test plays logind.
struct DBus {
    static var available: Bool {
        ["/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor", "/usr/bin/dbus-send"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    let address: String
    private let directory: String
    private let daemon: ChildProcess

    init(directory: String) throws {
        self.directory = directory
        address = "unix:path=\(directory)/dbus.socket"
        daemon = try ChildProcess("/usr/bin/dbus-daemon", ["--session", "--nofork", "--address=\(address)"], outputDirectory: directory, name: "dbus")
        let listening = (0..<200).contains { _ in
            usleep(10_000)
            return FileManager.default.fileExists(atPath: "\(directory)/dbus.socket")
        }
        if !listening { throw TestFailure("dbus-daemon did not start: \(daemon.standardError)") }
    }

    /// Emits logind's `PrepareForSleep` signal.
    func prepareForSleep(_ sleeping: Bool) throws {
        let send = try ChildProcess(
            "/usr/bin/dbus-send",
            ["--bus=\(address)", "--type=signal", "/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForSleep", "boolean:\(sleeping)"],
            outputDirectory: directory, name: "dbus-send")
        guard try send.waitForExit(timeout: .seconds(5)) == 0 else { throw TestFailure("dbus-send failed: \(send.standardError)") }
    }

    func stop() {
        daemon.stop()
    }
}
