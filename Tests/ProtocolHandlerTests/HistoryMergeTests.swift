import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// How a history answer is read: which messages are Tether's, which replies answer them for
/// certain, and the ids of the rest, with history shaped as the real gateway's (REAL-GATEWAY.md).
@Suite struct HistoryMergeTests {
    static func at(_ seconds: Double) -> Date { OpenClawDeliveryTests.at(seconds) }
    static let own = OpenClawProtocol.ownSenderLabel

    static func user(_ text: String, at seconds: Double, label: String? = own, id: String? = nil) -> ChatTranscriptMessage {
        ChatTranscriptMessage(
            role: "user", text: text, timestamp: OpenClawDeliveryTests.milliseconds(seconds), senderLabel: label, entryID: id ?? Self.id(text, seconds))
    }

    static func assistant(_ text: String, at seconds: Double, stopReason: String = "stop", id: String? = nil) -> ChatTranscriptMessage {
        ChatTranscriptMessage(
            role: "assistant", text: text, timestamp: OpenClawDeliveryTests.milliseconds(seconds), stopReason: stopReason,
            entryID: id ?? Self.id(text, seconds),
            model: "m")
    }

    static func id(_ text: String, _ seconds: Double) -> String { String(String(text.hashValue, radix: 16).suffix(6)) + String(Int(seconds * 10)) }

    static func sent(_ id: String, _ text: String, at seconds: Double) -> HistoryMerge.Sent {
        HistoryMerge.Sent(id: MessageID(id), text: text, createdAt: at(seconds))
    }

    static func merge(
        _ history: [ChatTranscriptMessage], limit: Int = 100, sent: [HistoryMerge.Sent], clockOffset: TimeInterval = 0,
        known: [MessageID: (content: String, status: DeliveryStatus)] = [:], published: [String: MessageID] = [:]
    ) -> HistoryMerge {
        HistoryMerge.merge(
            history, limit: limit,
            context: HistoryMerge.Context(
                sent: sent, clockOffset: clockOffset, botName: "Bot", ownLabel: own, known: { known[$0] }, published: { published[$0] }))
    }

    @Test func identicalTextsAreMatchedInOrderAndNotBeforeTheyWereMade() {
        let sent = [Self.sent("a", "ok", at: 0), Self.sent("b", "ok", at: 100)]
        let merge = Self.merge([Self.user("ok", at: 0.1), Self.user("ok", at: 50)], sent: sent)
        #expect(merge.found == [MessageID("a")], "the second \"ok\" came before b was made: another client's")
        #expect(merge.entries.map(\.content) == ["ok"] && merge.entries.first?.id.value.hasPrefix("oc:") == true)
    }

    @Test func messagesWhoseTurnsRanOutOfOrderAreAllFound() {
        // b was written before a (a waited in the gateway's queue, or was written again).
        let sent = [Self.sent("a", "first", at: 0), Self.sent("b", "second", at: 1)]
        let merge = Self.merge(
            [Self.user("second", at: 2), Self.assistant("You said: second", at: 3), Self.user("first", at: 4), Self.assistant("You said: first", at: 5)],
            sent: sent)
        #expect(merge.found == [MessageID("a"), MessageID("b")], "a message in the gateway's transcript was taken for lost")
        #expect(!merge.entries.contains { $0.sender == .user }, "one of Tether's messages was shown as another's")
    }

    @Test func theClockOffsetIsAppliedToTheGatewaysTimes() {
        let sent = [Self.sent("a", "hi", at: 100)]
        // The gateway's clock is 60 s ahead: 130 s by it is 70 s by Tether's, before "a" was made.
        #expect(Self.merge([Self.user("hi", at: 130)], sent: sent, clockOffset: 60).found.isEmpty)
        #expect(Self.merge([Self.user("hi", at: 130)], sent: sent).found == [MessageID("a")])
    }

    @Test func theLastAssistantMessageOfATurnIsTheReplyAndEarlierOnesAreSteps() {
        let history = [
            Self.user("do it", at: 1), Self.assistant("let me check", at: 2),
            ChatTranscriptMessage(role: "toolResult", text: "42", timestamp: OpenClawDeliveryTests.milliseconds(3)), Self.assistant("it is 42", at: 4),
        ]
        let merge = Self.merge(history, sent: [Self.sent("a", "do it", at: 0)])
        #expect(merge.entries.map(\.id.value) == ["a:reply-1", "a:reply"])
        #expect(merge.replies[MessageID("a")]?.content == "it is 42" && merge.unclaimed.isEmpty)
    }

    @Test func aWindowCutAtItsLimitSaysWhereItStarts() {
        let history = (1...10).map { Self.user("m\($0)", at: Double($0)) }
        #expect(Self.merge(history, limit: 10, sent: []).windowStart == Self.at(1))
        #expect(Self.merge(history, limit: 11, sent: []).windowStart == nil)
    }

