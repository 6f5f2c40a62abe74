import Glibc
import Synchronization
import UringIO

/// Wakes the thread that waits for a sender's finished frames to reach a count
/// (`MediaSender.waitForFramesFinished(_:timeout:)`): the engine signals an eventfd once, when the
/// count is reached, instead of the waiter polling the published stats.
///
/// One waiter at a time. The waiter publishes its target and then reads the count; the engine
/// stores the count and then reads the target (both sequentially consistent): either the waiter
/// sees the count reached, or the engine sees the target and signals.
final class FinishedFramesSignal: Sendable {
    /// The count the waiter waits for; `Int.max`: nobody waits.
    private let target = Atomic<Int>(.max)
    /// The eventfd (non-blocking: the waiter blocks in `poll`). nil when none could be made: the
    /// waiter then polls the count every 200 µs.
    private let event = try? WakeEvent()

    /// Engine side: `finished` frames are done (already stored where `count` reads it). Wakes the
    /// waiter when that reaches its target.
    func reached(_ finished: Int) {
        guard finished >= target.load(ordering: .sequentiallyConsistent),
              target.exchange(.max, ordering: .sequentiallyConsistent) != .max else { return }
        event?.signal()
    }

    /// Waiter side: returns `count()` once it is at least `wanted`, or when `timeout` passed.
    func wait(until wanted: Int, timeout: Duration, count: () -> Int) -> Int {
        target.store(wanted, ordering: .sequentiallyConsistent)
        defer { target.store(.max, ordering: .sequentiallyConsistent) }
        var finished = count()
        guard finished < wanted else { return finished }
        let milliseconds = Int32(clamping: max(timeout.nanoseconds / 1_000_000, 1))
        if let event {
            var entry = pollfd(fd: event.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, milliseconds)
            var value: UInt64 = 0
            _ = read(event.fd, &value, 8)  // clears it (a signal that came after a timeout too)
        } else {
            usleep(200)
        }
        finished = count()
        return finished
    }
}
