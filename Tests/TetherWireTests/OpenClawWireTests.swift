import Crypto
import Foundation
import OpenClawWire
import Testing

/// The OpenClaw protocol's frames, handshake strings and device identity, checked against
/// PROTOCOL.md's examples and an Ed25519 implementation Tether does not contain.
@Suite struct OpenClawWireTests {
    /// The gateway cuts `chat.history` texts by UTF-16 units, and JavaScript writes half an
    /// emoji left by the cut as `\ud83d`: the frame is read, the half as U+FFFD; a whole pair
    /// and an escaped backslash before `u` stay as they are.
    @Test func halfAnEmojiLeftByTheGatewaysCutIsReadAsAReplacementCharacter() throws {
        let frame =
            #"{"type":"res","id":"h1","ok":true,"payload":{"messages":[{"text":"ab\ud83d\n...(truncated)..."},{"text":"\ud83d\ude00 \\ud83d \udc00"}]}}"#
        guard case .response(_, true, let payload?, nil) = try OpenClawCodec().decode(frame) else {
            Issue.record("not read as a response")
            return
        }
        guard case .array(let messages)? = payload["messages"] else {
            Issue.record("no messages")
            return
        }
        let texts = messages.compactMap { $0["text"]?.stringValue }
        #expect(texts == ["ab\u{FFFD}\n...(truncated)...", "😀 \\ud83d \u{FFFD}"], "\(String(describing: texts))")
        #expect(throws: OpenClawFrameError.self) { try OpenClawCodec().decode(#"{"type":"res","id":"h1","ok":tru}"#) }
    }

    let codec = OpenClawCodec()