    @Test func anotherClientsMessageIsNeverTethersAndKeepsItsSender() {
        // Another client sent the same words a moment after Tether: its label says whose is whose.
        let history = [
            Self.user("same", at: 1), Self.assistant("first answer", at: 2), Self.user("same", at: 3, label: "openclaw-tui"),
            Self.assistant("second answer", at: 4),
        ]
        let merge = Self.merge(history, sent: [Self.sent("a", "same", at: 0)])
        #expect(merge.found == [MessageID("a")])
        #expect(merge.replies[MessageID("a")]?.content == "first answer")
        let other = merge.entries.first { $0.sender == .user }
        #expect(other?.author == "openclaw-tui" && other?.content == "same")
        #expect(merge.entries.first { $0.content == "second answer" }?.inReplyTo == nil)
    }

    @Test func aReplyIsNotClaimedWhenAnotherEntryCouldBeTheMessage() {
        // Two entries of Tether's label say "yes" (another Tether, or one lost and one not): which
        // one is this message's is not certain, so neither reply is claimed.
        let history = [Self.user("yes", at: 1), Self.assistant("one", at: 2), Self.user("yes", at: 3), Self.assistant("two", at: 4)]
        let merge = Self.merge(history, sent: [Self.sent("a", "yes", at: 0)])
        #expect(merge.found == [MessageID("a")], "delivered: an entry of its text is there")
        #expect(merge.replies.isEmpty)
        #expect(merge.unclaimed[MessageID("a")] != nil)
        #expect(merge.entries.allSatisfy { $0.inReplyTo == nil && $0.attribution == nil })
        #expect(merge.entries.filter { $0.sender != .user }.map(\.content) == ["one", "two"])
    }

    @Test func aReplyIsNotClaimedWhenTheTurnBeforeHadNotEnded() {
        // A gateway whose runs overlap: another client's message, Tether's, then both replies.
        let history = [
            Self.user("theirs", at: 1, label: "openclaw-control-ui"), Self.user("mine", at: 2), Self.assistant("to theirs", at: 3),
            Self.assistant("to mine", at: 4),
        ]
        let merge = Self.merge(history, sent: [Self.sent("a", "mine", at: 0)])
        #expect(merge.found == [MessageID("a")] && merge.replies.isEmpty)
        #expect(merge.unclaimed[MessageID("a")] == merge.entries.last?.id)
        #expect(!merge.entries.contains { $0.id.value.hasPrefix("a:") })
    }

    @Test func theGatewaysRewriteAfterARestartIsTheNewMessageAndAddsNoEntry() {
        let rewrite =
            "[Queued user message that arrived while the previous turn was still active]\n\n[Thu 2026-11-26 08:14 UTC] lost one\n\n\n[Thu 2026-11-26 08:15 UTC] next one"
        let history = [
            Self.user("hello", at: 1), Self.assistant("hi", at: 2), Self.user("lost one", at: 3), Self.user(rewrite, at: 10),
            Self.assistant("answer to both", at: 11),
        ]
        let sent = [Self.sent("h", "hello", at: 0), Self.sent("l", "lost one", at: 2.5), Self.sent("n", "next one", at: 9)]
        let merge = Self.merge(history, sent: sent)
        #expect(merge.found == [MessageID("h"), MessageID("l"), MessageID("n")])
        #expect(!merge.entries.contains { $0.sender == .user }, "the rewrite is Tether's message, not a new one")
        #expect(merge.replies[MessageID("n")]?.content == "answer to both")
        #expect(merge.replies[MessageID("l")] == nil)
    }

    @Test func anAbortedRunsTwoEntriesAreOneIncompleteReply() {
        var injected = Self.assistant("partial te", at: 5, id: "inj")
        injected.model = ChatTranscriptMessage.gatewayInjected
        injected.abortedRunID = "b"
        let history = [
            Self.user("first", at: 1), Self.assistant("whole answer", at: 2), injected, Self.user("second", at: 4),
            Self.assistant("partial text", at: 5, stopReason: "aborted"),
        ]
        let merge = Self.merge(history, sent: [Self.sent("a", "first", at: 0), Self.sent("b", "second", at: 3)])
        #expect(merge.replies[MessageID("a")]?.content == "whole answer", "the injected entry after a's reply is not a's")
        let reply = merge.replies[MessageID("b")]
        #expect(reply?.id == MessageID("b:reply") && reply?.status == .incomplete && reply?.content == "partial text")
        #expect(merge.entries.map(\.id.value) == ["a:reply", "b:reply"])
    }

