import Foundation
import Glibc
import StreamEngine
import UringIO

/// One measured combination: a send path against a receive path at a size and batch.
struct BenchCase: Hashable {
    let group: String
    let send: SendPath
    let receive: ReceivePath
    let size: Int
    let batch: Int
}

/// One round of one case: both halves' measurements.
struct RoundRecord {
    let planned: Int
    let sender: SenderMeasurement
    let receiver: ControlMessage
    let stalled: Bool
    /// The stream's plan (`stream` rounds only).
    var stream: StreamPlan?

    var delivered: Int { receiver.int("delivered") }
    var intact: Bool {
        !stalled && sender.sent == planned && delivered == planned && sender.failed == 0
            && receiver.int("corrupt") == 0 && receiver.int("duplicates") == 0
    }
}

/// The sending side of a bench: drives rounds over the control channel, interleaving
/// the cases of each group (A B C A B C ...) after one warm-up round of each.
final class BenchDriver {
    let options: BenchOptions
    let control: ControlChannel
    let receiverHost: String
    private var ports: [ReceivePath: UInt16] = [:]
    private var nextRound: UInt32 = 0
    /// The pre-encoded access units of the `stream` path (encoded at its first round).
    private var media: StreamMedia?
    private var streamPlans: [[Int]: StreamPlan] = [:]

    init(options: BenchOptions, control: ControlChannel, receiverHost: String) throws {
        self.options = options
        self.control = control
        self.receiverHost = receiverHost
        let ready = try control.expect("ready", timeoutMilliseconds: 15_000)
        for (name, port) in ready.fields {
            if let path = ReceivePath(rawValue: name), let number = UInt16(port) { ports[path] = number }
        }
    }

    /// The receive paths the receiver serves.
    var servedReceivePaths: [ReceivePath] { ReceivePath.allCases.filter { ports[$0] != nil } }

    /// The flow window for a size: half the receive buffer at about 1 KiB of kernel overhead per datagram.
    func windowLimit(size: Int, count: Int) -> Int {
        if let window = options.window { return window }
        return min(count, max(256, (options.receiveBuffer / 2) / (size + 1024)))
    }

    /// The pre-encoded media, encoded now if not yet.
    func streamMedia() throws -> StreamMedia {
        if let media { return media }
        let frames = options.quick ? 30 : 60
        progress("encoding \(frames) frames of 1280x720 for the stream path (not timed)")
        let encoded = try StreamMedia.encode(frames: frames)
        let bytes = encoded.accessUnits.reduce(0) { $0 + $1.byteCount }
        progress(String(format: "encoded %d access units, %.0f bytes each on average, in %.1f s",
                        encoded.accessUnits.count, Double(bytes) / Double(encoded.accessUnits.count),
                        encoded.encodeSeconds))
        media = encoded
        return encoded
    }

    /// The plan of a `stream` round of at least `count` packets of at most `size` bytes.
    /// `trailer`: the SRTP tag after each packet.
    func streamPlan(size: Int, count: Int, trailer: Int = 0) throws -> StreamPlan {
        if let plan = streamPlans[[size, count, trailer]] { return plan }
        let plan = try StreamPlan(media: try streamMedia(), datagramSize: size, count: count, trailer: trailer)
        streamPlans[[size, count, trailer]] = plan
        return plan
    }

    /// Runs one round of `benchCase` with `count` datagrams (a `stream` round: the whole
    /// access units that make at least `count` packets). `rate` paces the engine path
    /// (`uring-gso` only) and makes the receiver time the arrivals.
    func runRound(_ benchCase: BenchCase, count requested: Int, rate: Double? = nil,
                  video: (media: StreamMedia, plan: StreamPlan, framesPerSecond: Int)? = nil) throws -> RoundRecord {
        nextRound += 1
        let round = nextRound
        guard let port = ports[benchCase.receive],
              let destination = SocketAddress(ip: receiverHost, port: port) else {
            throw BenchError.runtime("the receiver does not serve \(benchCase.receive.rawValue)")
        }
        let srtp = benchCase.send.srtpSuite
        let plan = try video?.plan ?? (benchCase.send.isStream
            ? streamPlan(size: benchCase.size, count: requested, trailer: srtp?.rtpOverhead ?? 0) : nil)
        let count = plan?.datagrams ?? requested
        let limit = windowLimit(size: benchCase.size, count: count)
        let step = max(32, limit / 8)
        var kind = "kind=bench"
        if let plan { kind = plan.controlFields + (srtp.map { " srtp=\($0.rawValue)" } ?? "") }
        if let rate {
            kind = video == nil ? "kind=pace rate=\(Int(rate))"
                : kind + " rate=\(Int(rate)) quantum=\(Pacer.defaultQuantum(rateBitsPerSecond: rate, minimum: 1500))"
        }
        try control.send("round id=\(round) path=\(benchCase.receive.rawValue) count=\(count) size=\(benchCase.size) "
                         + "step=\(step) \(kind)")
        _ = try control.expect("started", timeoutMilliseconds: 10_000)
        let window = FlowWindow(control: control, round: round, limit: limit)
        let spec = SendRound(path: benchCase.send, round: round, count: count, size: benchCase.size, batch: benchCase.batch)
        let sender: SenderMeasurement
        if let video, let rate {
            sender = try StreamSender.run(plan: video.plan, media: video.media, to: destination, window: window,
                                          live: (rate, video.framesPerSecond))
        } else if let plan {
            sender = try StreamSender.run(plan: plan, media: try streamMedia(), to: destination, window: window,
                                          srtp: srtp.map(BenchSRTP.key))
        } else if let rate {
            let (socket, mark) = try BenchSender.markedSocket(connectedTo: destination)
            sender = try BenchSender.sendEngine(spec, socket: socket, gso: benchCase.send != .uring, mark: mark,
                                                window: window, rateBitsPerSecond: rate)
        } else {
            sender = try BenchSender.run(spec, to: destination, window: window)
        }
        var done = window.pendingDone
        if done == nil {
            do {
                done = try control.expect("done", timeoutMilliseconds: FlowWindow.stallMilliseconds)
            } catch {
                // Datagrams are missing: stop the round and take what arrived.
                try control.send("stop id=\(round)")
                done = try control.expect("done", timeoutMilliseconds: 10_000)
            }
        }
        return RoundRecord(planned: count, sender: sender, receiver: done!, stalled: window.stalled, stream: plan)
    }

