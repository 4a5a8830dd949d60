import Synchronization

/// A flag set once by one task or thread and read by another.
public final class OnceFlag: Sendable {
    private let flag = Atomic(false)

    public init() {}

    public func set() {
        flag.store(true, ordering: .relaxed)
    }

    public var isSet: Bool {
        flag.load(ordering: .relaxed)
    }
}
