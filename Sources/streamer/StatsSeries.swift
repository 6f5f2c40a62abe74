import Dispatch
import Glibc
import UringIO

/// `--stats-series PATH`: one line of JSON per interval appended to a file, each a whole stats
/// object with `t` (seconds since the start), so a run can be plotted over time (the `--stats`
/// file holds only the latest). Written from a thread of its own; `stop` writes the last line.
final class StatsSeries: Sendable {
    private let running = MutexBox<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)
    private let started: Bool

    /// Opens (truncates) `path` and appends `snapshot()` every `interval` seconds. Throws a
    /// `UsageError` when the file cannot be created.
    init(path: String?, interval: Double, snapshot: @escaping @Sendable () -> [String: Any]) throws {
        guard let path else { started = false; return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else {
            throw UsageError("--stats-series: cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        started = true
        let (running, finished, wake) = (self.running, self.finished, self.wake)
        let start = ContinuousClock.now
        startDetachedThread {
            defer { finished.signal(); close(descriptor) }
            var last = false
            while !last {
                _ = wake.wait(timeout: .now() + interval)
                last = !running.get()
                var object = snapshot()
                let elapsed = ContinuousClock.now - start
                object["t"] = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                guard let line = try? StatsJSON.data(object, pretty: false) else { continue }
                _ = writeLine(descriptor, line)
            }
        }
    }

    /// Writes the last line and waits for it. Safe to call more than once, from any thread.
    func stop() {
        running.set(false)
        wake.signal()
        if started { finished.wait(); finished.signal() }
    }
}
