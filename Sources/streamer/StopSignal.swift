import Dispatch
import Glibc
import Synchronization
import UringIO

/// What one SIGINT/SIGTERM means, from when it is handled: the first is a request to stop
/// cleanly; copies that arrive within `window` of the first are the same request; one that
/// comes later is a user who asks again, and the run ends at once.
///
/// Copies are common: `timeout` signals its child and then the child's whole process group
/// (so the child gets the signal twice, microseconds apart), and so do `kill -- -PGID`,
/// service managers that stop a group, and a wrapper script that forwards the Ctrl-C the
/// terminal already sent to the whole foreground group.
final class StopRequests: Sendable {
    /// What a stop signal asks for.
    enum Meaning: Equatable {
        /// The first: stop cleanly (drain, final stats, summary, exit 0).
        case stop
        /// A copy of the first (within the window): nothing more to do.
        case duplicate
        /// A second request: write the final stats and summary, exit 130 at once.
        case exitNow
    }

    /// The default window, 150 ms after the first signal is handled. Copies from `timeout`
    /// or a group kill are generated microseconds apart, so even on one loaded CPU they are
    /// handled within a few scheduler slices of the first (a few ms); a person pressing
    /// Ctrl-C again because the first did not seem to work does so after a few hundred ms
    /// at the quickest (reaction time), and a deliberate double press is rarely under
    /// 150 ms. ffmpeg instead counts signals and exits hard only after more than three,
    /// which makes a user press four times; a window keeps "press again" meaning exit.
    static let defaultWindow: Int64 = 150_000_000

    /// Copies within this many nanoseconds of the first count as the first.
    let window: Int64
    /// When the first request was handled (monotonic nanoseconds); nil before it.
    private let first = Mutex<Int64?>(nil)

    /// Treats signals within `window` nanoseconds of the first as copies of it.
    init(window: Int64 = StopRequests.defaultWindow) { self.window = window }

    /// A stop signal handled at `now` (monotonic nanoseconds): what it asks for.
    func signalHandled(now: Int64) -> Meaning {
        first.withLock { first in
            guard let at = first else {
                first = now
                return .stop
            }
            return now - at < window ? .duplicate : .exitNow
        }
    }
}

/// The run's final report (the summary line on stderr and the `--stats` JSON), written
/// exactly once: by the command when its run ends, or by the signal trap before an
/// immediate exit, whichever comes first.
final class FinalReport: Sendable {
    private enum Progress { case pending, writing, written }
    private let progress = Mutex(Progress.pending)
    private let finished = DispatchSemaphore(value: 0)
    private let body: @Sendable () throws -> Void

    /// `body` prints the summary and writes the stats; it must be safe to call from any
    /// thread (it reads published stats snapshots only).
    init(_ body: @escaping @Sendable () throws -> Void) { self.body = body }

    /// Writes the report unless it has been written already. When the signal trap is
    /// writing it (before its exit with 130), waits: the process ends there.
    func write() throws {
        guard claim() else {
            if progress.withLock({ $0 }) == .writing { finished.wait(); finished.signal() }
            return
        }
        defer { progress.withLock { $0 = .written }; finished.signal() }
        try body()
    }

    /// For the immediate exit: writes the report if nobody has begun to, or waits (at most
    /// `patience` seconds: a stats write to a full pipe must not hold the exit forever) for
    /// the write under way to end. Errors are said on stderr.
    func writeBeforeExit(patience: Double = 2) {
        if claim() {
            defer { progress.withLock { $0 = .written }; finished.signal() }
            do { try body() } catch { printError("streamer: \(error)") }
            return
        }
        if progress.withLock({ $0 }) == .writing {
            if finished.wait(timeout: .now() + patience) == .success { finished.signal() }
        }
    }

    private func claim() -> Bool {
        progress.withLock { progress in
            guard progress == .pending else { return false }
            progress = .writing
            return true
        }
    }
}

/// SIGINT/SIGTERM: the first asks for a clean stop (`onFirst`), copies of it within
/// ``StopRequests/defaultWindow`` are ignored (see ``StopRequests``), and a later one writes
/// the final report (`finalReport`: stats JSON and summary line, from the thread handling
/// the signal) and exits with 130 at once.
final class SignalTrap {
    private let sources: [DispatchSourceSignal]

    init(requests: StopRequests = StopRequests(), finalReport: FinalReport,
         onFirst: @escaping @Sendable () -> Void) {
        var made: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            // libdispatch may merge copies that are pending together into one event: still one request.
            source.setEventHandler {
                switch requests.signalHandled(now: monotonicNanoseconds()) {
                case .stop: onFirst()
                case .duplicate: break
                case .exitNow:
                    finalReport.writeBeforeExit()
                    exit(130)
                }
            }
            source.resume()
            made.append(source)
        }
        sources = made
    }
}
