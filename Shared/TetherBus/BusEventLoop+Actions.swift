import CZeroMQ
import FoundationEssentials
import Logging
import TetherSchema

/// The event loop carrying out what its decisions (``RequestTracker``, ``SubscriptionProbes``,
/// ``UpstreamInterest``) decide: it decides nothing itself.
extension BusEventLoop {
    // MARK: Timers

    func handleTimers() {
        // Nothing waits on a deadline, as between commands: nothing to look at.
        guard probes.count > 0 || requests.count > 0 else { return }
        let now = clock.now
        perform(probes.timePassed(now: now))
        for action in requests.timePassed(now: now) { perform(action) }
    }

    // MARK: Carrying out decisions

    func perform(_ action: RequestTracker.Action) {
        switch action {
        case .send(let id, let endpoint, let frames):
            do {
                let socket: ZMQSocket
                if let open = requestSockets[endpoint] {
                    socket = open
                } else {
                    socket = try requestSocket(endpoint: endpoint)
                    requestSockets[endpoint] = socket
                }
                try socket.send(frames)
            } catch {
                if let failed = requests.sendFailed(id: id, error: error) { perform(failed) }
            }
        case .replaceSocket(let endpoint):
            requestSockets.removeValue(forKey: endpoint)?.close()
        case .finish(let id, let result):
            requestCallers.removeValue(forKey: id)?.resume(returning: result)
        }
    }

    func perform(_ actions: [SubscriptionProbes.Action], endpoint: String? = nil) {
        for action in actions {
            switch action {
            case .subscribe(let topic):
                try? subscriber?.set(ZMQ_SUBSCRIBE, bytes: Array(topic.utf8))
            case .publishProbe(let topic):
                send([Array(topic.utf8), probeHeader().jsonBytes(), Array("{}".utf8)])
            case .finish(let id, let topic, let failure):
                if let topic { try? subscriber?.set(ZMQ_UNSUBSCRIBE, bytes: Array(topic.utf8)) }
                confirmations.removeValue(forKey: id)?.resume(returning: failure.map { .failure($0) } ?? .success(()))
            case .reportHandshakeFailure(let failure):
                logger.error("\(failure)")
            case .reportHandshakeRecovered:
                logger.notice("the bus accepted this program's key", metadata: ["bus.endpoint": "\(endpoint ?? configuration.busIn)"])
            }
        }
    }

    func perform(_ actions: [UpstreamInterest.Action]) {
        for action in actions {
            switch action {
            case .replay(let topic, let body):
                publish(topic: topic, body: body, replay: true)
            case .tell(let id, let present):
                presenceWatchers[id]?.yield(present)
            }
        }
    }

    private func probeHeader() -> BusHeader {
        sequence += 1
        return BusHeader(source: configuration.source, pid: processID, sequence: sequence)
    }
}
