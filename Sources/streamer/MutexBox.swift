import Synchronization

/// A value behind a lock, for a thread to publish.
final class MutexBox<T: Sendable>: Sendable {
    private let lock: Mutex<T>
    init(_ value: T) { lock = Mutex(value) }
    func set(_ value: T) { lock.withLock { $0 = value } }
    func get() -> T { lock.withLock { $0 } }
}
