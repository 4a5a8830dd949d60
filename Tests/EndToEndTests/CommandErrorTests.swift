import CZeroMQ
import Foundation
import Testing
import TetherTesting

/// Every command gets an answer: a malformed, oversized, unknown or out-of-bounds one an
/// `error` reply with its code, through a raw DEALER as any front end's would be.
@Suite(.serialized) struct CommandErrorTests {
    /// Sends `frames` to the endpoint's ROUTER and returns the reply's frames (nil: none in 3 s).
    static func exchange(_ frames: [[UInt8]], endpoint: String) -> [[UInt8]]? {
        guard let context = zmq_ctx_new() else { return nil }
        defer { zmq_ctx_term(context) }
        guard let socket = zmq_socket(context, ZMQ_DEALER) else { return nil }
        defer { zmq_close(socket) }
        var linger: Int32 = 0
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        var timeout: Int32 = 3000
        zmq_setsockopt(socket, ZMQ_RCVTIMEO, &timeout, MemoryLayout<Int32>.size)
        guard zmq_connect(socket, "ipc://" + endpoint) == 0 else { return nil }
        for (index, frame) in frames.enumerated() {
            let flags = index < frames.count - 1 ? ZMQ_SNDMORE : 0
            _ = frame.withUnsafeBytes { zmq_send(socket, $0.baseAddress, frame.count, flags) }
        }
        var parts: [[UInt8]] = []
        while true {
            var message = zmq_msg_t()
            zmq_msg_init(&message)
            defer { zmq_msg_close(&message) }
            guard zmq_msg_recv(&message, socket, 0) >= 0 else { return nil }
            parts.append(Array(UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: zmq_msg_size(&message))))
            if zmq_msg_more(&message) == 0 { return parts }
        }
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func eachBadCommandIsAnsweredWithItsCode() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let protod = set.run.path + "/protod.cmd"
        let snapd = set.run.path + "/snapd.cmd"
        let longText = Self.bytes(#"{"id":{"value":"big"},"content":""# + String(repeating: "x", count: 1_100_000) + #""}"#)
        // Every command but send takes 1 MiB; send takes 32 MiB, for a message's images.
        let oversized = Self.bytes(#"{"after":0,"limit":10,"padding":""# + String(repeating: "x", count: 1_100_000) + #""}"#)
        let oversizedSend = Self.bytes(#"{"id":{"value":"huge"},"content":""# + String(repeating: "x", count: 32 << 20) + #""}"#)
        let cases: [(String, [[UInt8]], String, String, String)] = [
            ("one frame", [Self.bytes("only")], protod, "malformed", "this one had 1"),
            ("two frames", [Self.bytes("r2"), Self.bytes("send")], protod, "malformed", "this one had 2"),
            ("four frames", [Self.bytes("r4"), Self.bytes("send"), Self.bytes("{}"), Self.bytes("more")], protod, "malformed", "this one had 4"),
            ("unknown method", [Self.bytes("r5"), Self.bytes("teleport"), Self.bytes("{}")], protod, "unknownMethod", "no method 'teleport'"),
            ("not JSON", [Self.bytes("r6"), Self.bytes("send"), Self.bytes("{not json")], protod, "malformed", "not JSON"),
            ("a field missing", [Self.bytes("r7"), Self.bytes("send"), Self.bytes(#"{"content":"hi"}"#)], protod, "malformed", "the field 'id' is missing"),
            (
                "a field of the wrong type", [Self.bytes("r8"), Self.bytes("send"), Self.bytes(#"{"id":{"value":"a"},"content":1}"#)], protod, "malformed",
                "'content' should be a string"
            ),
            ("oversized", [Self.bytes("r9"), Self.bytes("journal"), oversized], protod, "tooLarge", "a journal command's body is at most 1048576 bytes"),
            (
                "an oversized send", [Self.bytes("r9a"), Self.bytes("send"), oversizedSend], protod, "tooLarge",
                "a send command's body is at most 33554432 bytes"
            ),
            (
                "a text too long", [Self.bytes("r9b"), Self.bytes("send"), longText], protod, "refused",
                "the text is 1,100,000 bytes; a message's text is at most 983,038 bytes"
            ),
            (
                "attempts below 1",
                [
                    Self.bytes("r10"), Self.bytes("send"),
                    Self.bytes(#"{"id":{"value":"b"},"content":"hi","retry":{"attempts":0,"delayMilliseconds":0,"timeoutMilliseconds":10}}"#),
                ], protod, "outOfBounds", "retry.attempts must be at least 1"
            ),
            (
                "a limit of 0", [Self.bytes("r11"), Self.bytes("transcript"), Self.bytes(#"{"limit":0}"#)], snapd, "outOfBounds",
                "limit must be between 1 and 1000"
            ),
            (
                "a limit of 5000", [Self.bytes("r12"), Self.bytes("journal"), Self.bytes(#"{"after":0,"limit":5000}"#)], protod, "outOfBounds",
                "limit must be between 1 and 1000"
            ),
            (
                "an empty message", [Self.bytes("r13"), Self.bytes("send"), Self.bytes(#"{"id":{"value":"c"},"content":" \n"}"#)], protod, "refused",
                "the message is empty"
            ),
        ]
        for (name, frames, endpoint, code, words) in cases {
            let reply = Self.exchange(frames, endpoint: endpoint)
            guard let reply, reply.count == 3 else {
                Issue.record("\(name): no reply of three frames: \(String(describing: reply?.map { String(decoding: $0.prefix(80), as: UTF8.self) }))")
                continue
            }
            #expect(String(decoding: reply[1], as: UTF8.self) == "error", "\(name)")
            let error = try? JSONSerialization.jsonObject(with: Data(reply[2])) as? [String: String]
            #expect(error?["code"] == code, "\(name): \(String(decoding: reply[2], as: UTF8.self))")
            #expect(error?["message"]?.contains(words) == true, "\(name): \(String(decoding: reply[2], as: UTF8.self))")
            print("\(name): \(error?["code"] ?? "?") — \(error?["message"] ?? "")")
        }
        // Still serving after all that.
        let send = try set.tether(["send", "still", "answering"])
        #expect(send.status == 0, "\(send.standardError)")
    }
}