    @Test func aReplyStoppedLiveKeepsTheReasonSaidWhenTheHistoryHasMoreOfIt() {
        // Stopped with chat.abort while the live text was behind the gateway's: the history's
        // longer text is published, with the reason said when it stopped, not the history's.
        let stopped = "the reply was stopped (chat.abort)"
        var memory = TranscriptMemory()
        memory.remember(
            TranscriptEntry(
                id: MessageID("b:reply"), sender: .bot(name: "Bot"), content: "partial", timestamp: Self.at(5), status: .incomplete,
                inReplyTo: MessageID("b"), detail: stopped))
        memory.remember(
            TranscriptEntry(
                id: MessageID("b:reply"), sender: .bot(name: "Bot"), content: "partial", timestamp: Self.at(5), status: .incomplete,
                inReplyTo: MessageID("b"), detail: HistoryMerge.abortedDetail))
        let (entries, details) = (memory.entries, memory.details)
        let merge = HistoryMerge.merge(
            [Self.user("second", at: 4), Self.assistant("partial text", at: 5, stopReason: "aborted")], limit: 100,
            context: HistoryMerge.Context(
                sent: [Self.sent("b", "second", at: 3)], clockOffset: 0, botName: "Bot", ownLabel: Self.own, known: { entries[$0] },
                detail: { details[$0] }))
        let reply = merge.entries.first { $0.id == MessageID("b:reply") }
        #expect(reply?.content == "partial text" && reply?.status == .incomplete)
        #expect(reply?.detail == stopped, "\(reply?.detail ?? "no detail")")
        // With nothing said before, the history's words.
        let fresh = Self.merge(
            [Self.user("second", at: 4), Self.assistant("partial text", at: 5, stopReason: "aborted")], sent: [Self.sent("b", "second", at: 3)])
        #expect(fresh.replies[MessageID("b")]?.detail == HistoryMerge.abortedDetail)
    }

    @Test func anAbortedRunWithOnlyTheGatewaysEntryStillHasItsReply() {
        var injected = Self.assistant("so far", at: 5, id: "inj")
        injected.model = ChatTranscriptMessage.gatewayInjected
        injected.abortedRunID = "b"
        let merge = Self.merge([injected, Self.user("second", at: 4)], sent: [Self.sent("b", "second", at: 3)])
        #expect(merge.replies[MessageID("b")]?.status == .incomplete && merge.entries.map(\.id.value) == ["b:reply"])
    }

    @Test func anotherClientsAbortedRunIsShownOnce() {
        var injected = Self.assistant("their partial", at: 5, id: "inj")
        injected.model = ChatTranscriptMessage.gatewayInjected
        injected.abortedRunID = "someone-else"
        let history = [
            Self.user("x", at: 1, label: "openclaw-tui"), Self.assistant("y", at: 2), injected, Self.user("z", at: 4, label: "openclaw-tui"),
            Self.assistant("their partial!", at: 5, stopReason: "aborted"),
        ]
        let bot = Self.merge(history, sent: []).entries.filter { $0.sender != .user }
        #expect(bot.map(\.content) == ["y", "their partial!"] && bot.last?.status == .incomplete)
    }

    @Test func whatACutWindowStartsWithIsNotShownAndAMovedWindowAddsNothing() {
        // 150 entries: Tether's messages and their replies, and another client's.
        var history: [ChatTranscriptMessage] = []
        var sent: [HistoryMerge.Sent] = []
        for turn in 0..<75 {
            let time = Double(turn) * 10
            if turn % 3 == 0 {
                history.append(Self.user("other \(turn)", at: time + 1, label: "openclaw-tui"))
            } else {
                history.append(Self.user("mine \(turn)", at: time + 1))
                sent.append(Self.sent("m\(turn)", "mine \(turn)", at: time))
            }
            history.append(Self.assistant("reply \(turn)", at: time + 2))
        }
        // Tether's replies came live, under their messages' reply ids, with no gateway id.
        var known: [MessageID: (content: String, status: DeliveryStatus)] = [:]
        for turn in 0..<75 where turn % 3 != 0 { known[MessageID("m\(turn):reply")] = ("reply \(turn)", .received) }
        var published: [String: MessageID] = [:]
        var seen: [MessageID] = []
        for end in stride(from: 99, through: 150, by: 7) {
            let window = Array(history[max(0, end - 100)..<min(end, history.count)])
            let merge = Self.merge(window, limit: 100, sent: sent, known: known, published: published)
            for entry in merge.entries {
                #expect(known[entry.id] == nil, "\(entry.id) published again")
                known[entry.id] = (entry.content, entry.status)
                if let gatewayID = entry.gatewayID { published[gatewayID] = entry.id }
                seen.append(entry.id)
            }
            #expect(window.first?.role != "assistant" || !merge.entries.contains { $0.content == window.first?.text })
        }
        #expect(Set(seen).count == seen.count)
        // Every reply is published once, under one id: the message's, or, for another client's, its own.
        let replies = history.filter { $0.role == "assistant" }.map(\.text)
        let shown = known.values.filter { $0.content.hasPrefix("reply ") }.map(\.content)
        #expect(Set(shown).count == shown.count)
        #expect(Set(shown).isSubset(of: Set(replies)))
    }

