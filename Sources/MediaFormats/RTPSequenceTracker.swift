/// Receiver-side accounting of one SSRC's RTP packets: extended sequence numbers
/// (RFC 3550 appendix A.1), loss, duplicates, reordering and interarrival jitter
/// (appendix A.8), and the report block that summarizes them.
///
/// Exact meanings:
/// - The first packet recorded starts the accounting; packets before it are not lost.
///   A packet that arrives later with a lower sequence number (within the window)
///   extends the start downwards.
/// - `received` counts distinct sequence numbers accepted; `lost` is always derived,
///   `expected - received`, so a packet first counted lost that later arrives leaves `lost`.
/// - Duplicates are recognized within a bitmap of the `windowSize` highest sequence
///   numbers. A packet older than that window cannot be checked: it is counted `late`
///   (and `sequenceJump`) and never in `received`, so nothing is double counted.
/// - A packet more than `maxJumpAhead` ahead of the highest, or older than the window, is
///   a `sequenceJump` and is not accepted. If the very next packet carries the next
///   sequence number after it, the source is taken to have restarted: `restarts` grows,
///   the counts so far are kept, and accounting continues from the jumped-to packet,
///   which is then counted in `received` too (it stays counted in `sequenceJump`).
///   Packets skipped by the jump are not counted lost, as in RFC 3550 A.1.
///
/// Memory is fixed (a 512-byte bitmap) whatever the input.
public struct RTPSequenceTracker: Sendable, Hashable {
    /// Sequence numbers behind the highest for which duplicates are detected.
    public static let windowSize = 4096
    /// Largest forward step accepted as the same stream; RFC 3550 A.1 uses MAX_DROPOUT 3000.
    public static let maxJumpAhead = 3000

    /// What `record` made of a packet.
    public enum Outcome: Sendable, Hashable {
        /// The first packet: accounting starts here.
        case first
        /// Above the highest sequence number so far (possibly after a gap).
        case inOrder
        /// Below the highest, filling a gap.
        case reordered
        /// Already seen.
        case duplicate
        /// Older than the duplicate window, from this stream's range: not counted as received.
        case late
        /// Too far ahead or behind to belong to the stream: not counted (yet).
        case sequenceJump
        /// Followed a jump with the next sequence number: accounting restarted at the jump.
        case restarted
    }

    private static let windowWords = windowSize / 64

    private var started = false
    /// Lowest and highest extended sequence number of the current segment (since start or restart).
    private var base: Int64 = 0
    private var highest: Int64 = 0
    /// Bit (ext % windowSize) is set when extended sequence ext, within the window, was received.
    private var seen = [UInt64](repeating: 0, count: RTPSequenceTracker.windowWords)
    /// Packets expected in segments before the last restart.
    private var expectedBeforeRestart: Int64 = 0
    private var restartCandidate: UInt16?
    private var expectedAtLastReport: Int64 = 0
    private var receivedAtLastReport: Int64 = 0
    private var lastTransit: Int32?
    /// Jitter scaled by 16, as in RFC 3550 A.8's integer form.
    private var scaledJitter: Int64 = 0

    /// Every packet handed to `record`, whatever its outcome.
    public private(set) var packetsRecorded = 0
    /// Distinct sequence numbers accepted (duplicates, late and jumped packets excluded).
    public private(set) var received = 0
    /// Packets whose sequence number was already received (within the window).
    public private(set) var duplicate = 0
    /// Packets that arrived below the highest sequence number, filling a gap.
    public private(set) var reordered = 0
    /// Packets older than the duplicate window (not counted as received).
    public private(set) var late = 0
    /// Packets too far ahead (> `maxJumpAhead`) or behind (>= `windowSize`) to be accepted.
    public private(set) var sequenceJump = 0
    /// Times the source was taken to have restarted its sequence numbers.
    public private(set) var restarts = 0

    /// Makes a tracker that has seen nothing.
    public init() {}

    /// Packets expected: highest - first + 1 over the current segment, plus those of earlier segments.
    public var expected: Int64 { expectedBeforeRestart + (started ? highest - base + 1 : 0) }

