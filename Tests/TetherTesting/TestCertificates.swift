import Foundation

/// A certificate authority and a server certificate for 127.0.0.1 made with openssl, valid for a day.
public struct TestCertificates: Sendable {
    public let caCertificate: String
    public let serverCertificate: String
    public let serverKey: String

    public init(directory: String) throws {
        caCertificate = directory + "/ca.pem"
        serverCertificate = directory + "/server.pem"
        serverKey = directory + "/server.key"
        let caKey = directory + "/ca.key"
        let request = directory + "/server.csr"
        let extensions = directory + "/server.ext"
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n".write(toFile: extensions, atomically: true, encoding: .utf8)
        try Self.openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", caCertificate, "-days", "1", "-subj", "/CN=Tether Test CA",
        ])
        try Self.openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", serverKey, "-out", request, "-subj", "/CN=127.0.0.1"])
        try Self.openssl([
            "x509", "-req", "-in", request, "-CA", caCertificate, "-CAkey", caKey, "-CAcreateserial", "-out", serverCertificate, "-days", "1",
            "-extfile", extensions,
        ])
    }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let output = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestFailure("openssl \(arguments.first ?? "") failed: \(String(decoding: output, as: UTF8.self))")
        }
    }
}

/// Writes a token file with mode 0600, as a person would with `install -m 600`.
public enum SecretFileWriter {
    public static func write(_ token: String, to path: String) throws {
        let temporary = path + ".new"
        _ = FileManager.default.createFile(atPath: temporary, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600])
        guard rename(temporary, path) == 0 else { throw TestFailure("cannot write \(path)") }
    }
}
