import ArgumentParser
import BusProxy
import Testing
import TetherBus
import TetherService

/// The pieces of a tcp:// bus that need no socket: keys, addresses, the allow-list.
@Suite struct CurveKeyTests {
    @Test func aSecretKeyGivesBackItsPublicKey() throws {
        guard CurveKeyPair.isSupported else { return print("skipped: this libzmq was built without CURVE") }
        let pair = try CurveKeyPair.generate()
        #expect(CurveKey.isValid(pair.publicKey) && CurveKey.isValid(pair.secretKey))
        #expect(try CurveKeyPair(secretKey: pair.secretKey) == pair)
        #expect(throws: BusError.self) { try CurveKeyPair(secretKey: "too short") }
        #expect(!CurveKey.isValid(String(repeating: "~", count: 40)), "~ is not a Z85 character")
    }

    @Test func addressesNameAHostAndAPortWithRoomForBusOut() throws {
        #expect(try RemoteBus.parse("tcp://bus.example:7400") == ("bus.example", 7400))
        #expect(try RemoteBus.parse("10.0.0.2:7400") == ("10.0.0.2", 7400))
        for bad in ["bus.example", "tcp://:7400", "bus:0", "bus:65535", "bus:port", "[::1]:7400", "ipc:///tmp/bus"] {
            #expect(throws: BusError.invalidAddress(bad), "\(bad)") { try RemoteBus.parse(bad) }
        }
        let key = String(repeating: "0", count: 40)
        #expect(throws: BusError.self) { try RemoteBus(address: "h:1", serverKey: "not a key", keys: CurveKeyPair(secretKey: key)) }
        let remote = try RemoteBus(address: "h:7400", serverKey: key, keys: CurveKeyPair(secretKey: key))
        #expect(remote.busIn == "tcp://h:7400" && remote.busOut == "tcp://h:7401")
    }

    @Test func theAllowListHasKeysWithOptionalNamesAndSaysWhichLineIsWrong() throws {
        let first = String(repeating: "0", count: 40)
        let second = String(repeating: "1", count: 40)
        let allowed = try AllowedKeys(parsing: "# the laptop and the CI\n\n\(first) laptop tap\n  \(second)\n", source: "allowed")
        #expect(allowed.names == [first: "laptop tap", second: ""])
        #expect(allowed.allows(second) && !allowed.allows(String(repeating: "2", count: 40)))
        #expect {
            try AllowedKeys(parsing: "\(first)\nssh-ed25519 AAAA\n", source: "allowed")
        } throws: { error in
            "\(error)".hasPrefix("allowed:2: 'ssh-ed25519' is not a CURVE public key")
        }
        #expect(throws: AllowedKeysError.self) { try AllowedKeys.load("/nonexistent/allowed") }
    }

    @Test func aBusKeyThatStartsWithADashIsTakenAsTheKey() throws {
        // "-" is a Z85 character: a key may start with it.
        let key = "-" + String(repeating: "0", count: 39)
        let options = try RemoteBusOptions.parse(["--bus", "tcp://h:7400", "--bus-server-key", key, "--bus-key", "/k"])
        #expect(options.busServerKey == key)
        #expect(options.bus == "tcp://h:7400" && options.busKey == "/k")
    }
}
