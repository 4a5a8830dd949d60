/// The names that say a value is a secret, for whatever shows bus messages or text to people
/// (tether-tap, desktop notifications): no Tether program publishes a secret, and these guard
/// against one that would.
public enum SecretNames {
    /// What a secret's value is shown as.
    public static let mask = "<redacted>"

    /// Whether a field (or an option, or a variable) of this name holds a secret: its letters
    /// name a token, a secret, a password, a passphrase, an authorization, an API key, a
    /// private key or a credential, in any case and spelling (`api_key`, `--apiKey`, `TOKEN`).
    public static func isSecret(fieldName: String) -> Bool {
        let name = fieldName.lowercased().filter { $0.isLetter }
        return ["token", "secret", "password", "passphrase", "authorization", "apikey", "privatekey", "credential"]
            .contains { name.contains($0) }
    }
}
