import CZeroMQ
import FoundationEssentials
import Logging
import TetherSchema

/// What the event loop reads from its sockets: the proxy's subscription reports, the
/// monitors' events, publications, served commands and replies to the commands it sent.
extension BusEventLoop {
    // MARK: Readiness

    func readSubscriptionRequests() {
        guard let publisher else { return }
        while let frames = try? publisher.receive() {
            guard let report = frames.first.flatMap(UpstreamInterest.Report.init(frame:)) else { continue }
            perform(interest.proxyReported(report))
            if case .subscribed(let prefix) = report { perform(probes.proxySubscribed(to: prefix)) }
        }
    }

    /// The proxy went away: the subscriptions it had reported went with it, and whatever
    /// was in flight. A restarted proxy reports its subscriptions again.
    func readPublisherEvents() {
        guard let publisherMonitor else { return }
        var disconnected = false
        for event in Self.events(from: publisherMonitor) {
            if event == ZMQ_EVENT_DISCONNECTED { disconnected = true } else { handshakeEvent(event, endpoint: configuration.busIn) }
        }
        guard disconnected else { return }
        perform(interest.proxyLost())
    }

    func readSubscriberEvents() {
        guard let subscriberMonitor else { return }
        for event in Self.events(from: subscriberMonitor) {
            handshakeEvent(event, endpoint: configuration.busOut)
        }
    }

    /// The events waiting on a monitor socket.
    private static func events(from monitor: ZMQSocket) -> [Int32] {
        var events: [Int32] = []
        while let frames = try? monitor.receive() {
            // The first frame is the event (16 bits) and its value (32 bits), little-endian.
            guard let event = frames.first, event.count >= 2 else { continue }
            events.append(Int32(event[0]) | Int32(event[1]) << 8)
        }
        return events
    }

    /// A CURVE handshake with a remote proxy ended, on `endpoint`.
    private func handshakeEvent(_ event: Int32, endpoint: String) {
        guard event != ZMQ_EVENT_HANDSHAKE_SUCCEEDED else {
            perform(probes.handshakeSucceeded(), endpoint: endpoint)
            return
        }
        let failure: BusError = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? .keyRefused(endpoint: endpoint) : .handshakeFailed(endpoint: endpoint)
        perform(probes.handshakeFailed(failure), endpoint: endpoint)
    }

    /// Reads every publication waiting, each straight from libzmq's frames into the
    /// subscriptions it matches.
    func readPublications() {
        guard let subscriber else { return }
        while let received = subscriber.receive(keeping: 3, Self.busMessage) {
            let message: BusMessage
            switch received {
            case .failure(let error):
                logger.warning("cannot receive from the bus", metadata: ["bus.error": "\(error)"])
                return
            case .success(.failure(let dropped)):
                uncounted.drop(dropped.kind)
                logger.warning("dropped a malformed bus message", metadata: ["bus.reason": "\(dropped.reason)", "bus.frames": "\(dropped.frames)"])
                continue
            case .success(.success(let read)):
                message = read
            }
            guard message.header.schema == BusSchema.version else {
                uncounted.drop(BusDrop.unknownSchema)
                logger.warning(
                    "dropped a bus message written with another schema version",
                    metadata: ["bus.topic": "\(message.topic)", "bus.source": "\(message.header.source)", "bus.schema": "\(message.header.schema)"])
                continue
            }
            // A probe confirms our subscription if it is ours; it still goes to subscriptions
            // that match it (a tap subscribed to everything), so sequences there have no holes.
            if message.topic.name.hasPrefix(Topic.probePrefix) {
                perform(probes.probeArrived(topic: message.topic.name))
            }
            uncounted.received += 1
            for subscription in subscriptions.values where subscription.prefixes.contains(where: message.topic.matches(prefix:)) {
                if subscription.buffer.deliver(message) == .droppedOldest { uncounted.drop(BusDrop.lagged) }
            }
        }
    }

    /// A received message that is not topic, header and body: how it is counted and why.
    struct DroppedMessage: Error {
        var kind: String
        var reason: BusError
        var frames: Int
    }

    /// Reads a publication's frames where libzmq holds them.
    private static func busMessage(_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, total: Int) -> Result<BusMessage, DroppedMessage> {
        guard total == 3 else {
            let reason = BusError.malformedMessage("expected 3 frames (topic, header, body), got \(total)")
            return .failure(DroppedMessage(kind: BusDrop.malformed, reason: reason, frames: total))
        }
        return BusMessage.read(topic: frames[0], header: frames[1], body: frames[2]).mapError { reason in
            let topic = String(decoding: frames[0], as: UTF8.self)
            let oversized = frames[2].count > BusSchema.maximumBodySize(of: .topic(topic))
            return DroppedMessage(kind: oversized ? BusDrop.oversized : BusDrop.malformed, reason: reason, frames: total)
        }
    }

    func readCommands(server name: String) {
        guard let server = servers[name] else { return }
        while true {
            let frames: [[UInt8]]
            do {
                guard let received = try server.socket.receive() else { return }
                frames = received
            } catch {
                logger.warning("cannot receive a command", metadata: ["bus.endpoint": "\(name)", "bus.error": "\(error)"])
                return
            }
            switch CommandFrames(frames) {
            case .command(let requestID, let method, let body, let identity):
                let command = IncomingCommand(endpoint: name, requestID: requestID, method: method, body: Data(body), identity: identity)
                if case .dropped = server.continuation.yield(command) {
                    counters.update { $0.drop(BusDrop.commandOverflow) }
                    logger.warning("dropped a command: no room to queue it", metadata: ["bus.endpoint": "\(name)", "bus.method": "\(method)"])
                }
            case .refused(let drop, let reply, let answer):
                counters.update { $0.drop(drop) }
                logger.warning("refused a command", metadata: ["bus.endpoint": "\(name)", "bus.reason": "\(reply.message)", "bus.frames": "\(frames.count)"])
                // Answered from here, the socket's owner: the dispatcher never sees it.
                if let answer { _ = try? server.socket.send(answer) }
            }
        }
    }

    func readReplies(endpoint: String) {
        while let socket = requestSockets[endpoint], let frames = try? socket.receive() {
            if let action = requests.replied(on: endpoint, frames: frames) { perform(action) }
        }
    }
}
