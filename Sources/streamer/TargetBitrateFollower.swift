import MediaSources
import StreamEngine
import UringIO

/// Hands every new target bitrate of the flows' congestion controllers to the live source (the
/// lowest of the flows' targets: one encoder feeds them all, so the slowest path sets it), and
/// says each on stderr when asked (`--print-rate-changes`).
final class TargetBitrateFollower: Sendable {
    /// Subscribes before `sender.run()` so that no change is missed.
    init(sender: MediaSender, source: LiveSource, printChanges: Bool) {
        let events = sender.events()
        Task.detached {
            for await event in events {
                guard case .targetBitrate(let flow, let bitsPerSecond) = event else { continue }
                let lowest = sender.allStats.compactMap { $0.congestion?.targetBitrate }.min() ?? bitsPerSecond
                source.requestBitrate(kbps: max(1, lowest / 1000))
                if printChanges {
                    let destination = sender.flowCount > 1 ? " [\(sender.stats(flow: flow).destination)]" : ""
                    printError("streamer send:\(destination) target bitrate \(formatRate(Double(bitsPerSecond)))bit/s")
                }
            }
        }
    }
}
