import Foundation
public import TetherSchema
import TetherWire

/// The page as the first answer: the stored transcript in the HTML itself, so a page is never
/// blank even before its WebSocket opens, and the same first frame as JSON for the script.
public struct PageRenderer: Sendable {
    /// What the page starts from.
    public struct FirstFrame: Codable, Sendable {
        public var entries: [TranscriptEntry]
        public var revision: Int
        public var streaming: [StreamProgress]
        /// The draft as the page last saved it (in snapd).
        public var draft: String
        /// The connection as last published, when known.
        public var connection: ConnectionStatus?
        /// Why the stored transcript is missing, when it is.
        public var problem: String?
        /// OpenClaw: the session whose transcript this is.
        public var session: String?
        /// The sizes the page keeps to.
        public var limits: PageLimits

        public init(
            entries: [TranscriptEntry] = [], revision: Int = 0, streaming: [StreamProgress] = [], draft: String = "", connection: ConnectionStatus? = nil,
            problem: String? = nil, session: String? = nil, limits: PageLimits = .standard
        ) {
            self.entries = entries
            self.revision = revision
            self.streaming = streaming
            self.draft = draft
            self.connection = connection
            self.problem = problem
            self.session = session
            self.limits = limits
        }
    }

    /// Where the page is served (``WebAccess/pagePath``): its files are asked for there.
    public let pagePath: String
    /// What the page keeps in its origin's storage to get its cookie back (``WebAccess/pageKey``).
    public let pageKey: String

    public init(pagePath: String, pageKey: String) {
        self.pagePath = pagePath
        self.pageKey = pageKey
    }

    /// The page answered to a browser that asks for the page without its cookie: its script
    /// trades the key the page keeps in the browser's storage for the cookie and loads the
    /// page again; without one, it shows `words`.
    public func recoveryPage(words: String) -> String {
        """
        <!doctype html>
        <html lang="en" data-page-path="\(escape(pagePath))">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Tether</title>
        <link rel="icon" href="\(escape(pagePath))/icon.svg" type="image/svg+xml">
        </head>
        <body>
        <p id="words" role="alert" hidden>\(escape(words))</p>
        <noscript><p>\(escape(words))</p></noscript>
        <script src="\(escape(pagePath))/recover.js"></script>
        </body>
        </html>

        """
    }

    /// The whole page.
    public func page(_ frame: FirstFrame) -> String {
        let items =
            frame.entries.isEmpty
            ? #"<li class="empty">No messages yet. Type one and press Enter.</li>"#
            : frame.entries.map(item).joined(separator: "\n")
        let banner = frame.connection.flatMap { $0.phase == .connected ? nil : $0.words }
        return """
            <!doctype html>
            <html lang="en" data-page-path="\(escape(pagePath))" data-page-key="\(escape(pageKey))">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Tether</title>
            <link rel="stylesheet" href="\(escape(pagePath))/app.css">
            <link rel="icon" href="\(escape(pagePath))/icon.svg" type="image/svg+xml">
            </head>
            <body>
            <div class="page">
            <header>
            <h1>Tether</h1>
            <details class="status"><summary>Status</summary>
            <dl>
            <dt>Connection</dt><dd id="status-connection">\(escape(frame.connection?.words ?? "unknown"))</dd>
            <dt>Network</dt><dd id="status-network">unknown</dd>
            <dt>Outbox</dt><dd id="status-outbox">unknown</dd>
            <dt>Health</dt><dd id="status-health">unknown</dd>
            <dt>Session</dt><dd id="status-session">\(escape(frame.session ?? "the gateway's only one"))</dd>
            <dt>Model</dt><dd id="status-model">unknown</dd>
            <dt>Usage</dt><dd id="status-usage">unknown</dd>
            </dl>
            </details>
            </header>
            <div id="banner" class="banner waiting" role="status" aria-live="polite"\(banner == nil ? " hidden" : "")>
            <span id="banner-words">\(escape(banner ?? ""))</span>
            <button type="button" id="reconnect" hidden>Reconnect now</button>
            </div>
            <p id="network-news" class="visually-hidden" role="status" aria-live="polite"></p>
            <main>
            <h2 class="visually-hidden">Conversation</h2>
            <ol id="conversation" class="conversation">
            \(items)
            </ol>
            <p id="announcer" class="visually-hidden" aria-live="polite" aria-atomic="true"></p>
            </main>
            <section id="approvals" class="approvals" aria-labelledby="approvals-heading" hidden>
            <h2 id="approvals-heading">Waiting for your approval</h2>
            <ul id="approval-list"></ul>
            </section>
            <p id="approval-news" class="visually-hidden" role="status" aria-live="assertive"></p>
            <section id="command-output" class="command-output" aria-live="polite" hidden>
            <h2 id="command-title"></h2>
            <ul id="command-lines"></ul>
            </section>
            <p id="held-back" class="notice" role="alert" hidden></p>
            <p id="notice" class="notice" role="alert">\(escape(frame.problem ?? ""))</p>
            <p id="size-note" class="notice" aria-live="polite" hidden></p>
            <form id="composer" class="composer">
            <label for="message" class="visually-hidden">Message</label>
            <ul id="attachments" class="attachments" aria-label="Images sent with the next message" hidden></ul>
            <textarea id="message" name="message" rows="2" autofocus aria-describedby="size-note" placeholder="Type a message; Enter sends, Shift+Enter starts a new line; paste or drop an image to attach it">\(escape(frame.draft))</textarea>
            <button type="submit">Send</button>
            <button type="button" id="attach">Attach image</button>
            <input type="file" id="attach-file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden>
            </form>
            </div>
            <script type="application/json" id="first-frame">\(json(frame))</script>
            <script src="\(escape(pagePath))/markdown.js"></script>
            <script src="\(escape(pagePath))/app.js"></script>
            </body>
            </html>

            """
    }

    private func item(_ entry: TranscriptEntry) -> String {
        if let tool = entry.tool {
            let bad = tool.state == .error || tool.state == .unfinished ? " bad" : ""
            return
                #"<li class="bot tool\#(bad)" data-id="\#(escape(entry.id.value))"><span class="who">⚙</span> <span class="text">\#(escape(tool.words))</span></li>"#
        }
        switch entry.sender {
        case .user:
            if let author = entry.author {
                return
                    #"<li class="other" data-id="\#(escape(entry.id.value))"><span class="who">\#(escape(author)):</span> <span class="text">\#(escape(entry.content))</span></li>"#
            }
            let mark = entry.deliveryMark
            let text = entry.contentWithAttachments
            return
                #"<li class="user" data-id="\#(escape(entry.id.value))"><span class="who">You:</span> <span class="text">\#(escape(text))</span> <span class="mark">\#(escape(mark))</span></li>"#
        case .bot(name: let name):
            let cut = entry.status == .incomplete ? #"<span class="mark bad">✗ cut off</span>"# : ""

            let replyTo = entry.inReplyTo.map { #" data-reply-to="\#(escape($0.value))""# } ?? ""
            return
                #"<li class="bot" data-id="\#(escape(entry.id.value))"\#(replyTo)><span class="who">\#(escape(name.isEmpty ? "Bot" : name)):</span> <span class="text">\#(escape(entry.content))</span>\#(cut.isEmpty ? "" : " " + cut)</li>"#
        }
    }

    /// Text safe inside an element or an attribute.
    func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// JSON safe inside a script element: no `<` can close it.
    func json(_ frame: FirstFrame) -> String {
        let data = (try? BusSchema.makeEncoder().encode(frame)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }
}
