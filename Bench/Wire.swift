import Foundation
import MediaFormats

/// The bench datagram: a 16-byte header, a filler, and the sequence number again in
/// the last 4 bytes, so the receiver can tell which round and datagram it holds, and
/// that its length and both ends are intact, without reading every byte.
///
///     0  magic "BNCH"   4  round id   8  sequence   12  length   ...   length-4  sequence
enum BenchDatagram {
    /// The smallest datagram the header and trailer fit.
    static let minimumSize = 20
    static let magic: UInt32 = 0x4843_4E42  // "BNCH" little-endian

    /// Writes the header and trailer of datagram `sequence` (the filler is left as it is).
    @inline(__always)
    static func stamp(_ buffer: UnsafeMutableRawBufferPointer, round: UInt32, sequence: UInt32) {
        let base = buffer.baseAddress!
        base.storeBytes(of: magic.littleEndian, as: UInt32.self)
        (base + 4).storeBytes(of: round.littleEndian, as: UInt32.self)
        (base + 8).storeBytes(of: sequence.littleEndian, as: UInt32.self)
        (base + 12).storeBytes(of: UInt32(buffer.count).littleEndian, as: UInt32.self)
        (base + buffer.count - 4).storeBytes(of: sequence.littleEndian, as: UInt32.self)
    }

    /// What a received datagram says about itself.
    enum Verdict {
        case valid(round: UInt32, sequence: UInt32)
        case corrupt
    }

    /// Checks magic, stated length against the real length, and both copies of the sequence.
    @inline(__always)
    static func check(_ payload: UnsafeRawBufferPointer) -> Verdict {
        guard payload.count >= minimumSize, let base = payload.baseAddress else { return .corrupt }
        let magicRead = UInt32(littleEndian: base.loadUnaligned(as: UInt32.self))
        let round = UInt32(littleEndian: (base + 4).loadUnaligned(as: UInt32.self))
        let sequence = UInt32(littleEndian: (base + 8).loadUnaligned(as: UInt32.self))
        let length = UInt32(littleEndian: (base + 12).loadUnaligned(as: UInt32.self))
        let trailer = UInt32(littleEndian: (base + payload.count - 4).loadUnaligned(as: UInt32.self))
        guard magicRead == magic, length == UInt32(payload.count), trailer == sequence else { return .corrupt }
        return .valid(round: round, sequence: sequence)
    }
}

/// What the receiver tallies in one round: every datagram checked against the round id,
/// its sequence number (each exactly once) and its length.
struct RoundTally {
    let round: UInt32
    let expected: Int
    let size: Int
    private(set) var seen: [UInt64]
    /// Distinct datagrams of this round, intact.
    private(set) var delivered = 0
    /// Payload bytes of those.
    private(set) var bytes = 0
    /// Datagrams whose header, length or trailer were wrong.
    private(set) var corrupt = 0
    /// Datagrams of this round seen twice.
    private(set) var duplicates = 0
    /// Datagrams of another round (late leftovers).
    private(set) var stale = 0
    /// Receive-side datagrams counted (all of the above).
    private(set) var received = 0

    init(round: UInt32, expected: Int, size: Int) {
        self.round = round
        self.expected = expected
        self.size = size
        seen = Array(repeating: 0, count: (expected + 63) / 64)
    }

    @inline(__always)
    mutating func record(_ payload: UnsafeRawBufferPointer) {
        received += 1
        switch BenchDatagram.check(payload) {
        case .corrupt:
            corrupt += 1
        case .valid(let datagramRound, let sequence):
            guard datagramRound == round else { stale += 1; return }
            let index = Int(sequence)
            guard index < expected, payload.count == size else { corrupt += 1; return }
            let bit: UInt64 = 1 << UInt64(index & 63)
            if seen[index >> 6] & bit != 0 { duplicates += 1; return }
            seen[index >> 6] |= bit
            delivered += 1
            bytes += payload.count
        }
    }

    var isComplete: Bool { delivered >= expected }
}

