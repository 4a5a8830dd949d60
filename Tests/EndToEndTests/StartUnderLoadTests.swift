import Foundation
import Synchronization
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// The development gateway once died of SIGSEGV as a set started, on a NIO thread in
/// hummingbird-websocket's `HTTP1WebSocketUpgradeChannel.setup`, the code every new connection
/// runs first; tether-web serves its page with the same stack. Each is started again and again
/// on the same port while threads that were already knocking before it listened open
/// connections at it from its first moment: WebSocket upgrades, plain requests, and
/// connections closed (or reset) as soon as they are open, as compose's readiness check closes
/// its own. Every request must be answered, and each run must end with exit status 0 on
/// SIGTERM (a signal or a crash report fails it, with the report). A short run is part of the
/// suite; scripts/stress-start runs a long one (TETHER_START_STRESS_STARTS, _THREADS,
/// _CONNECTIONS, and _LOAD busy threads beside). With more event loops than cores
/// (NIO_SINGLETON_GROUP_LOOP_COUNT=8), it caught the cause, a race in Swift's runtime that
/// `ChildChannelWarmUp` now keeps from happening, within a few hundred starts.
@Suite(.serialized) struct StartUnderLoadTests {
    private static let environment = ProcessInfo.processInfo.environment
    /// How many times each program is started.
    static let starts = Int(environment["TETHER_START_STRESS_STARTS"] ?? "") ?? 5
    /// The threads knocking at each start, each with its own connections.
    static let threads = Int(environment["TETHER_START_STRESS_THREADS"] ?? "") ?? 6
    static let connectionsPerThread = Int(environment["TETHER_START_STRESS_CONNECTIONS"] ?? "") ?? 8
    /// Threads that only spin beside the storm, for a machine under load.
    static let busyThreads = Int(environment["TETHER_START_STRESS_LOAD"] ?? "") ?? 0