    /// Runs the cases of one group: a warm-up round each, then `repeats` interleaved passes.
    func runGroup(_ cases: [BenchCase], count: Int, repeats: Int, label: String) throws -> [BenchCase: [RoundRecord]] {
        var records: [BenchCase: [RoundRecord]] = [:]
        progress("[\(label)] warm-up: \(cases.count) cases x \(max(1000, count / 5)) datagrams")
        for benchCase in cases { _ = try runRound(benchCase, count: max(1000, count / 5)) }
        for pass in 1...repeats {
            progress("[\(label)] pass \(pass)/\(repeats): \(cases.count) cases x \(count) datagrams")
            for benchCase in cases {
                let record = try runRound(benchCase, count: count)
                if !record.intact {
                    progress("[\(label)] \(benchCase.send.rawValue) -> \(benchCase.receive.rawValue): NOT INTACT "
                             + "(sent \(record.sender.sent), delivered \(record.delivered) of \(count)) "
                             + (record.sender.note ?? ""))
                }
                records[benchCase, default: []].append(record)
            }
        }
        return records
    }

    /// Paced rounds through `PacedSender` (GSO on, default quantum) at each rate, `seconds`
    /// long each, `repeats` times, received on `uring-ts` (kernel timestamps).
    func runPacing(rates: [Double], size: Int, seconds: Double, repeats: Int) throws -> [PacingSummary] {
        guard ports[.uringTimestamps] != nil else { return [] }
        var records: [Double: [RoundRecord]] = [:]
        for pass in 1...repeats {
            progress("[pacing] pass \(pass)/\(repeats): \(rates.count) rates x \(seconds) s")
            for rate in rates {
                let count = max(50, Int(rate * seconds / Double(size * 8)))
                let benchCase = BenchCase(group: "pacing", send: .uringGSO, receive: .uringTimestamps, size: size,
                                          batch: options.batch)
                let record = try runRound(benchCase, count: count, rate: rate)
                if !record.intact {
                    progress("[pacing] \(Int(rate)) bit/s: NOT INTACT (sent \(record.sender.sent), delivered "
                             + "\(record.delivered) of \(count)) " + (record.sender.note ?? ""))
                }
                records[rate, default: []].append(record)
            }
        }
        return rates.map { PacingSummary(rateBitsPerSecond: $0, size: size, rounds: records[$0] ?? []) }
    }

    /// Live video rounds: x265 at each of `bitratesKbps` (1280x720, 30 fps), handed to a
    /// `MediaSender` paced at 1.5 times the bitrate (the `streamer send` default) frame by
    /// frame in real time, `seconds` per round, `repeats` rounds, received on `uring-ts`.
    func runVideo(bitratesKbps: [Int], seconds: Double, repeats: Int) throws -> [VideoSummary] {
        guard ports[.uringTimestamps] != nil else { return [] }
        let framesPerSecond = 30
        var media: [Int: StreamMedia] = [:]
        for kbps in bitratesKbps {
            progress("[video] encoding 60 frames of 1280x720 at \(kbps) kbit/s (not timed)")
            media[kbps] = try StreamMedia.encode(frames: 60, bitrateKbps: kbps, framesPerSecond: framesPerSecond)
        }
        let size = 1472
        var records: [Int: [RoundRecord]] = [:]
        for pass in 1...repeats {
            progress("[video] pass \(pass)/\(repeats): \(bitratesKbps.count) bitrates x \(seconds) s")
            for kbps in bitratesKbps {
                let encoded = media[kbps]!
                let frames = Int(seconds * Double(framesPerSecond))
                let plan = try StreamPlan(media: encoded, datagramSize: size, count: 0, frames: frames)
                let benchCase = BenchCase(group: "video", send: .stream, receive: .uringTimestamps, size: size,
                                          batch: options.batch)
                let record = try runRound(benchCase, count: plan.datagrams, rate: Double(kbps) * 1000 * 1.5,
                                          video: (encoded, plan, framesPerSecond))
                if !record.intact {
                    progress("[video] \(kbps) kbit/s: NOT INTACT (sent \(record.sender.sent), delivered "
                             + "\(record.delivered) of \(plan.datagrams)) " + (record.sender.note ?? ""))
                }
                records[kbps, default: []].append(record)
            }
        }
        return bitratesKbps.map {
            VideoSummary(bitrateKbps: $0, pace: Double($0) * 1000 * 1.5, framesPerSecond: framesPerSecond, size: size,
                         rounds: records[$0] ?? [])
        }
    }

    func finish() { try? control.send("quit") }
}

@available(*, unavailable, message: "a driver is used by one thread")
extension BenchDriver: Sendable {}

/// A progress line on stderr.
func progress(_ text: String) {
    FileHandle.standardError.write(Data(("bench: " + text + "\n").utf8))
}