    @Test func aClaimOnceMadeStaysWithTheEntryWhateverTheWindow() {
        let first = Self.merge([Self.user("only", at: 1), Self.assistant("answer", at: 2)], limit: 2, sent: [Self.sent("a", "only", at: 0)])
        // The window is cut and starts at the message: its turn's start cannot be checked again.
        #expect(first.replies[MessageID("a")] == nil, "a cut window's first message is not alone for certain")
        let whole = Self.merge([Self.user("only", at: 1), Self.assistant("answer", at: 2)], limit: 3, sent: [Self.sent("a", "only", at: 0)])
        let reply = try! #require(whole.replies[MessageID("a")])
        let later = Self.merge(
            [Self.user("only", at: 1), Self.assistant("answer", at: 2)], limit: 2, sent: [Self.sent("a", "only", at: 0)],
            known: [reply.id: (reply.content, reply.status)], published: [reply.gatewayID!: reply.id])
        #expect(later.entries.isEmpty && later.replies[MessageID("a")] != nil && later.unclaimed.isEmpty)
    }

    @Test func aReplyPublishedLiveIsNotAddedAgainWhenHistoryCannotClaimIt() {
        let history = [Self.user("yes", at: 1), Self.assistant("one", at: 2), Self.user("yes", at: 3), Self.assistant("two", at: 4)]
        let merge = Self.merge(history, sent: [Self.sent("a", "yes", at: 0)], known: [MessageID("a:reply"): ("one", .received)])
        #expect(merge.replies[MessageID("a")] != nil && merge.unclaimed.isEmpty)
        #expect(merge.entries.map(\.content) == ["yes", "two"])
    }

    @Test func aLongMessageShortenedByTheGatewayIsStillFoundAndTheWholeReplyKept() {
        let long = String(repeating: "a", count: 13_000)
        let short = String(long.prefix(12_000)) + HistoryMerge.truncationMark
        let history = [Self.user(short, at: 1), Self.assistant(short, at: 2)]
        let merge = Self.merge(history, sent: [Self.sent("a", long, at: 0)], known: [MessageID("a:reply"): (long, .received)])
        #expect(merge.found == [MessageID("a")] && merge.entries.isEmpty)
    }

    /// The gateway cuts by UTF-16 units: through an emoji, whose first half is read as U+FFFD,
    /// or between a letter and its accent.
    @Test func aMessageCutThroughAnEmojiOrAnAccentIsStillFound() {
        let emoji = String(repeating: "a", count: 11_999) + "😀 and more"
        let cut = String(repeating: "a", count: 11_999) + "\u{FFFD}" + HistoryMerge.truncationMark
        #expect(Self.merge([Self.user(cut, at: 1)], sent: [Self.sent("a", emoji, at: 0)]).found == [MessageID("a")])
        let accented = String(repeating: "a", count: 11_999) + "e\u{301} and more"
        let split = String(repeating: "a", count: 11_999) + "e" + HistoryMerge.truncationMark
        #expect(Self.merge([Self.user(split, at: 1)], sent: [Self.sent("b", accented, at: 0)]).found == [MessageID("b")])
        #expect(Self.merge([Self.user(cut, at: 1)], sent: [Self.sent("c", "other", at: 0)]).found.isEmpty)
    }

    @Test func theTimeStampTheGatewayStripsDoesNotHideAMessage() {
        let merge = Self.merge([Self.user("meet", at: 1)], sent: [Self.sent("a", "[Thu 2026-11-26 08:14 UTC] meet", at: 0)])
        #expect(merge.found == [MessageID("a")])
    }

    @Test func entriesTheTranscriptHoldsAlreadyAreNotPublishedAgain() {
        let history = [Self.user("elsewhere", at: 1, label: "openclaw-tui"), Self.assistant("answer", at: 2)]
        let first = Self.merge(history, sent: [])
        let known = Dictionary(uniqueKeysWithValues: first.entries.map { ($0.id, ($0.content, $0.status)) })
        #expect(first.entries.count == 2 && Self.merge(history, sent: [], known: known).entries.isEmpty)
    }

    @Test func theRewriteIsReadIntoItsParts() {
        let text =
            "[Queued user message that arrived while the previous turn was still active]\n\n[Thu 2026-11-26 08:14 UTC] a\nb\n\n\n[Thu 2026-11-26 08:15 UTC] c"
        #expect(OpenClawProtocol.rewriteParts(of: text) == ["a\nb", "c"])
        #expect(OpenClawProtocol.rewriteParts(of: "plain") == ["plain"])
    }
}
