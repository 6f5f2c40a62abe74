import Dispatch
import Foundation
import Glibc
import MediaFormats
import MediaSources
import SecureRTP
import StreamEngine
import Synchronization
import UringIO

/// HEVC access units encoded once (x265 over the synthetic test pattern) before any
/// timing, then sent again and again by the `stream` path with new timestamps.
final class StreamMedia: Sendable {
    let accessUnits: [AccessUnit]
    let width: Int
    let height: Int
    let bitrateKbps: Int
    let framesPerSecond: Int
    /// Wall time the encoding took (not part of any measurement).
    let encodeSeconds: Double

    private init(accessUnits: [AccessUnit], width: Int, height: Int, bitrateKbps: Int, framesPerSecond: Int,
                 encodeSeconds: Double) {
        self.accessUnits = accessUnits
        self.width = width
        self.height = height
        self.bitrateKbps = bitrateKbps
        self.framesPerSecond = framesPerSecond
        self.encodeSeconds = encodeSeconds
    }

    /// Encodes `frames` pictures of the synthetic source.
    static func encode(frames: Int, width: Int = 1280, height: Int = 720, bitrateKbps: Int = 12_000,
                       framesPerSecond: Int = 30) throws -> StreamMedia {
        let started = monotonicNanoseconds()
        let encoder = try X265Encoder(EncoderConfig(width: width, height: height, fpsNumerator: framesPerSecond,
                                                    bitrateKbps: bitrateKbps))
        let source = SyntheticSource(width: width, height: height)
        var units: [AccessUnit] = []
        for index in 0..<frames {
            if let unit = try encoder.encode(source.frame(at: index)) { units.append(unit) }
        }
        units += encoder.flush()
        guard !units.isEmpty else { throw BenchError.runtime("the encoder produced no access units") }
        return StreamMedia(accessUnits: units, width: width, height: height, bitrateKbps: bitrateKbps,
                           framesPerSecond: framesPerSecond,
                           encodeSeconds: Double(monotonicNanoseconds() - started) / 1e9)
    }
}

/// What one `stream` round will put on the wire, worked out before it starts from the
/// engine's packetizer: the receiver is told the packet count, the bytes, the bytes
/// weighted by position and the frames, and checks all four.
struct StreamPlan {
    /// The largest UDP payload (the MTU less 28 bytes of IPv4 and UDP headers).
    let datagramSize: Int
    /// Access units in the round (the pre-encoded ones, cycled).
    let frames: Int
    /// RTP packets in the round.
    let datagrams: Int
    /// Their bytes (RTP header included).
    let bytes: Int
    /// Sum over the packets of (position from 1) x length, wrapping.
    let positionWeightedBytes: UInt64
    /// Packets per access unit, for the pre-encoded units in order.
    let packetsPerUnit: [Int]
    /// Sends (one SQE each) and GSO sends the engine makes for this stream when it is
    /// never starved, modelled from `PacedSender.pump` and `UDPSendQueue` (a submission
    /// starts slots until it holds 64 datagrams, and finishes the slot under way past that;
    /// a slot holds equal sizes, the last may be shorter,
    /// at most 64 datagrams and 64 KiB; a GSO run at most 65,507 bytes). `MediaSender`'s
    /// stats give GSO sends but not all sends; the measured GSO sends check the model.
    let modelledSends: Int
    let modelledGSOSends: Int

    /// The plan of the whole access units that make at least `count` packets, or of exactly
    /// `frames` access units. With SRTP, `trailer` bytes (the tag) follow each packet on the
    /// wire: the packetizer plans for them, as the engine's does, and the receiver checks the
    /// RTP packets it unprotects (`bytes` and the weighted sum count those).
    init(media: StreamMedia, datagramSize: Int, count: Int, frames frameCount: Int? = nil, trailer: Int = 0) throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: datagramSize - RTPHeader.fixedSize - trailer)
        let sizes = media.accessUnits.map { packetizer.plan($0).map { RTPHeader.fixedSize + $0.size } }
        self.datagramSize = datagramSize
        packetsPerUnit = sizes.map(\.count)
        var frames = 0
        var datagrams = 0
        var bytes = 0
        var weighted: UInt64 = 0
        // The send model's state.
        var sends = 0
        var gsoSends = 0
        var inSubmission = 0
        var slot: [Int] = []
        var slotBytes = 0
        func closeSlot() {
            var index = 0
            while index < slot.count {
                var run = 1
                var runBytes = slot[index]
                while index + run < slot.count, run < 64, slot[index + run] <= slot[index],
                      runBytes + slot[index + run] <= 65_507 {
                    runBytes += slot[index + run]
                    run += 1
                    if slot[index + run - 1] < slot[index] { break }
                }
                sends += 1
                if run > 1 { gsoSends += 1 }
                index += run
            }
            slot.removeAll(keepingCapacity: true)
            slotBytes = 0
        }
        while frameCount.map({ frames < $0 }) ?? (datagrams < count) {
            for size in sizes[frames % sizes.count] {
                datagrams += 1
                bytes += size
                weighted &+= UInt64(datagrams) &* UInt64(size)
                let wire = size + trailer
                if let first = slot.first {
                    let last = slot[slot.count - 1]
                    if wire > first || last < first || slot.count == 64 || slotBytes + wire > 65_536 { closeSlot() }
                }
                if slot.isEmpty && inSubmission >= 64 { inSubmission = 0 }
                slot.append(wire)
                slotBytes += wire
                inSubmission += 1
            }
            frames += 1
        }
        closeSlot()
        self.frames = frames
        self.datagrams = datagrams
        self.bytes = bytes
        positionWeightedBytes = weighted
        modelledSends = sends
        modelledGSOSends = gsoSends
    }

    /// The fields of the `round` control message that tell the receiver what to check.
    var controlFields: String {
        "kind=rtp bytes=\(bytes) wsum=\(positionWeightedBytes) frames=\(frames)"
    }
}

