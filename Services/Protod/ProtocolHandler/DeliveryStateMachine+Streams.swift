import Foundation
import TetherSchema
import TetherWire

/// Replies as they stream, in both dialects: published as they grow (at most so often),
/// whole when the final part comes, and cut as incomplete when their connection ends or
/// they stop growing.
extension DeliveryStateMachine {
    mutating func chunk(_ chunk: StreamingChunk, sequence: Int, now: Date, into actions: inout [Action]) {
        guard let progress = assembler.add(chunk) else { return }
        let id = chunk.messageID
        if progress.isFirst {
            if let restored = streams[id] {
                // A reply the protod before this one was receiving, sent again from its start:
                // it answers the message it was matched to then.
                streams[id]?.firstSequence = min(restored.firstSequence, sequence)
                streams[id]?.restored = false
            } else {
                let (target, attribution) = attribute(chunk.replyTo, now: now, into: &actions)
                streams[id] = OpenStream(firstSequence: sequence, inReplyTo: target, attribution: attribution, grewAt: now)
            }
        }
        guard var stream = streams[id] else { return }
        if !progress.isDuplicate { stream.grewAt = now }
        streams[id] = stream
        if progress.isComplete {
            publish(id, content: progress.content, lastIndex: progress.lastIndex, isFinal: true, now: now, into: &actions)
            streams[id] = nil
            actions.append(
                .publishEntry(
                    TranscriptEntry(
                        id: id, sender: .bot(name: bot.name), content: progress.content, timestamp: now, status: .received, inReplyTo: stream.inReplyTo,
                        attribution: stream.attribution)))
            // A whole reply ends the bot's turn: a gateway that knows only the seeds' JSON may
            // never say idle, and one that does says it again.
            if streams.isEmpty { setBotState(.idle, now: now, into: &actions) }
        } else if !progress.isDuplicate {
            let due = (stream.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval)
            if due <= now {
                publish(id, content: progress.content, lastIndex: progress.lastIndex, isFinal: false, now: now, into: &actions)
            } else {
                streams[id]?.publicationDue = true
            }
        }
    }

    /// Publishes the growth of replies whose interval ended.
    mutating func publishDueStreams(now: Date, into actions: inout [Action]) {
        for (id, stream) in streams where stream.publicationDue {
            guard (stream.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval) <= now else { continue }
            streams[id]?.publicationDue = false
            guard let (content, lastIndex) = assembler.assembled(id) else { continue }
            if content.utf8.count > stream.publishedLength {
                publish(id, content: content, lastIndex: lastIndex, isFinal: false, now: now, into: &actions)
            }
        }
    }

    mutating func publish(_ id: MessageID, content: String, lastIndex: Int, isFinal: Bool, now: Date, into actions: inout [Action]) {
        guard let stream = streams[id] else { return }
        let added = String(decoding: content.utf8.dropFirst(stream.publishedLength), as: UTF8.self)
        let length = content.utf8.count
        // The whole reply goes with the first progress and each time it doubled: the bytes on
        // the bus stay within three times the reply's length.
        let whole = stream.wholeLength == 0 || length >= 2 * stream.wholeLength
        actions.append(
            .publishStream(
                StreamProgress(
                    id: id, chunkIndex: max(0, lastIndex), chunk: added, offset: stream.publishedLength, content: whole ? content : nil,
                    isFinal: isFinal, inReplyTo: stream.inReplyTo, attribution: stream.attribution)))
        streams[id]?.publishedAt = now
        streams[id]?.publishedLength = length
        if whole { streams[id]?.wholeLength = length }
    }

    /// A reply that stops growing on a live connection: the connection is probed; past the
    /// stall deadline the reply is incomplete.
    mutating func checkStreams(now: Date, into actions: inout [Action]) {
        var probe = false
        for (id, stream) in streams {
            let quiet = now.timeIntervalSince(stream.grewAt)
            if quiet >= settings.replyStallDeadline {
                cut(id, why: "the reply stopped: nothing more came for \(Self.words(settings.replyStallDeadline))", now: now, into: &actions)
            } else if quiet >= settings.probeAfter {
                probe = true
            }
        }
        if probe { startProbe(now: now, into: &actions) }
    }

    /// The replies still open, in the order they started.
    var openStreamsInOrder: [MessageID] {
        streams.sorted { $0.value.firstSequence < $1.value.firstSequence }.map(\.key)
    }

    /// Ends an open reply as incomplete, as far as it came, and says the bot is no longer at it.
    mutating func cut(_ id: MessageID, why: String, now: Date, into actions: inout [Action]) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        // What came here, or what tether-snapd kept of a reply a protod before this one received, whichever is longer.
        let received = assembler.discard(id) ?? ""
        let partial = (stream.kept?.utf8.count ?? 0) > received.utf8.count ? stream.kept ?? received : received
        actions.append(
            .publishEntry(
                TranscriptEntry(
                    id: id, sender: .bot(name: bot.name), content: partial, timestamp: now, status: .incomplete, inReplyTo: stream.inReplyTo,
                    attribution: stream.attribution, detail: why)))
        if streams.isEmpty { setBotState(.idle, detail: "reply incomplete: \(why)", now: now, into: &actions) }
    }

    /// Retains the bot's state when it, or what is said of it, changed.
    mutating func setBotState(_ state: BotState, detail: String? = nil, now: Date, into actions: inout [Action]) {
        guard bot.state != state || bot.detail != detail else { return }
        bot.state = state
        bot.detail = detail
        actions.append(.retainBotState(BotStateUpdate(state: state, botName: bot.name, detail: detail, timestamp: now)))
    }
}
