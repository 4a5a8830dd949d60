import Foundation
public import Logging
import Synchronization
public import TetherBus
import TetherSchema

/// What a program that writes a database says of its disk, from any of its tasks: a
/// ``StorageCondition`` behind a lock, and the report published (retained on `storage`)
/// each time it changes.
public final class StorageWatch: Sendable {
    private let condition: Mutex<StorageCondition>
    private let logger: Logger
    private let bus: any Bus

    /// - Parameter bus: where the report is retained, on `storage`.
    public init(_ condition: StorageCondition, bus: any Bus, logger: Logger) {
        self.condition = Mutex(condition)
        self.bus = bus
        self.logger = logger
    }

    private func publish(_ report: StorageReport) {
        do {
            try bus.retain(report, on: .storage)
        } catch {
            logger.warning("cannot publish", metadata: ["bus.topic": "\(Topic.storage)", "bus.error": "\(error)"])
        }
    }

    /// Publishes the report as it stands (at start: the databases set aside, if any).
    public func announce() {
        publish(condition.withLock { $0.report })
    }

    /// Says anew what became of a database set aside at start (more was recovered later).
    public func reword(file: String, as words: String) {
        guard let report = condition.withLock({ $0.reword(file: file, as: words) }) else { return }
        logger.notice("\(words)")
        publish(report)
    }

    /// A write succeeded: a disk that was full has room again, and is said to.
    public func wrote() {
        guard let report = condition.withLock({ $0.writeSucceeded() }) else { return }
        logger.notice("the disk has room again: writing again")
        publish(report)
    }

    /// A write failed: a full disk is said (once), with the file system and the room left.
    public func writeFailed(_ error: any Error) {
        guard let report = condition.withLock({ $0.writeFailed(error) }) else { return }
        logger.error("\(report.words ?? "the disk is full")")
        publish(report)
    }

    /// The words for `error` when it is a full disk; nil for any other failure.
    public func fullDiskWords(for error: any Error) -> String? {
        condition.withLock { $0.fullDiskWords(for: error) }
    }
}
