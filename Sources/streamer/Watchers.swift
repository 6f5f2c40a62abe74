import Dispatch
import Glibc
import MediaSources
import StreamEngine
import UringIO

/// The live progress line.
func progressLine(_ s: SenderStats) -> String {
    let rtt = s.rttSmoothed.map { "\(fixedPoint($0, decimals: 2)) ms" } ?? "-"
    return "sent \(s.framesSent) frames, \(s.packetsSent) packets, \(s.bytesSent) bytes; confirmed \(s.packetsConfirmed), lost \(s.packetsLost), unconfirmed \(s.bytesUnconfirmed) B; RTT \(rtt)"
}

/// Says on stderr, one line each, what the engine's event stream reports as it happens: sends
/// failing (once per kind of error), no feedback at all, the receiver gone and back, the path
/// lost, back or changed.
final class SenderEventPrinter: Sendable {
    private let drained = DispatchSemaphore(value: 0)

    /// Subscribes before `sender.run()` so that no event is missed. `quiet`: no lines for path
    /// changes (`--quiet`).
    init(sender: MediaSender, quiet: Bool = false) {
        let events = sender.events()
        let drained = self.drained
        Task.detached {
            for await event in events {
                if quiet, event.isPathChange { continue }
                if let line = senderEventLine(event, sender: sender) { printError(line) }
            }
            drained.signal()
        }
    }

    /// Waits until every event of the finished run is printed (the stream ends when `run` returns).
    func waitUntilDrained() { drained.wait() }
}

/// The stderr line for an event (nil for those only the stats and the library see).
func senderEventLine(_ event: SenderEvent, sender: MediaSender) -> String? {
    // With several flows, each line names its flow's receiver.
    let prefix = sender.flowCount > 1 ? "streamer send: [\(sender.stats(flow: event.flow).destination)]" : "streamer send:"
    switch event {
    case .sendsFailing(_, let failure, let datagrams):
        // Once per kind of error, not once per datagram: the count is in the stats.
        return "\(prefix) sends failing: \(failure) (\(datagrams) datagrams so far; counted in stats.errors)"
    case .feedbackAbsent:
        return "\(prefix) no RTCP feedback from the receiver (ffmpeg/ffplay send none); running without the unconfirmed bound (use --no-feedback to say so)"
    case .receiverGone(_, let unconfirmedBytes):
        return "\(prefix) the receiver stopped sending feedback; holding at \(unconfirmedBytes) unconfirmed bytes"
    case .receiverBack:
        return "\(prefix) the receiver is back; resuming with a keyframe"
    case .pathUnviable:
        return "\(prefix) no route to \(sender.stats(flow: event.flow).destination) (path not viable); holding the stream (frames dropped) until a route returns"
    case .pathViable(_, let milliseconds):
        return "\(prefix) a route is back (\(milliseconds) ms without one so far); resuming with a keyframe"
    case .pathChanged(_, let interface, let gateway, let source):
        let via = [interface.map { "dev \($0)" }, gateway.map { "via \($0)" }, source.map { "src \($0)" }]
            .compactMap { $0 }.joined(separator: " ")
        return "\(prefix) path changed (now \(via.isEmpty ? "another route" : via)); probing its MTU again"
    case .sourceAddressChanged(_, let source):
        return "\(prefix) sending from \(source ?? "another address") now (the source address on the path changed); same SSRC and ports"
    case .boundReached, .pathMTUChanged, .flowRedirected, .targetBitrate:
        return nil
    }
}

/// A line of progress on stderr once a second, on its own thread.
final class Progress: Sendable {
    private let running = MutexBox<Bool>(true)
    init(enabled: Bool, line: @escaping @Sendable () -> String) {
        guard enabled else { return }
        let running = self.running
        startDetachedThread {
            while running.get() {
                sleep(1)
                if running.get() { printError(line()) }
            }
        }
    }
    func stop() { running.set(false) }
}

/// `value` with `decimals` digits after the point, rounded as printf's `%.Nf` rounds (what
/// `String(format:)` wrote; Foundation is not linked: results/profile.md section 35).
func fixedPoint(_ value: Double, decimals: Int) -> String {
    // %f of the largest Double has 309 digits before the point.
    let capacity = 330 + decimals
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
        _ = withVaList([value]) { vsnprintf(buffer.baseAddress, capacity, "%.\(decimals)f", $0) }
        return String(cString: buffer.baseAddress!)
    }
}

/// The line on stderr for each change of a source's stalls.
func sourceStallLine(_ event: SourceStallEvent) -> String {
    func seconds(_ duration: Duration) -> String {
        "\(fixedPoint(Double(duration.nanoseconds) / 1e9, decimals: 1)) s"
    }
    switch event {
    case let .stalled(silence): return "streamer send: source stalled (no frame for \(seconds(silence)))"
    case let .resumed(gap): return "streamer send: source resumed after \(seconds(gap))"
    case let .endedWhileStalled(silence): return "streamer send: source ended while stalled (no frame for \(seconds(silence)))"
    }
}

extension SenderEvent {
    /// The route monitor's events (`--quiet` silences their lines).
    var isPathChange: Bool {
        switch self {
        case .pathUnviable, .pathViable, .pathChanged, .sourceAddressChanged: return true
        default: return false
        }
    }
}