/// What the receiver tallies in a `stream` round: RTP packets (RFC 3550) of one SSRC,
/// each sequence number exactly once, each packet a well-formed RTP/HEVC packet no longer
/// than the datagram budget; and, once the round ends, aggregate checks against what the
/// sender planned: the payload bytes, the bytes weighted by position in the stream (so a
/// packet of the wrong length at any position shows), and the marker bits (one per frame).
struct RTPTally {
    let expected: Int
    let maxSize: Int
    let payloadType: UInt8
    /// The stream's SSRC: the first one seen in the round.
    private(set) var ssrc: UInt32?
    private var seen: [UInt64]
    private var base: Int64 = 0
    private var highest: Int64 = 0
    private var lowest: Int64 = .max
    /// Distinct packets of the stream, well-formed.
    private(set) var delivered = 0
    /// Their bytes (UDP payload, RTP header included).
    private(set) var bytes = 0
    /// Sum of (extended sequence number x length), wrapping.
    private var weighted: UInt64 = 0
    /// Packets with the marker bit (last packet of an access unit).
    private(set) var markers = 0
    /// Malformed packets: not RTP version 2, another payload type, too short or too long,
    /// an HEVC payload header of a reserved type, or a sequence number out of range.
    private(set) var corrupt = 0
    /// Sequence numbers seen twice.
    private(set) var duplicates = 0
    /// Packets of another SSRC.
    private(set) var stale = 0
    /// Datagrams counted (all of the above).
    private(set) var received = 0
    /// Room for reordering before the first packet seen.
    private static let margin: Int64 = 4096

    init(expected: Int, maxSize: Int, payloadType: UInt8 = RTPHeader.defaultHEVCPayloadType) {
        self.expected = expected
        self.maxSize = maxSize
        self.payloadType = payloadType
        seen = Array(repeating: 0, count: (expected + 2 * Int(Self.margin) + 63) / 64)
    }

    @inline(__always)
    /// An SRTP datagram that did not authenticate: received, and corrupt.
    mutating func recordUnauthenticated() {
        received += 1
        corrupt += 1
    }

    mutating func record(_ payload: UnsafeRawBufferPointer) {
        received += 1
        guard payload.count > 13, payload.count <= maxSize, let p = payload.baseAddress else { corrupt += 1; return }
        let first = p.load(as: UInt8.self)
        let second = (p + 1).load(as: UInt8.self)
        let nalType = HEVCNALUnitType(rawValue: (p + 12).load(as: UInt8.self) >> 1)
        // RTP version 2 without padding, extension or CSRCs; a NAL unit, AP or FU of H.265.
        guard first >> 6 == 2, first & 0x3f == 0, second & 0x7f == payloadType,
              nalType.rawValue <= HEVCNALUnitType.suffixSEI.rawValue || nalType == .aggregationPacket
                  || nalType == .fragmentationUnit
        else { corrupt += 1; return }
        let sequence = UInt16(bigEndian: (p + 2).loadUnaligned(as: UInt16.self))
        let packetSSRC = UInt32(bigEndian: (p + 8).loadUnaligned(as: UInt32.self))
        if ssrc == nil {
            ssrc = packetSSRC
            highest = (1 << 32) + Int64(sequence)
            base = highest - Self.margin
        }
        guard packetSSRC == ssrc else { stale += 1; return }
        // Extend the 16-bit sequence number to the candidate nearest the highest so far.
        var extended = (highest & ~0xffff) | Int64(sequence)
        if extended - highest > 0x8000 { extended -= 0x10000 } else if highest - extended > 0x8000 { extended += 0x10000 }
        let index = Int(extended - base)
        guard index >= 0, index < seen.count * 64 else { corrupt += 1; return }
        let bit: UInt64 = 1 << UInt64(index & 63)
        if seen[index >> 6] & bit != 0 { duplicates += 1; return }
        seen[index >> 6] |= bit
        highest = max(highest, extended)
        lowest = min(lowest, extended)
        delivered += 1
        bytes += payload.count
        weighted &+= UInt64(extended) &* UInt64(payload.count)
        if second & 0x80 != 0 { markers += 1 }
    }

    var isComplete: Bool { delivered >= expected }

    /// Sum over the packets of (position in the stream, from 1) x length, wrapping: the
    /// sender computes the same from its plan.
    var positionWeightedBytes: UInt64 {
        guard lowest != .max else { return 0 }
        return weighted &- UInt64(lowest - 1) &* UInt64(bytes)
    }
}

/// The rate and burstiness of a paced round, from the receiver's kernel timestamps
/// (`SO_TIMESTAMPNS`): achieved = bytes x 8 / (t_last - t_first); the largest burst is
/// max over i <= j of bytes(i...j) - R/8 x (t_j - t_i), R the pacing rate, computed in one
/// pass as max_j (B_j - R/8 t_j) - min_{i<=j} (B_{i-1} - R/8 t_i).
struct PaceTally {
    let bytesPerNanosecond: Double
    private(set) var datagrams = 0
    private(set) var bytes = 0
    private(set) var first: Int64 = 0
    private(set) var last: Int64 = 0
    private var lowestStart = Double.infinity
    /// The largest burst above the token-bucket line, in bytes.
    private(set) var largestBurst = 0.0
    /// Datagrams that arrived without a timestamp.
    private(set) var missingTimestamps = 0