    /// Packets lost: `expected - received`. Never negative, since duplicates are not received twice.
    public var lost: Int64 { expected - Int64(received) }

    /// Highest extended sequence number of the current segment (wrap count in the upper bits), nil before the first packet.
    public var extendedHighestSequence: UInt64? { started ? UInt64(max(highest, 0)) : nil }

    /// Interarrival jitter in RTP timestamp units (RFC 3550 A.8).
    public var jitter: UInt32 { UInt32(clamping: scaledJitter >> 4) }

    /// A packet as `track` saw it: what it made of it, and where it stands in the stream.
    public struct Tracked: Sendable, Hashable {
        /// What the tracker made of the packet.
        public var outcome: Outcome
        /// The packet's extended (wrap-free) sequence number in the tracker's numbering: it
        /// starts at the first packet's 16-bit value and starts again at the jumped-to
        /// packet's on `.restarted`. Meaningless for `.sequenceJump`.
        public var extendedSequence: Int64

        /// Makes a tracked packet.
        public init(outcome: Outcome, extendedSequence: Int64) {
            self.outcome = outcome
            self.extendedSequence = extendedSequence
        }
    }

    /// Accounts for one packet.
    /// - Parameters:
    ///   - sequence: the packet's RTP sequence number.
    ///   - rtpTimestamp: the packet's RTP timestamp.
    ///   - arrival: when it arrived, on a clock in the same units as the RTP timestamp
    ///     (for video, 90 kHz), from any origin.
    @discardableResult
    public mutating func record(sequence: UInt16, rtpTimestamp: UInt32, arrival: UInt32) -> Outcome {
        track(sequence: sequence, rtpTimestamp: rtpTimestamp, arrival: arrival).outcome
    }

    /// Accounts for one packet, as `record` does, and also returns its extended sequence
    /// number: what `HEVCDepacketizer.push(_:payload:tracked:)` orders packets by, so the
    /// stream has one sequence logic.
    public mutating func track(sequence: UInt16, rtpTimestamp: UInt32, arrival: UInt32) -> Tracked {
        packetsRecorded += 1
        guard started else {
            startSegment(at: sequence)
            lastTransit = Int32(bitPattern: arrival &- rtpTimestamp)
            return Tracked(outcome: .first, extendedSequence: highest)
        }
        let delta = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
        let extended = highest + delta
        if delta > 0 && delta <= Int64(Self.maxJumpAhead) {
            restartCandidate = nil
            advance(to: extended)
            accept(extended, rtpTimestamp: rtpTimestamp, arrival: arrival)
            return Tracked(outcome: .inOrder, extendedSequence: extended)
        }
        if delta <= 0 && delta > -Int64(Self.windowSize) {
            restartCandidate = nil
            if isSeen(extended) {
                duplicate += 1
                return Tracked(outcome: .duplicate, extendedSequence: extended)
            }
            accept(extended, rtpTimestamp: rtpTimestamp, arrival: arrival)
            base = min(base, extended)
            reordered += 1
            return Tracked(outcome: .reordered, extendedSequence: extended)
        }
        if let candidate = restartCandidate, sequence == candidate &+ 1 {
            restartCandidate = nil
            restarts += 1
            expectedBeforeRestart += highest - base + 1
            startSegment(at: candidate)
            lastTransit = nil
            advance(to: highest + 1)
            accept(highest, rtpTimestamp: rtpTimestamp, arrival: arrival)
            return Tracked(outcome: .restarted, extendedSequence: highest)
        }
        restartCandidate = sequence
        sequenceJump += 1
        if delta < 0 && extended >= base {
            late += 1
            return Tracked(outcome: .late, extendedSequence: extended)
        }
        return Tracked(outcome: .sequenceJump, extendedSequence: extended)
    }