    @Test(arguments: ["seed", "openclaw"])
    func theGatewayAnswersFromItsFirstMomentAndStopsCleanly(dialect: String) async throws {
        let run = try TestRunDirectory()
        let port = try freePort()
        let token = "start-under-load-\(port)"
        let tokenFile = run.path + "/gateway.token"
        _ = FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600])
        let upgrade = StartStorm.upgrade(path: dialect == "seed" ? "/ws" : "/", port: port, extraHeaders: "Authorization: Bearer \(token)\r\n")
        let plain = "GET /health HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"
        // As compose starts it, with a record and a state directory.
        let arguments = [
            "--port", "\(port)", "--token-file", tokenFile, "--dialect", dialect, "--record", run.path + "/record.jsonl", "--state-dir",
            run.path + "/state", "--log-level", "warning",
        ]
        try await Self.startRepeatedly(name: "tether-gateway (\(dialect))", port: port, knocks: StartStorm.mix(upgrade: upgrade, plain: plain)) {
            try ChildProcess(
                Programs.path("tether-gateway"), arguments, environment: StartStorm.crashReports, outputDirectory: run.path, name: "gateway")
        }
    }

    @Test func tetherWebAnswersFromItsFirstMomentAndStopsCleanly() async throws {
        let run = try TestRunDirectory()
        let port = try freePort()
        let token = "start-under-load-\(port)"
        let tokenFile = run.path + "/web.token"
        _ = FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600])
        // The bus its pages subscribe through, up for the whole test as in a set.
        let bus = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path, name: "bus")
        defer { bus.stop() }
        let host = "127.0.0.1:\(port)"
        let cookie = "Cookie: tether_web=\(token)\r\n"
        let start = {
            try ChildProcess(
                Programs.path("tether-web"), ["--run-dir", run.path, "--port", "\(port)", "--token-file", tokenFile, "--log-level", "warning"],
                environment: StartStorm.crashReports, outputDirectory: run.path, name: "web")
        }
        // Where the page is, as a browser learns it: the redirect that trades the token.
        let first = try start()
        var login = ""
        _ = await eventually(timeout: .seconds(20)) {
            login = (try? rawRequest(port: port, "GET /?token=\(token) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")) ?? ""
            return login.hasPrefix("HTTP/1.1 303")
        }
        first.stop()
        let location = login.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }
        let page = try #require(location?.dropFirst("location:".count).trimmingCharacters(in: .whitespaces).dropLast().description, "\(login)")
        let upgrade = StartStorm.upgrade(path: page + "/ws", port: port, extraHeaders: "Origin: http://\(host)\r\n\(cookie)")
        let plain = "GET \(page)/icon.svg HTTP/1.1\r\nHost: \(host)\r\n\(cookie)\r\n"
        try await Self.startRepeatedly(name: "tether-web", port: port, knocks: StartStorm.mix(upgrade: upgrade, plain: plain), start: start)
    }

    /// Starts a program `starts` times on `port`, each time under a storm of `knocks` (taken in
    /// turn) that began before it listened; each request must be answered (`101` for an
    /// upgrade, `200` for the rest) while the program runs, and the program must then stop with
    /// status 0 on SIGTERM.
    static func startRepeatedly(name: String, port: Int, knocks: [StartStorm.Knock], start: () throws -> ChildProcess) async throws {
        let load = BusyLoad(threads: busyThreads)
        defer { load.stop() }
        let began = ContinuousClock.now
        var answered = 0
        var refused = 0
        for round in 1...starts {
            let storm = StartStorm(port: port, threads: threads, connectionsPerThread: connectionsPerThread, knocks: knocks)
            let process = try start()
            defer { process.stop() }
            storm.begin(while: { process.isRunning })
            let answers = await storm.finished(within: .seconds(60))
            let wrong = answers.filter { !$0.answer.hasPrefix($0.knock.expected) }
            answered += answers.count { $0.knock.expected != "" } - wrong.count
            refused += storm.refused.load(ordering: .relaxed)
            // The program first: a crash is what this test is about, and it explains what went wrong.
            let stillRunning = process.isRunning
            process.signal(SIGTERM)
            let status = try process.waitForExit(timeout: .seconds(30))
            try #require(
                stillRunning && status == 0,
                "\(name), start \(round) of \(starts): \(stillRunning ? "exit status \(status) on SIGTERM" : "died (status \(status)) under the storm"):\n\(process.standardError)"
            )
            try #require(
                wrong.isEmpty,
                "\(name), start \(round): \(wrong.count) of \(answers.count) connections not answered as expected, e.g. \(wrong.prefix(3).map(\.answer))")
        }
        let elapsed = (ContinuousClock.now - began).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
        print(
            "start under load: \(name) started \(starts) times in \(String(format: "%.1f", seconds)) s, \(threads) threads × \(connectionsPerThread) connections each time, \(answered) requests answered, \(refused) connections refused before it listened, \(busyThreads) busy threads beside"
        )
    }
}

/// Connections opened at a program from the moment it listens: threads that knock (connect
/// again every half millisecond while it refuses), then each opens its connections one after
/// another, and keeps those it sent a request on open until all of its own are answered.
final class StartStorm: Sendable {
    /// What a connection does once it is open.
    enum Knock: Sendable {
        /// Sends the request and reads the first line of the answer.
        case request(String, expecting: String)
        /// Closes at once, sending nothing: compose's readiness check.
        case closeAtOnce
        /// Resets at once (SO_LINGER 0), sending nothing.
        case resetAtOnce

        /// The start of the answer's first line ("" for a connection that asks nothing).
        var expected: String {
            if case .request(_, let expecting) = self { return expecting }
            return ""
        }
    }

    /// The variables that make a crashing Swift program print its backtrace on standard error.
    static let crashReports = ["SWIFT_BACKTRACE": "enable=yes,interactive=no,color=no"]