    @Test func theFramesOfTheReferenceDecode() throws {
        let challenge = try codec.decode(#"{"type":"event","event":"connect.challenge","payload":{"nonce":"n-1","ts":1769650000000}}"#)
        guard case .event("connect.challenge", let payload, nil) = challenge else { Issue.record("unexpected \(challenge)"); return }
        #expect(try payload?.decode(ConnectChallenge.self) == ConnectChallenge(nonce: "n-1", ts: 1_769_650_000_000))

        let mismatch = try codec.decode(
            #"{"type":"res","id":"c1","ok":false,"error":{"code":"INVALID_REQUEST","message":"protocol mismatch","details":{"expectedProtocol":3}}}"#)
        guard case .response("c1", false, nil, let error?) = mismatch else { Issue.record("unexpected \(mismatch)"); return }
        #expect(error.code == "INVALID_REQUEST" && error.details?["expectedProtocol"]?.intValue == 3)

        let delta = try codec.decode(
            #"{"type":"event","event":"chat","seq":812,"payload":{"runId":"5e0f","sessionKey":"agent:main:main","seq":14,"state":"delta","message":{"role":"assistant","content":[{"type":"text","text":"Hello! How can I"}],"timestamp":1769650001234}}}"#
        )
        guard case .event("chat", let chatPayload, 812) = delta, let event = try chatPayload?.decode(ChatEventPayload.self) else {
            Issue.record("\(delta)")
            return
        }
        #expect(event.runId == "5e0f" && event.state == .delta && event.message?.text == "Hello! How can I" && event.message?.timestamp == 1_769_650_001_234)

        let hello = try codec.decode(
            #"{"type":"res","id":"c1","ok":true,"payload":{"type":"hello-ok","protocol":3,"server":{"version":"1","connId":"x"},"features":{"methods":["chat.send"],"events":["tick"]},"snapshot":{"presence":[],"health":{"ok":true},"stateVersion":{"presence":3,"health":7},"uptimeMs":123456,"sessionDefaults":{"defaultAgentId":"main","mainKey":"main","mainSessionKey":"agent:main:main","scope":"per-sender"}},"auth":{"deviceToken":"dt","role":"operator","scopes":["operator.read"],"issuedAtMs":0},"policy":{"maxPayload":524288,"maxBufferedBytes":1572864,"tickIntervalMs":30000}}}"#
        )
        guard case .response(_, true, let helloPayload?, nil) = hello else { Issue.record("unexpected \(hello)"); return }
        let decoded = try helloPayload.decode(HelloOk.self)
        #expect(decoded.protocol == 3 && decoded.policy?.tickIntervalMs == 30000 && decoded.policy?.maxPayload == 524_288)
        #expect(decoded.snapshot?.sessionDefaults?.mainSessionKey == "agent:main:main" && decoded.auth?.deviceToken == "dt")
    }

    @Test func framesThatAreNotFramesAreRefusedInWords() {
        for text in ["", "[]", #"{"type":"req","method":"x"}"#, #"{"type":"res","id":"1"}"#, #"{"type":"bogus"}"#, #"{"type":"event"}"#] {
            #expect(throws: OpenClawFrameError.self, Comment(rawValue: text)) { try codec.decode(text) }
        }
    }

    @Test func historyContentIsAStringOrTextBlocks() throws {
        let plain = try JSONDecoder().decode(ChatTranscriptMessage.self, from: Data(#"{"role":"user","content":"hi","timestamp":5}"#.utf8))
        #expect(plain.text == "hi")
        let blocks = try JSONDecoder().decode(
            ChatTranscriptMessage.self,
            from: Data(
                #"{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"a"},{"type":"toolCall","id":"t","name":"n"},{"type":"text","text":"b"}],"timestamp":1.5e12}"#
                    .utf8))
        #expect(blocks.text == "a\nb" && blocks.timestamp == 1_500_000_000_000)
    }

    @Test func requestsRoundTripWithTheirParams() throws {
        let text = codec.request(
            id: "send:m1", method: "chat.send", params: ChatSendParams(sessionKey: "agent:main:main", message: "Hello", idempotencyKey: "m1"))
        guard case .request("send:m1", "chat.send", let params?) = try codec.decode(text) else { Issue.record(Comment(rawValue: text)); return }
        #expect(try params.decode(ChatSendParams.self) == ChatSendParams(sessionKey: "agent:main:main", message: "Hello", idempotencyKey: "m1"))
        #expect(text.contains(#""idempotencyKey":"m1""#))
    }

    @Test func theSignedStringsAreV2AndV3() {
        var payload = DeviceSignedPayload(
            version: .v2, deviceID: "abc", clientID: "cli", clientMode: "cli", role: "operator", scopes: ["operator.read", "operator.write"],
            signedAtMs: 1_769_650_000_000, token: "tok", nonce: "n-1", platform: "Linux", deviceFamily: "Desktop")
        #expect(payload.text == "v2|abc|cli|cli|operator|operator.read,operator.write|1769650000000|tok|n-1")
        payload.version = .v3
        #expect(payload.text == "v3|abc|cli|cli|operator|operator.read,operator.write|1769650000000|tok|n-1|linux|desktop")
    }

    @Test func theDeviceIDIsTheSHA256OfTheRawKeyAndSignaturesVerify() throws {
        let identity = DeviceIdentity()
        #expect(identity.publicKeyRaw.count == 32)
        #expect(identity.deviceID == SHA256.hash(data: identity.publicKeyRaw).map { String(format: "%02x", $0) }.joined())
        #expect(identity.deviceID.count == 64 && identity.deviceID == identity.deviceID.lowercased())
        #expect(!identity.publicKeyBase64URL.contains("=") && !identity.publicKeyBase64URL.contains("+") && !identity.publicKeyBase64URL.contains("/"))
        let signature = try identity.sign("v3|payload")
        #expect(DeviceIdentity.verify(signature: signature, of: "v3|payload", publicKey: identity.publicKeyBase64URL))
        #expect(!DeviceIdentity.verify(signature: signature, of: "v3|payloaD", publicKey: identity.publicKeyBase64URL))
        #expect(!DeviceIdentity.verify(signature: signature, of: "v3|payload", publicKey: DeviceIdentity().publicKeyBase64URL))
        // Padded base64url (as some clients write it) reads too.
        #expect(Base64URL.decode(identity.publicKeyBase64URL + "=") == identity.publicKeyRaw)
    }

    @Test func theMainSessionAliasIsTheGatewaysMainKey() {
        #expect(OpenClawProtocol.canonicalSessionKey(nil, mainSessionKey: "agent:ops:main") == "agent:ops:main")
        #expect(OpenClawProtocol.canonicalSessionKey("main", mainSessionKey: "agent:ops:main") == "agent:ops:main")
        #expect(OpenClawProtocol.canonicalSessionKey(" ", mainSessionKey: nil) == "agent:main:main")
        #expect(OpenClawProtocol.canonicalSessionKey("agent:main:work", mainSessionKey: "agent:main:main") == "agent:main:work")
    }

    /// A key as a person writes it is a session of the default agent, as the gateway's events name it.
    @Test func aBareKeyBelongsToTheDefaultAgent() {
        #expect(OpenClawProtocol.canonicalSessionKey("side", mainSessionKey: "agent:main:main") == "agent:main:side")
        #expect(OpenClawProtocol.canonicalSessionKey("Side ", mainSessionKey: "agent:ops:home") == "agent:ops:side")
        #expect(OpenClawProtocol.canonicalSessionKey("home", mainSessionKey: "agent:ops:home") == "agent:ops:home")
        #expect(OpenClawProtocol.canonicalSessionKey("Agent:Ops:Work", mainSessionKey: nil) == "agent:ops:work")
        #expect(OpenClawProtocol.canonicalSessionKey("global", mainSessionKey: "global") == "global")
        #expect(OpenClawProtocol.canonicalSessionKey("main", mainSessionKey: "global") == "global")
        #expect(OpenClawProtocol.canonicalSessionKey("side", mainSessionKey: "global") == "agent:main:side")
    }

    /// Python's `cryptography` (OpenSSL's Ed25519) checks Tether's signature and device id, and
    /// signs a string Tether must accept: the same bytes as the gateway's Node crypto reads.
    @Test(.enabled(if: PythonCryptography.available, "python3 with the cryptography package is not installed (apt-get install python3-cryptography)"))
    func anotherEd25519ImplementationAgrees() throws {
        let identity = DeviceIdentity()
        let message = "v3|\(identity.deviceID)|cli|cli|operator|operator.read,operator.write|1769650000000|tok|n-1|linux|desktop"
        let signature = try identity.sign(message)
        let script = """
            import base64, hashlib, sys
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey, Ed25519PrivateKey
            from cryptography.hazmat.primitives import serialization
            def unb64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            key, signature, message = sys.argv[1], sys.argv[2], sys.argv[3].encode()
            Ed25519PublicKey.from_public_bytes(unb64(key)).verify(unb64(signature), message)
            print(hashlib.sha256(unb64(key)).hexdigest())
            other = Ed25519PrivateKey.generate()
            raw = other.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            print(base64.urlsafe_b64encode(raw).decode().rstrip("="))
            print(base64.urlsafe_b64encode(other.sign(message)).decode().rstrip("="))
            """
        let output = try PythonCryptography.run(script, arguments: [identity.publicKeyBase64URL, signature, message])
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(output)")
        #expect(lines.first == identity.deviceID, "Python's SHA-256 of the key: \(lines.first ?? "")")
        if lines.count == 3 { #expect(DeviceIdentity.verify(signature: lines[2], of: message, publicKey: lines[1])) }
    }
}

/// Runs Python with the `cryptography` package, where it is installed.
enum PythonCryptography {
    static let available: Bool = (try? run("import cryptography", arguments: [])) != nil

    static func run(_ script: String, arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.executableLoad) }
        return String(decoding: data, as: UTF8.self)
    }
}
