import Foundation
import MediaSources
import StreamEngine

/// The live progress line.
func progressLine(_ s: SenderStats) -> String {
    let rtt = s.rttSmoothed.map { String(format: "%.2f ms", $0) } ?? "-"
    return "sent \(s.framesSent) frames, \(s.packetsSent) packets, \(s.bytesSent) bytes; confirmed \(s.packetsConfirmed), lost \(s.packetsLost), unconfirmed \(s.bytesUnconfirmed) B; RTT \(rtt)"
}

/// Says once on stderr when the receiver stops sending feedback, and once when it is back.
final class GoneWatch: Sendable {
    private let running = MutexBox<Bool>(true)
    init(sender: MediaSender) {
        let running = self.running
        Thread {
            let count = sender.flowCount
            var gone = Array(repeating: false, count: count)
            var absentSaid = Array(repeating: false, count: count)
            var errorsSaid = Array(repeating: Set<String>(), count: count)
            while running.get() {
                usleep(100_000)
                for (index, stats) in sender.allStats.enumerated() {
                    // With several flows, each line names its flow's receiver.
                    let prefix = count > 1 ? "streamer send: [\(stats.destination)]" : "streamer send:"
                    for (reason, failed) in stats.errors where !errorsSaid[index].contains(reason) {
                        // Once per kind of error, not once per datagram: the count is in the stats.
                        errorsSaid[index].insert(reason)
                        printError("\(prefix) sends failing: \(reason) (\(failed) datagrams so far; counted in stats.errors)")
                    }
                    if stats.feedbackAbsent && !absentSaid[index] {
                        absentSaid[index] = true
                        printError("\(prefix) no RTCP feedback from the receiver (ffmpeg/ffplay send none); running without the unconfirmed bound (use --no-feedback to say so)")
                    }
                    if stats.receiverGone != gone[index] {
                        gone[index] = stats.receiverGone
                        printError(gone[index] ? "\(prefix) the receiver stopped sending feedback; holding at \(stats.bytesUnconfirmed) unconfirmed bytes"
                                               : "\(prefix) the receiver is back; resuming with a keyframe")
                    }
                }
            }
        }.start()
    }
    func stop() { running.set(false) }
}

/// A line of progress on stderr once a second, on its own thread.
final class Progress: Sendable {
    private let running = MutexBox<Bool>(true)
    init(enabled: Bool, line: @escaping @Sendable () -> String) {
        guard enabled else { return }
        let running = self.running
        Thread {
            while running.get() {
                sleep(1)
                if running.get() { printError(line()) }
            }
        }.start()
    }
    func stop() { running.set(false) }
}

/// The line on stderr for each change of a source's stalls.
func sourceStallLine(_ event: SourceStallEvent) -> String {
    func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.1f s", Double(seconds * 1_000_000_000 + attoseconds / 1_000_000_000) / 1e9)
    }
    switch event {
    case let .stalled(silence): return "streamer send: source stalled (no frame for \(seconds(silence)))"
    case let .resumed(gap): return "streamer send: source resumed after \(seconds(gap))"
    case let .endedWhileStalled(silence): return "streamer send: source ended while stalled (no frame for \(seconds(silence)))"
    }
}