    let port: Int
    let threads: Int
    let connectionsPerThread: Int
    let knocks: [Knock]
    /// Each connection's knock and the first line of its answer (`""`: none came).
    private let answers: Mutex<[(knock: Knock, answer: String)]>
    private let done = Atomic<Int>(0)
    /// Connections refused because the program did not listen yet: the storm was there first.
    let refused = Atomic<Int>(0)

    init(port: Int, threads: Int, connectionsPerThread: Int, knocks: [Knock]) {
        self.port = port
        self.threads = threads
        self.connectionsPerThread = connectionsPerThread
        self.knocks = knocks
        answers = Mutex([])
    }

    /// Mostly upgrades: three upgrades, a plain request, a connection closed at once and one reset.
    static func mix(upgrade: String, plain: String) -> [Knock] {
        let upgrade = Knock.request(upgrade, expecting: "HTTP/1.1 101")
        return [upgrade, .closeAtOnce, upgrade, .request(plain, expecting: "HTTP/1.1 200"), upgrade, .resetAtOnce]
    }

    /// A WebSocket upgrade of `path`, with `extraHeaders` (each ending in CRLF).
    static func upgrade(path: String, port: Int, extraHeaders: String) -> String {
        "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(extraHeaders)\r\n"
    }

    /// Starts the threads; they give up knocking once `alive` is false. Each thread's first
    /// connection is another kind of knock, so the program's first connections are all kinds.
    func begin(while alive: @escaping @Sendable () -> Bool) {
        for thread in 0..<threads {
            Thread.detachNewThread { [self] in
                var open: [Int32] = []
                for connection in 0..<connectionsPerThread {
                    let knock = knocks[(thread + connection) % knocks.count]
                    guard let descriptor = Self.connect(port: port, refused: refused, while: alive) else {
                        answers.withLock { $0.append((knock, "")) }
                        continue
                    }
                    switch knock {
                    case .request(let request, _):
                        open.append(descriptor)
                        let answer = Self.exchange(request, on: descriptor)
                        answers.withLock { $0.append((knock, answer)) }
                    case .closeAtOnce:
                        close(descriptor)
                        answers.withLock { $0.append((knock, "")) }
                    case .resetAtOnce:
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                        close(descriptor)
                        answers.withLock { $0.append((knock, "")) }
                    }
                }
                open.forEach { close($0) }
                done.add(1, ordering: .releasing)
            }
        }
    }

    /// Each connection's knock and answer, once every thread has finished (or `timeout` passed).
    func finished(within timeout: Duration) async -> [(knock: Knock, answer: String)] {
        let threads = threads
        _ = await eventually(timeout: timeout, every: .milliseconds(10)) { done.load(ordering: .acquiring) == threads }
        return answers.withLock { $0 }
    }

    /// A TCP connection to 127.0.0.1:`port`, tried again while it is refused and `alive` holds.
    private static func connect(port: Int, refused: borrowing Atomic<Int>, while alive: () -> Bool) -> Int32? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { return nil }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if connected == 0 { return descriptor }
            close(descriptor)
            refused.add(1, ordering: .relaxed)
            guard alive() else { return nil }
            usleep(500)
        }
        return nil
    }

    /// Sends `request` and returns the first line of the answer ("" when none came within 10 s).
    private static func exchange(_ request: String, on descriptor: Int32) -> String {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let sent = request.withCString { send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        guard sent > 0 else { return "" }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !received.contains(UInt8(ascii: "\n")) {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        return String(text.prefix { $0 != "\r\n" && $0 != "\n" })
    }
}

/// Threads that spin until stopped: a machine busy with something else.
final class BusyLoad: Sendable {
    private let running = Atomic(true)

    init(threads: Int) {
        for _ in 0..<threads {
            Thread.detachNewThread { [self] in
                while running.load(ordering: .relaxed) {}
            }
        }
    }

    func stop() {
        running.store(false, ordering: .relaxed)
    }
}
