import FoundationEssentials
import TetherSchema

/// What a served endpoint makes of the frames its ROUTER socket hands over: the caller's
/// identity, then the request id, the method and the JSON body. Anything else is refused
/// here, before a dispatcher sees it, with an `error` reply when the caller can be answered.
enum CommandFrames: Equatable {
    /// A command for the dispatcher.
    case command(requestID: String, method: String, body: [UInt8], identity: [UInt8])
    /// Refused: counted under `drop` (a ``BusDrop`` kind), said in `reply`'s words, and sent
    /// back as `answer` when there is a caller to answer.
    case refused(drop: String, reply: CommandErrorReply, answer: [[UInt8]]?)

    init(_ frames: [[UInt8]]) {
        guard frames.count == 4,
            let requestID = String(validating: frames[1], as: UTF8.self),
            let method = String(validating: frames[2], as: UTF8.self)
        else {
            let words =
                frames.count == 4
                ? "the request id and the method must be UTF-8 text"
                : "a command is three frames (request id, method, JSON body); this one had \(max(0, frames.count - 1))"
            self = Self.refusal(frames, drop: BusDrop.malformedCommand, CommandErrorReply(.malformed, words))
            return
        }
        let limit = BusSchema.maximumBodySize(of: .command(method))
        guard frames[3].count <= limit else {
            self = Self.refusal(
                frames, drop: BusDrop.oversizedCommand,
                CommandErrorReply(.tooLarge, "the body is \(frames[3].count) bytes; a \(method) command's body is at most \(limit) bytes"))
            return
        }
        self = .command(requestID: requestID, method: method, body: frames[3], identity: frames[0])
    }

    /// A refusal answered to the caller's identity, with its request id when it has a
    /// plausible one (a request id is short; an empty one is sent otherwise).
    private static func refusal(_ frames: [[UInt8]], drop: String, _ reply: CommandErrorReply) -> Self {
        guard let identity = frames.first, !identity.isEmpty else { return .refused(drop: drop, reply: reply, answer: nil) }
        let requestID = frames.count >= 2 && frames[1].count <= 256 ? frames[1] : []
        return .refused(drop: drop, reply: reply, answer: [identity, requestID, Array("error".utf8), Array(CommandErrorReply.encoded(reply))])
    }
}