/// Where the `MediaSender` thread leaves its error.
private final class RunOutcome: Sendable {
    let failure = Mutex<String?>(nil)
    let finished = DispatchSemaphore(value: 0)
}

enum StreamSender {
    /// One `stream` round: an unpaced `MediaSender` runs on its own thread; this thread
    /// hands it the access units of `plan`, never more packets ahead of the receiver than
    /// the flow window allows (blocked in `poll`, costing no CPU, when it is full).
    /// With `live`, a video round instead: the sender paced at `live.pace`, the access
    /// units handed at `live.framesPerSecond` in real time, as a live encoder would.
    /// CPU is the whole process's (both threads), as for the other paths.
    static func run(plan: StreamPlan, media: StreamMedia, to destination: SocketAddress, window: FlowWindow,
                    live: (pace: Double, framesPerSecond: Int)? = nil, srtp: SRTPMasterKey? = nil) throws -> SenderMeasurement {
        var config = MediaSenderConfig(destination: destination)
        config.srtp = srtp
        config.mtu = .fixed(plan.datagramSize + (destination.family == .ipv6 ? 48 : 28))
        config.paceBitsPerSecond = live?.pace
        config.maxQueuedFrames = plan.frames + 1
        // The bench receiver sends no RTCP: no feedback, so no bound on unconfirmed bytes.
        config.feedback = false
        let sender = try MediaSender(config: config)
        let outcome = RunOutcome()
        let units = media.accessUnits
        var handedFrames = 0
        var result = try BenchSender.measured { result in
            let thread = Thread {
                do { try sender.run() } catch { outcome.failure.withLock { $0 = String(describing: error) } }
                outcome.finished.signal()
            }
            thread.start()
            var handed = 0
            let start = monotonicNanoseconds()
            feeding: for frame in 0..<plan.frames {
                if let live {
                    // The frame's time on a live schedule.
                    let due = start + Int64(frame) * 1_000_000_000 / Int64(live.framesPerSecond)
                    let wait = due - monotonicNanoseconds()
                    if wait > 0 { Thread.sleep(forTimeInterval: Double(wait) / 1e9) }
                }
                let packets = plan.packetsPerUnit[frame % units.count]
                while window.room(sent: handed) < min(packets, window.limit) {
                    try window.waitForProgress()
                    if window.stalled || outcome.failure.withLock({ $0 != nil }) { break feeding }
                }
                var unit = units[frame % units.count]
                unit.timestamp = UInt32(truncatingIfNeeded: frame &* (90_000 / media.framesPerSecond))
                sender.send(unit)
                handed += packets
                handedFrames += 1
            }
            if handedFrames < plan.frames { sender.stop() } else { sender.finish() }
            outcome.finished.wait()
        }
        let stats = sender.stats
        result.sent = stats.packetsSent
        result.bytes = stats.bytesSent
        result.failed = stats.packetsFailed
        // The ring's enters, plus the eventfd writes that woke it (counted by the engine: an access
        // unit handed over while it waited for a time, and `finish` or `stop`).
        result.syscalls = stats.enterCalls + sender.wakeSignals
        result.handOffs = sender.wakeSignals
        result.sends = stats.sendCalls
        result.gsoSends = stats.gsoSends
        result.submissions = stats.batches
        var notes: [String] = []
        if let failure = outcome.failure.withLock({ $0 }) { notes.append("MediaSender.run failed: \(failure)") }
        if !stats.errors.isEmpty { notes.append("send errors \(stats.errors)") }
        if stats.framesDroppedQueueFull > 0 { notes.append("\(stats.framesDroppedQueueFull) frames dropped (queue full)") }
        if stats.datagramSize > plan.datagramSize { notes.append("datagram of \(stats.datagramSize) bytes > \(plan.datagramSize)") }
        if live == nil && handedFrames == plan.frames && (stats.sendCalls, stats.gsoSends) != (plan.modelledSends, plan.modelledGSOSends) {
            notes.append("sends \(stats.sendCalls) (\(stats.gsoSends) GSO) differ from the model's \(plan.modelledSends) (\(plan.modelledGSOSends))")
        }
        if !notes.isEmpty { result.note = notes.joined(separator: "; ") }
        return result
    }
}

/// The SRTP keys of the bench's `stream-srtp` paths: fixed bytes, known to both processes
/// (a measurement of cost, not of secrecy).
enum BenchSRTP {
    static func key(_ suite: SRTPSuite) -> SRTPMasterKey {
        try! SRTPMasterKey(suite: suite, keyAndSalt: (0..<suite.masterLength).map { UInt8($0 &* 7 &+ 3) })  // lengths fit
    }
}
