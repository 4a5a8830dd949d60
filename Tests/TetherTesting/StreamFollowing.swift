public import TetherSchema
public import TetherWire

extension Array where Element == StreamProgress {
    /// What a reader following these progresses in order (``StreamProgress/following(_:)``)
    /// has of the reply after each one; "⟂" where one did not fit.
    public var followedTexts: [String] {
        var latest: [MessageID: StreamProgress] = [:]
        return map { progress in
            guard let followed = progress.following(latest[progress.id]) else { return "⟂" }
            latest[progress.id] = followed
            return followed.content ?? "⟂"
        }
    }
}
