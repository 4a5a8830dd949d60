import Foundation
public import TetherBus
import TetherSchema
import TetherService
import TetherWire

/// What the page and tether-web say to each other over the WebSocket (docs/WEB.md).
enum PageMessage {
    /// From the page.
    struct Request: Decodable {
        var type: String
        var id: String?
        var content: String?
        var text: String?
        /// With `snapshot`: the session whose transcript to send (the one `conv.session` named).
        var session: String?
        /// With `approve`: allow-once, allow-always or deny (the approval's id is `id`).
        var decision: String?
        /// With `send`: the images sent with the message.
        var attachments: [Attachment]?
        /// With `send`: `steer` or `interrupt`, what it does if a reply is in progress (`/steer`, `/interrupt`).
        var whileBusy: String?
        /// With `around`: the stored message's place (a search hit's `position`); `session` is its session.
        var position: Int?
        /// With `attention`: whether the person looks at the page (visible and focused).
        var focused: Bool?
    }

    /// A message from the page, read; nil when it is not one.
    static func request(in text: String) -> Request? {
        try? JSONDecoder().decode(Request.self, from: Data(text.utf8))
    }

    /// The answer to a message from the page that is not one.
    static let unreadable = answer(["type": "problem", "message": "tether-web could not read a message from the page"])

    /// The bus messages the page follows: the conversation, the connection, the network, the
    /// outbox, health, storage and the programs held back as misconfigured.
    static let topics = [
        "conv.", Topic.connectionState.name, Topic.networkPath.name, Topic.botState.name, Topic.outboxSummary.name, Topic.health.name,
        Topic.storage.name, Topic.approvals.name, Topic.sessionSettings.name, Topic.misconfigured.name,
    ]

    /// `{"type":"bus","topic":…,"body":…}`, the body as published (with `"replay":true` for a
    /// retained value published again for this page); nil for a body that is not JSON.
    static func bus(_ message: BusMessage) -> String? {
        guard (try? JSONSerialization.jsonObject(with: message.body, options: [.fragmentsAllowed])) != nil,
            let topic = try? JSONEncoder().encode(message.topic.name)
        else { return nil }
        let replay = message.header.replay ? #","replay":true"# : ""
        return #"{"type":"bus","topic":\#(String(decoding: topic, as: UTF8.self))\#(replay),"body":\#(String(decoding: message.body, as: UTF8.self))}"#
    }

