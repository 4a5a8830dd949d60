import Synchronization
import WSClient

/// The open connection, if any, shared between the task that reads it and the task that
/// writes bus frames to it.
final class ConnectionLink: Sendable {
    private struct State {
        var epoch = 0
        var writer: WebSocketOutboundWriter?
        var openedSinceLastCheck = false
        var lastError: String?
    }

    private let state = Mutex(State())

    /// Registers a new connection and returns its epoch.
    func open(_ writer: WebSocketOutboundWriter) -> Int {
        state.withLock { state in
            state.epoch += 1
            state.writer = writer
            state.openedSinceLastCheck = true
            state.lastError = nil
            return state.epoch
        }
    }

    func close(epoch: Int) {
        state.withLock { state in
            if state.epoch == epoch { state.writer = nil }
        }
    }

    /// The open connection's epoch and writer.
    var current: (Int, WebSocketOutboundWriter)? {
        state.withLock { state in state.writer.map { (state.epoch, $0) } }
    }

    /// The epoch of the latest connection, 0 before the first.
    var epoch: Int {
        state.withLock { $0.epoch }
    }

    /// Whether a connection opened since the last time this was read.
    var wasOpened: Bool {
        state.withLock { state in
            defer { state.openedSinceLastCheck = false }
            return state.openedSinceLastCheck
        }
    }

    var lastError: String? {
        get { state.withLock { $0.lastError } }
        set { state.withLock { $0.lastError = newValue } }
    }
}