    init(rateBitsPerSecond: Double) { bytesPerNanosecond = rateBitsPerSecond / 8e9 }

    @inline(__always)
    mutating func record(length: Int, timestamp: Int64) {
        guard timestamp > 0 else { missingTimestamps += 1; return }
        if datagrams == 0 { first = timestamp }
        last = timestamp
        let line = bytesPerNanosecond * Double(timestamp - first)
        lowestStart = min(lowestStart, Double(bytes) - line)
        bytes += length
        datagrams += 1
        largestBurst = max(largestBurst, Double(bytes) - line - lowestStart)
    }

    /// Bits per second over the round (0 with fewer than two timestamps).
    var achievedBitsPerSecond: Double { last > first ? Double(bytes) * 8e9 / Double(last - first) : 0 }
}

/// The access units of a paced RTP round, by RTP timestamp: when the first and the last
/// packet of each arrived (kernel timestamps) and its bytes. A frame's spread (first to
/// last arrival) is set against what the pace needs for it: its bytes less one quantum
/// (the bucket may be full when a frame comes after an idle gap) at the rate. Late wake-ups
/// of the sender show as spreads longer than that.
struct FrameTimes {
    private var frames: [UInt32: (first: Int64, last: Int64, bytes: Int, packets: Int)] = [:]

    @inline(__always)
    mutating func record(_ payload: UnsafeRawBufferPointer, timestamp: Int64) {
        guard payload.count >= 12, timestamp > 0, frames.count < 1 << 16 else { return }
        let rtpTime = UInt32(bigEndian: payload.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        var frame = frames[rtpTime] ?? (timestamp, timestamp, 0, 0)
        frame.first = min(frame.first, timestamp)
        frame.last = max(frame.last, timestamp)
        frame.bytes += payload.count
        frame.packets += 1
        frames[rtpTime] = frame
    }

    /// Over the frames of two packets or more: the median spread, the median of what the
    /// pace needs, and the 95th percentile of the excess (spread less need), nanoseconds.
    func summary(rateBitsPerSecond: Double, quantum: Int) -> (frames: Int, spread: Int64, need: Int64, excessP95: Int64) {
        let timed = frames.values.filter { $0.packets >= 2 }
        guard !timed.isEmpty, rateBitsPerSecond > 0 else { return (0, 0, 0, 0) }
        let spreads = timed.map { $0.last - $0.first }
        let needs = timed.map { Int64(Double(max(0, $0.bytes - quantum)) * 8e9 / rateBitsPerSecond) }
        func percentile(_ values: [Int64], _ p: Double) -> Int64 {
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        let excess = zip(spreads, needs).map { $0 - $1 }
        return (timed.count, percentile(spreads, 0.5), percentile(needs, 0.5), percentile(excess, 0.95))
    }
}

/// CPU time of the kernel's `ksoftirqd/N` threads (from `/proc/PID/schedstat`, nanoseconds).
/// On loopback the receive half of a send runs in softirq context: in the sender's system
/// call when it can, in `ksoftirqd` when the kernel defers it. Work deferred there is in
/// neither process's `getrusage`, so the bench reports it beside the sender's CPU.
enum SoftirqThreads {
    static let pids: [Int32] = {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { name -> Int32? in
            guard let pid = Int32(name),
                  let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8),
                  comm.hasPrefix("ksoftirqd/") else { return nil }
            return pid
        }
    }()

    /// Machine-wide time in hard and soft interrupt context now (`/proc/stat`, the `irq` and
    /// `softirq` columns of the `cpu` line), nanoseconds: with IRQ time accounting the kernel
    /// charges softirq work (loopback delivery included) to no task at all, only here.
    static func machineInterruptNanoseconds() -> Int64 {
        // (The `cpu` line is the first: within the one page `String(contentsOfFile:)` reads of a
        // /proc file, whatever the machine's size.)
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return 0 }
        let fields = line.split(separator: " ").dropFirst().compactMap { Int64($0) }
        guard fields.count >= 7 else { return 0 }
        return (fields[5] + fields[6]) * (1_000_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// Their total on-CPU time now, nanoseconds (0 when unreadable).
    static func nanoseconds() -> Int64 {
        pids.reduce(0) { total, pid in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/schedstat", encoding: .utf8),
                  let first = text.split(separator: " ").first, let value = Int64(first) else { return total }
            return total + value
        }
    }
}