    /// An answer to the page, as JSON text.
    static func answer(_ fields: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Carries a page's requests to the bus and back: the first frame again after a reconnect,
/// sends through protod (the page's id kept, so a send repeated after a reconnect is never
/// sent twice), the draft to snapd, a reconnect to connd.
public struct WebBridge: Sendable {
    /// The front end's name on the bus: its presence and its display snapshot in snapd.
    public static let frontEnd = "tether-web"
    /// How many stored entries a page starts with.
    public static let firstFrameEntries = 200

    private let bus: any Bus

    public init(bus: any Bus) {
        self.bus = bus
    }

    /// Answers one request from the page; nil when there is nothing to answer.
    func answer(_ request: PageMessage.Request) async -> String? {
        switch request.type {
        case "snapshot":
            do {
                let snapshot = try await storedFrame(session: request.session, timeout: .milliseconds(2500), attempts: 3)
                let body = String(decoding: try BusSchema.makeEncoder().encode(snapshot), as: UTF8.self)
                return #"{"type":"snapshot","snapshot":\#(body)}"#
            } catch {
                return PageMessage.answer(["type": "problem", "message": "the stored transcript could not be read: \(error)"])
            }
        case "send":
            guard let id = request.id, let content = request.content else {
                return PageMessage.answer(["type": "problem", "message": "a send needs an id and content"])
            }
            do {
                let send = SendMessageCommand.Request(
                    id: MessageID(id), content: content, attachments: request.attachments, whileBusy: request.whileBusy.flatMap(WhileBusy.init(rawValue:)))
                let reply = try await bus.request(SendMessageCommand.self, send, timeout: SendMessageCommand.attemptTimeout(for: send))
                var fields: [String: Any] = ["type": "sendResult", "id": id, "status": reply.status.rawValue]
                if let warning = reply.warning { fields["warning"] = warning }
                return PageMessage.answer(fields)
            } catch {
                if error.isTooLarge {
                    return PageMessage.answer(["type": "sendError", "id": id, "code": "tooLarge", "message": "too large to send: \(error)"])
                }
                if let code = error.refusalCode, let words = error.refusal {
                    return PageMessage.answer(["type": "sendError", "id": id, "code": code.rawValue, "message": words])
                }
                // protod did not answer: the page keeps the message and sends it again with its id.
                return PageMessage.answer(["type": "sendError", "id": id, "code": "unavailable", "message": "\(error)"])
            }
        case "draft":
            let display = DisplaySnapshot(frontEnd: Self.frontEnd, draft: request.text ?? "")
            do {
                _ = try await bus.request(SaveDisplayCommand.self, display, timeout: .seconds(2), attempts: 1)
            } catch {
                // Told only when saving cannot succeed: an unanswered save is repeated with the next keystroke.
                if error.isTooLarge || error.refusalCode != nil {
                    return PageMessage.answer(["type": "draftRefused", "message": "the draft is not saved: \(error)"])
                }
            }
            return nil
        case "approve":
            guard let id = request.id, let decision = request.decision.flatMap(ApprovalDecision.init(rawValue:)) else {
                return PageMessage.answer(["type": "problem", "message": "an approval's answer needs its id and a decision: allow-once, allow-always or deny"])
            }
            do {
                let reply = try await bus.request(ApproveCommand.self, .init(id: id, decision: decision), timeout: .seconds(12), attempts: 1)
                return PageMessage.answer(["type": "approved", "id": id, "words": reply.ended.words])
            } catch {
                return PageMessage.answer(["type": "approveError", "id": id, "message": error.refusal ?? "\(error)"])
            }
        case "command":
            guard let id = request.id, let text = request.text else {
                return PageMessage.answer(["type": "problem", "message": "a command needs an id and its text"])
            }
            var fields = await command(text, id: id)
            fields["type"] = "command"
            fields["id"] = id
            return PageMessage.answer(fields)
        case "around":
            guard let id = request.id, let position = request.position else {
                return PageMessage.answer(["type": "problem", "message": "showing a message in its conversation needs an id and its position"])
            }
            do {
                let reply =
                    try await bus.request(
                        AroundCommand.self, .init(position: position, session: request.session), timeout: .seconds(5), attempts: 2)
                    as AroundCommand.Reply
                var fields: [String: Any] = [
                    "type": "command", "id": id, "handled": true,
                    "title": reply.title,
                    "lines": reply.lines { (date: Date) in date.formatted(.iso8601) },
                ]
                if let focus = reply.focus { fields["focus"] = focus }
                return PageMessage.answer(fields)
            } catch {
                return PageMessage.answer(["type": "command", "id": id, "handled": true, "words": error.refusal ?? "\(error)"])
            }
        case "reconnect":
            _ = try? await bus.request(
                ConnectionCommand.self, .init(action: .reconnect, reason: "asked for on the web page"), timeout: .seconds(2), attempts: 2)
            return nil
        default:
            return PageMessage.answer(["type": "problem", "message": "tether-web does not know the request \(request.type)"])
        }
    }

    /// What a line beginning with "/" is: one of Tether's own commands, carried out here and
    /// answered with what the page shows (`lines` under a `title`, a `problem`, or `show`
    /// `status`), or a message, which the page sends as typed (`handled` false, with a `note`).
    private func command(_ text: String, id: String) async -> [String: Any] {
        let command: LocalCommand
        switch SlashCommands.standard.read(text) {
        case .message: return ["handled": false, "text": text]
        case .misused(let words): return ["handled": true, "words": words]
        case .local(let local): command = local
        }
        switch command {
        case .help:
            return ["handled": true, "title": "Tether handles these itself", "lines": SlashCommands.standard.help]
        case .status:
            return ["handled": true, "show": "status"]
        case .restartSession(let line):
            return [
                "handled": false, "text": line,
                "note": "\(line) sent: the gateway starts the session anew, its history empty, and answers in the conversation.",
            ]
        case .sendWhileBusy(let choice, let line):
            // Sent by the page as any message, with what it does if a reply is in progress.
            return ["handled": false, "text": line, "whileBusy": choice.rawValue]
        default:
            break
        }
        switch await LocalCommandRunner.run(command, id: MessageID(id), bus: bus) {
        case .list(let title, let lines)?:
            return ["handled": true, "title": title, "lines": lines]
        case .words(let words)?:
            return ["handled": true, "words": words]
        case .found(let reply, let words)?:
            guard !reply.hits.isEmpty else { return ["handled": true, "words": "no stored message holds \(words)"] }
            let more = reply.nextBefore == nil ? "" : "; the newest \(reply.hits.count): tether search lists more"
            return [
                "handled": true, "title": "Found in the stored conversation, newest first (choose one to see it in its conversation\(more))",
                "lines": reply.hits.map(\.plainLine),
                "hits": reply.hits.map { hit -> [String: Any] in
                    var place: [String: Any] = ["position": hit.position]
                    if let session = hit.entry.session { place["session"] = session }
                    return place
                },
            ]
        case nil:
            return ["handled": true]
        }
    }

    /// What snapd keeps for the page: the newest entries of `session` (nil: of the session
    /// chatted in), the replies still streaming, the draft.
    private func storedFrame(session: String? = nil, timeout: Duration, attempts: Int) async throws(BusError) -> PageRenderer.FirstFrame {
        let reply = try await bus.request(
            SnapshotCommand.self, .init(frontEnd: Self.frontEnd, limit: Self.firstFrameEntries, session: session), timeout: timeout, attempts: attempts)
        return PageRenderer.FirstFrame(
            entries: reply.transcript.entries, revision: reply.transcript.revision, streaming: reply.streaming, draft: reply.display?.draft ?? "",
            session: session ?? reply.session?.sessionKey)
    }

    /// The first frame for a new page: the stored transcript, the draft, the connection.
    func firstFrame(connection: ConnectionStatus?) async -> PageRenderer.FirstFrame {
        do {
            var frame = try await storedFrame(timeout: .seconds(2), attempts: 1)
            frame.connection = connection
            return frame
        } catch {
            return PageRenderer.FirstFrame(
                connection: connection, problem: "The stored transcript could not be read (tether-snapd did not answer); it comes as soon as the page connects."
            )
        }
    }
}
