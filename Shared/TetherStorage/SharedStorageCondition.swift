public import Foundation
import Synchronization
public import TetherSchema

/// A ``StorageCondition`` shared by the tasks of a program that writes from several at once.
public final class SharedStorageCondition: Sendable {
    private let condition: Mutex<StorageCondition>

    public init(_ condition: StorageCondition) {
        self.condition = Mutex(condition)
    }

    /// The report as last published.
    public var report: StorageReport { condition.withLock { $0.report } }

    /// See ``StorageCondition/writeFailed(_:now:)``.
    public func writeFailed(_ error: any Error, now: Date = Date()) -> StorageReport? {
        condition.withLock { $0.writeFailed(error, now: now) }
    }

    /// See ``StorageCondition/writeSucceeded(now:)``.
    public func writeSucceeded(now: Date = Date()) -> StorageReport? {
        condition.withLock { $0.writeSucceeded(now: now) }
    }

    /// See ``StorageCondition/fullDiskWords(for:)``.
    public func fullDiskWords(for error: any Error) -> String? {
        condition.withLock { $0.fullDiskWords(for: error) }
    }
}
