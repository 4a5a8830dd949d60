import BusTap
import Foundation
import Testing
import TetherBus
import TetherSchema

@Suite struct TapTests {
    private func message(_ topic: String, source: String = "tether-protod", pid: Int32? = 42, sequence: UInt64 = 1, body: String = "{}") -> BusMessage {
        BusMessage(topic: Topic(topic), header: BusHeader(source: source, pid: pid, sequence: sequence), body: Data(body.utf8))
    }

    @Test func topicsMatchByPrefixOrGlobAndSourcesByNameOrGlob() {
        let prefix = TapFilter(topics: ["conv."])
        #expect(prefix.accepts(message("conv.message")))
        #expect(!prefix.accepts(message("conn.state")))
        let glob = TapFilter(topics: ["*.state"])
        #expect(glob.accepts(message("conn.state")))
        #expect(glob.accepts(message("bot.state")))
        #expect(!glob.accepts(message("conn.identity")))
        let sources = TapFilter(topics: [], sources: ["tether-c*", "tether-netmon"])
        #expect(sources.accepts(message("conn.state", source: "tether-connd")))
        #expect(sources.accepts(message("net.path", source: "tether-netmon")))
        #expect(!sources.accepts(message("health", source: "tether-protod")))
        #expect(!sources.accepts(message("net.path", source: "tether-netmon-2")), "a source without a glob is matched whole")
        #expect(!TapFilter(topics: []).accepts(message("sys.probe.x")), "probes are hidden unless asked for")
        #expect(TapFilter(topics: [], showProbes: true).accepts(message("sys.probe.x")))
    }

    @Test func sequenceJumpsAreGapsPerProcessAndAFreshStartIsARestart() {
        var tracker = SequenceTracker()
        #expect(tracker.observe(BusHeader(source: "a", pid: 1, sequence: 7)) == nil, "the first message seen sets the baseline")
        #expect(tracker.observe(BusHeader(source: "a", pid: 1, sequence: 8)) == nil)
        #expect(tracker.observe(BusHeader(source: "a", pid: 2, sequence: 1)) == nil, "another process of the same name counts apart")
        let gap = tracker.observe(BusHeader(source: "a", pid: 1, sequence: 12))
        #expect(gap == .gap(source: "a", after: 8, next: 12, missed: 3))
        #expect(gap?.description == "gap: 3 messages from a not seen (#8 → #12)")
        #expect(tracker.observe(BusHeader(source: "a", pid: 2, sequence: 2)) == nil)
        #expect(tracker.observe(BusHeader(source: "a", pid: 1, sequence: 1)) == .restarted(source: "a", after: 12, next: 1))
        #expect(tracker.missed == 3)
    }

    @Test func secretsAreHiddenAlsoInsideGatewayFrames() throws {
        let body =
            #"{"keyID":"file:/run/token","token":"s3cret","nested":{"Authorization":"Bearer s3cret","apiKey":"k"},"list":[{"password":"p"}],"text":"{\"type\":\"auth\",\"token\":\"s3cret\"}"}"#
        let redacted = String(decoding: SecretRedactor.redact(Data(body.utf8)), as: UTF8.self)
        #expect(!redacted.contains("s3cret"), "\(redacted)")
        #expect(!redacted.contains("\"p\""))
        #expect(redacted.contains("file:/run/token"), "a key's id is not a secret")
        #expect(redacted.components(separatedBy: SecretRedactor.mask).count - 1 == 5)
        let plain = #"{"content":"hello","id":{"value":"1"}}"#
        #expect(SecretRedactor.redact(Data(plain.utf8)) == Data(plain.utf8), "a body without secrets is left byte for byte")
        #expect(SecretRedactor.redact(Data("not json".utf8)) == Data("not json".utf8))
        // Counts of a model's tokens are usage, not secrets; a string under such a name still is.
        let usage = #"{"contextTokens":200000,"inputTokens":12,"deviceTokens":"s3cret"}"#
        let shown = String(decoding: SecretRedactor.redact(Data(usage.utf8)), as: UTF8.self)
        #expect(shown.contains(#""contextTokens":200000"#) && shown.contains(#""inputTokens":12"#) && !shown.contains("s3cret"), "\(shown)")
    }

    @Test func aRecordingLineReadsBackAsTheSameMessage() throws {
        var session = TapSession(filter: TapFilter(topics: []), formatter: TapFormatter(style: .pretty), showsRates: false)
        let original = message("conv.message", sequence: 5, body: #"{"content":"héllo / 你好","token":"x"}"#)
        let output = session.receive(original, at: 1.5)
        let line = try #require(output.recorded)
        let parsed = try #require(try RecordedMessage.parse(Substring(line), lineNumber: 1))
        #expect(parsed.topic == "conv.message")
        var header = parsed.header
        #expect(abs(header.timestamp.timeIntervalSince(original.header.timestamp)) < 0.001, "kept to the millisecond")
        header.timestamp = original.header.timestamp
        #expect(header == original.header)
        #expect(parsed.at == 1.5)
        let body = try JSONSerialization.jsonObject(with: parsed.body) as? [String: String]
        #expect(body == ["content": "héllo / 你好", "token": SecretRedactor.mask])
        #expect(throws: RecordingError.self) { try RecordedMessage.parse("not json", lineNumber: 3) }
        #expect(try RecordedMessage.parse(#"{"note":"gap"}"#, lineNumber: 4) == nil)
    }

    @Test func sessionNotesGapsOfShownSourcesAndCountsRates() {
        var session = TapSession(
            filter: TapFilter(topics: ["conv."], sources: ["tether-protod"]), formatter: TapFormatter(style: .pretty), showsRates: false)
        _ = session.receive(message("conv.message", sequence: 1), at: 0)
        let hidden = session.receive(message("health", sequence: 2), at: 0.1)
        #expect(!hidden.shown && hidden.lines.isEmpty, "another topic is not shown but still counts for gaps")
        let afterGap = session.receive(message("conv.delivery", sequence: 5), at: 0.2)
        #expect(afterGap.lines.count == 2)
        #expect(afterGap.lines.first == "-- gap: 2 messages from tether-protod not seen (#2 → #5)")
        let other = session.receive(message("conv.message", source: "tether-connd", sequence: 9), at: 0.3)
        #expect(other.lines.isEmpty, "a source the filter hides is neither shown nor reported")

        var rates = TapSession(filter: TapFilter(topics: []), formatter: TapFormatter(style: .pretty), showsRates: true)
        for index in 0..<20 { _ = rates.receive(message("conv.stream", sequence: UInt64(index + 1), body: "0123456789"), at: Double(index) * 0.1) }
        _ = rates.receive(message("health", sequence: 21), at: 1.9)
        var meter = rates.meter
        let rows = meter.rows(at: 2, elapsed: 2)
        #expect(rows.map(\.topic) == ["conv.stream", "health"])
        #expect(rows.first?.rate == 10)
        #expect(rows.first?.meanBytes == 10)
        #expect(rows.last?.total == 1)
        let table = rates.rateTable(at: 2)
        #expect(table.contains("conv.stream") && table.contains("10.0"), "\(table)")
    }

    @Test func prettyLinesCarryColorsOnlyWhenAsked() {
        let line = TapFormatter(style: .pretty, colored: true).format(message("conn.state", sequence: 3), at: 0)
        #expect(line.contains("\u{1B}[32mconn.state\u{1B}[0m"))
        let plain = TapFormatter(style: .pretty).format(message("conn.state", sequence: 3), at: 0)
        #expect(!plain.contains("\u{1B}"))
        #expect(plain.contains("tether-protod[42]#3 conn.state {}"))
    }
}