    /// Accounts for a packet exactly as `track` does if it carries the sequence number just
    /// after the highest (`.inOrder`, the usual packet), and returns its extended sequence
    /// number; any other packet is left alone (nil: nothing changed, `track` it). A receiver
    /// taking a run of consecutive packets skips `track`'s other cases.
    @inline(__always)
    public mutating func trackNext(sequence: UInt16, rtpTimestamp: UInt32, arrival: UInt32) -> Int64? {
        guard started, sequence == UInt16(truncatingIfNeeded: highest &+ 1) else { return nil }
        packetsRecorded += 1
        restartCandidate = nil
        highest += 1
        accept(highest, rtpTimestamp: rtpTimestamp, arrival: arrival)
        return highest
    }

    /// Sequence numbers missing between the start and the highest, within the window,
    /// newest `limit` of them, in ascending order: what a NACK would ask for.
    public func missingSequences(limit: Int) -> [UInt16] {
        guard started, limit > 0 else { return [] }
        let oldest = max(base, highest - Int64(Self.windowSize) + 1)
        var missing = [UInt16]()
        var candidate = highest
        while candidate >= oldest && missing.count < limit {
            if !isSeen(candidate) { missing.append(UInt16(truncatingIfNeeded: candidate)) }
            candidate -= 1
        }
        return missing.reversed()
    }

    /// Makes the report block for this source and starts a new reporting interval
    /// (RFC 3550 A.3). Nil before the first packet.
    /// - Parameters:
    ///   - ssrc: the source reported on.
    ///   - lastSR: compact NTP timestamp of the last SR received from it (0 if none).
    ///   - delaySinceLastSR: time since that SR arrived, in 1/65536 s (ignored when `lastSR` is 0).
    public mutating func makeReportBlock(ssrc: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32) -> RTCPReportBlock? {
        guard started else { return nil }
        let expectedNow = expected
        let receivedNow = Int64(received)
        let expectedInterval = expectedNow - expectedAtLastReport
        let lostInterval = expectedInterval - (receivedNow - receivedAtLastReport)
        expectedAtLastReport = expectedNow
        receivedAtLastReport = receivedNow
        let fraction: UInt8 =
            expectedInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expectedInterval))
        let cumulative = Int32(
            clamping: min(max(lost, Int64(RTCPReportBlock.minCumulativeLost)), Int64(RTCPReportBlock.maxCumulativeLost)))
        return RTCPReportBlock(
            ssrc: ssrc, fractionLost: fraction, cumulativeLost: cumulative,
            extendedHighestSequence: UInt32(truncatingIfNeeded: highest), jitter: jitter, lastSR: lastSR,
            delaySinceLastSR: lastSR == 0 ? 0 : delaySinceLastSR)
    }

    private mutating func startSegment(at sequence: UInt16) {
        started = true
        base = Int64(sequence)
        highest = Int64(sequence)
        for index in seen.indices { seen[index] = 0 }
        setSeen(highest)
        received += 1
    }

    /// Moves the highest up to `newHighest`, which both callers accept next (`accept` sets its
    /// slot), clearing the window slots of the sequence numbers skipped: the slot of an
    /// in-order packet is not cleared and set again, one array write less per packet.
    private mutating func advance(to newHighest: Int64) {
        var slot = highest + 1
        while slot < newHighest {
            let bit = Int(slot & Int64(Self.windowSize - 1))
            seen[bit >> 6] &= ~(1 << UInt64(bit & 63))
            slot += 1
        }
        highest = newHighest
    }

    @inline(__always)
    private mutating func accept(_ extended: Int64, rtpTimestamp: UInt32, arrival: UInt32) {
        setSeen(extended)
        received += 1
        let transit = Int32(bitPattern: arrival &- rtpTimestamp)
        if let previous = lastTransit {
            let difference = Int64(Int32(bitPattern: UInt32(bitPattern: transit) &- UInt32(bitPattern: previous)))
            scaledJitter += abs(difference) - ((scaledJitter + 8) >> 4)
        }
        lastTransit = transit
    }

    private func isSeen(_ extended: Int64) -> Bool {
        let bit = Int(extended & Int64(Self.windowSize - 1))
        return seen[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    @inline(__always)
    private mutating func setSeen(_ extended: Int64) {
        let bit = Int(extended & Int64(Self.windowSize - 1))
        seen[bit >> 6] |= 1 << UInt64(bit & 63)
    }
}
