internal import CLibURing
import Glibc
import Synchronization

/// An eventfd another thread signals to wake a ring's owner (read through the ring itself).
public final class WakeEvent: Sendable {
    /// The eventfd.
    public let fd: Int32
    private let signals = Atomic<Int>(0)

    /// `signal()` calls so far (each one `write(2)` on the eventfd), from every thread.
    public var signalCount: Int { signals.load(ordering: .relaxed) }

    /// Opens the eventfd. `eventfd(2)`.
    public init() throws(SystemError) {
        fd = try retryingEINTR("eventfd") { eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK)) }
    }

    deinit { close(fd) }

    /// Wakes the owner. Safe from any thread.
    public func signal() {
        signals.add(1, ordering: .relaxed)
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }
}

extension Ring {
    /// Queues a read of `event` (once; again after its completion arrives), so a
    /// `submit(waitingFor:)` returns when another thread signals.
    public func armWake(_ event: WakeEvent) throws(SystemError) {
        guard !wakeArmed else { return }
        let sqe = try nextEntry()
        io_uring_prep_read(sqe, event.fd, wakeBuffer, 8, 0)
        io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.wakeKind, payload: 0).userData)
        wakeArmed = true
    }
}
