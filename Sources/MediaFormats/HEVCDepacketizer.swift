/// An access unit rebuilt from RTP packets by `HEVCDepacketizer`.
public struct DepacketizedAccessUnit: Sendable, Equatable {
    /// The RTP timestamp shared by the access unit's packets.
    public var timestamp: UInt32
    /// The whole NAL units received, in order, each without start code. A NAL unit that lost
    /// a fragment, or came in a malformed packet, is left out rather than emitted corrupt.
    public var nalUnits: [[UInt8]]
    /// True when every packet from the previous access unit's last through this one's marker
    /// arrived and was well formed.
    public var isComplete: Bool
    /// True when an IRAP VCL NAL unit (IDR, CRA, BLA) is among `nalUnits`.
    public var isKeyframe: Bool
    /// Extended (wrap-free) sequence number of the first packet received for this access unit.
    public var firstSequence: Int64
    /// Extended sequence number of the last packet received for this access unit.
    public var lastSequence: Int64
    /// Packets received for this access unit, malformed ones included.
    public var packetCount: Int
    /// Sequence numbers given up as lost and attributed to this access unit.
    public var missingPackets: Int
    /// False when a frame it may depend on (since the last complete keyframe) was incomplete
    /// or missing: a decoder fed only this stream would show errors. Set by the receiver,
    /// which sees frame gaps; true by default.
    public var followsIntactChain = true

    /// Makes a depacketized access unit.
    public init(timestamp: UInt32, nalUnits: [[UInt8]], isComplete: Bool, isKeyframe: Bool,
                firstSequence: Int64, lastSequence: Int64, packetCount: Int, missingPackets: Int) {
        self.timestamp = timestamp
        self.nalUnits = nalUnits
        self.isComplete = isComplete
        self.isKeyframe = isKeyframe
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.packetCount = packetCount
        self.missingPackets = missingPackets
    }

    /// The NAL units as an `AccessUnit`.
    public var accessUnit: AccessUnit {
        AccessUnit(nalUnits: nalUnits, timestamp: timestamp, isKeyframe: isKeyframe)
    }

    /// The NAL units in Annex B form (four-byte start codes).
    public var annexB: [UInt8] { accessUnit.annexB }
}

/// Why `HEVCDepacketizer` dropped a packet's payload; `rawValue` is the stable statistics key.
public enum HEVCPayloadRejection: String, Sendable, CaseIterable {
    /// Payload shorter than its PayloadHdr (2 bytes; 3 for an FU).
    case truncatedPayloadHeader
    /// The PayloadHdr's forbidden bit (F) is set.
    case forbiddenBitSet
    /// An Aggregation Packet size field runs past the end of the payload.
    case aggregationSizeOverrun
    /// An Aggregation Packet unit of size 0 or 1 (no room for a NAL header).
    case aggregationUnitTooShort
    /// An Aggregation Packet unit with the forbidden bit set or of type 48...63.
    case aggregationInvalidUnit
    /// A Fragmentation Unit with both S and E set.
    case fragmentStartAndEnd
    /// A Fragmentation Unit whose FuType is 48...63.
    case fragmentInvalidType
    /// A Fragmentation Unit with no bytes after its FU header.
    case fragmentEmpty
    /// A middle or end fragment whose start was never seen, with no loss to explain it.
    case fragmentWithoutStart
    /// A fragment whose FuType differs from the start fragment's.
    case fragmentTypeMismatch
    /// A fragmented NAL unit cut off by a new NAL unit or the access unit's end, with no loss to explain it.
    case fragmentWithoutEnd
    /// A PACI packet (type 50), not supported.
    case paciUnsupported
    /// A payload of reserved type 51...63.
    case unsupportedNALType
}

/// Counters kept by `HEVCDepacketizer`.
public struct DepacketizerCounters: Sendable, Equatable {
    /// Packets pushed.
    public var packets = 0
    /// Access units returned.
    public var accessUnits = 0
    /// Access units returned with `isComplete == false`.
    public var incompleteAccessUnits = 0
    /// NAL units returned.
    public var nalUnits = 0
    /// Sequence numbers given up as lost.
    public var lostPackets = 0
    /// Packets arriving after their sequence number was consumed or given up, or after their
    /// access unit was closed (`closeAccessUnit`); dropped.
    public var late = 0
    /// Packets whose sequence number was already received; dropped.
    public var duplicate = 0
    /// NAL units dropped because a fragment was lost or malformed.
    public var droppedNALUnits = 0
    /// Access units abandoned for growing beyond `maxAccessUnitSize`; not returned.
    public var oversizedAccessUnits = 0
    /// Times the sequence state was reset: SSRC change, or a sender restart (as
    /// `RTPSequenceTracker` sees one).
    public var resynchronizations = 0
    /// Malformed payloads by reason.
    public var rejected: [HEVCPayloadRejection: Int] = [:]

    /// Makes zeroed counters.
    public init() {}

    /// The count for one rejection reason.
    public subscript(reason: HEVCPayloadRejection) -> Int { rejected[reason, default: 0] }

    /// All malformed payloads.
    public var rejectedTotal: Int { rejected.values.reduce(0, +) }
}

/// Rebuilds HEVC access units from RTP packets (RFC 7798, no DONL, no PACI).
///
/// Packets of an access unit share a timestamp; the marker bit ends it (a timestamp change
/// also does). Packets are ordered by the extended sequence number `RTPSequenceTracker`
/// gives them (the caller's tracker with `push(_:payload:tracked:)`, or the depacketizer's
/// own with `push(_:payload:)`): one logic decides wraps, duplicates and sender restarts.
/// Packets are consumed in sequence order; a packet after a gap waits in a reorder window of `reorderWindow` sequence
/// numbers. A gap is given up as lost when a packet arrives more than `reorderWindow` past
/// it, or when a later access unit is provably complete behind it (its packets run
/// contiguously from a marker packet to a marker packet): a complete frame is never held
/// back for an earlier frame's straggler. Access units come out in order.
///
/// At stream start nothing comes out until a later access unit is provably complete (or the
/// window overflows, or `flush()`), so packets reordered ahead of the first one are kept:
/// the first access unit is delayed by about one frame.
///
/// Memory is bounded: at most `reorderWindow` held packets, one access unit under
/// assembly (at most `maxAccessUnitSize` bytes, else abandoned), and a fixed history for
/// telling duplicates from late packets. Packets from a new SSRC (with `push(_:payload:)`)
/// and sender restarts reset the sequence state.
public struct HEVCDepacketizer: Sendable {
    /// The largest access unit assembled, in NAL unit bytes.
    public let maxAccessUnitSize: Int
    /// How many sequence numbers past a gap a packet may arrive before the gap is given up.
    public let reorderWindow: Int
    /// What has been seen so far.
    public private(set) var counters = DepacketizerCounters()

    /// What a validated payload holds; the bytes stay in the payload (`parseContent` checked
    /// every size, so `apply` reads them without checking again).
    private enum Content: Sendable {
        /// One NAL unit: the whole payload.
        case nal
        /// An Aggregation Packet: NAL units from offset 2, each after its two-byte size.
        case units
        /// A Fragmentation Unit: its data from offset 3.
        case fragment(start: Bool, end: Bool, type: UInt8, nalHeader: (UInt8, UInt8))
        case rejected
    }

    private struct Packet: Sendable {
        var sequence: Int64
        var timestamp: UInt32
        var marker: Bool
        var content: Content
        /// The payload, copied only when the packet waits behind a gap (or at stream start);
        /// nil for a packet consumed on arrival, read from the caller's bytes (an empty array
        /// there was released per packet).
        var payload: [UInt8]? = nil
    }

    private enum Discarding {
        case none
        /// Dropping the rest of a NAL unit already counted in `droppedNALUnits`.
        case countedNAL
        /// After a gap: a non-start fragment here belongs to a NAL unit whose start was lost.
        case afterGap
    }

    private struct Assembly {
        var timestamp: UInt32
        var nalUnits: [[UInt8]] = []
        var byteCount = 0
        /// The fragmented NAL unit being rebuilt (header included) and its FuType.
        var openFragment: [UInt8]? = nil
        var openFragmentType: UInt8 = 0
        /// Non-start fragments are dropped until an end fragment: their start was lost.
        var discarding = Discarding.none
        var firstSequence: Int64
        var lastSequence: Int64
        var packetCount = 0
        var missing = 0
        var damaged = false
        var abandoned = false
        var isKeyframe = false

        /// No access unit: what `assembly` holds between two.
        static var none: Assembly { Assembly(timestamp: 0, firstSequence: 0, lastSequence: 0) }
    }

    private var ssrc: UInt32? = nil
    /// The highest extended sequence number seen: the reference for extending the next one.
    private var highestSequence: Int64 = 0
    /// The next sequence number to consume; nil before the first packet.
    private var nextSequence: Int64? = nil
    /// Packets after a gap, at index `sequence % held.count`.
    private var held: [Packet?]
    private var heldCount = 0
    /// Missing sequence numbers given up and not yet attributed to an access unit.
    private var pendingGap = 0
    /// No packet consumed yet: the first packets may be the tail of an access unit we joined late.
    private var joining = true
    /// False at stream start, while earlier packets may still arrive reordered.
    private var started = false
    /// The timestamp of the access unit `closeAccessUnit` put out before its end came: its
    /// packets arriving later are late. Cleared by the first packet of another timestamp.
    private var closedTimestamp: UInt32?
    /// The access unit under assembly, when `assembling`; else an empty one (its arrays the
    /// shared empty storage). Not an optional: an `Assembly?` is assigned and destroyed through
    /// its type's value witnesses, an indirect call into cold code at every access unit
    /// (results/profile.md section 33).
    private var assembly = Assembly.none
    /// An access unit is under assembly: it has taken a packet (`Assembly.none` has none).
    private var assembling: Bool { assembly.packetCount > 0 }
    /// Per NAL unit type, the largest rebuilt from fragments lately (each one after it takes a
    /// sixty-fourth off): the capacity the next one of that type starts with, a quarter more.
    /// After the last size of any type, a quarter of the NAL units outgrew their arrays, copied
    /// as they grew (more bytes than the payload itself: results/profile.md section 15): slice
    /// sizes vary from frame to frame by more than an eighth, and an IDR slice is many times a
    /// P slice. With an eighth more and a sixteenth off, 120 of 2,400 frames of a 720p stream
    /// still grew (2.7 MB copied); with a quarter and a sixty-fourth, 27 (0.3 MB, the first of
    /// their type among them), for 16 % more capacity reserved (results/profile.md section 17).
    private var fragmentedNALPeak = [Int](repeating: 0, count: 64)
    /// Storage of finished access units the caller gave back (`recycle(_:)`): NAL unit arrays
    /// (emptied when reused; at most `maxSpareNALUnits`, none above `maxSpareCapacity`
    /// bytes) and the lists that held them. A frame's arrays were allocated and freed per
    /// frame (malloc, free and the arrays' deinit ~9 % of `streamer recv`'s user-space samples,
    /// results/profile.md section 23). A NAL unit the caller still holds is not written
    /// over: its array is shared, so emptying it makes a new one (copy on write).
    private var spareNALUnits: [[UInt8]] = []
    private var spareLists: [[[UInt8]]] = []
    static let maxSpareNALUnits = 8
    static let maxSpareCapacity = 1 << 20
    /// The sequence logic behind `push(_:payload:)`, for callers that track no sequence of their own.
    private var tracker = RTPSequenceTracker()

    /// Makes a depacketizer.
    /// - Precondition: `maxAccessUnitSize > 0` and `reorderWindow >= 0`.
    public init(maxAccessUnitSize: Int = 8 << 20, reorderWindow: Int = 32) {
        precondition(maxAccessUnitSize > 0, "maxAccessUnitSize must be positive, got \(maxAccessUnitSize)")
        precondition(reorderWindow >= 0, "reorderWindow must not be negative, got \(reorderWindow)")
        self.maxAccessUnitSize = maxAccessUnitSize
        self.reorderWindow = reorderWindow
        held = Array(repeating: nil, count: reorderWindow + 1)
    }

    /// Packets waiting behind a gap (at most `reorderWindow`).
    public var heldPacketCount: Int { heldCount }

    /// Takes one RTP packet; returns the access units it completed or forced out, in order.
    /// Its sequence number is extended by the depacketizer's own `RTPSequenceTracker`
    /// (a new one per SSRC): a sender restart resynchronizes, a packet too far from the
    /// stream (`.sequenceJump`, `.late`) counts as late.
    public mutating func push(_ header: RTPHeader, payload: UnsafeRawBufferPointer) -> [DepacketizedAccessUnit] {
        var output: [DepacketizedAccessUnit] = []
        if let current = ssrc, current != header.ssrc {
            counters.resynchronizations += 1
            giveUpEverything(into: &output)
            resetSequenceState()
            tracker = RTPSequenceTracker()
        }
        ssrc = header.ssrc
        let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: 0)
        push(header, payload: payload, tracked: tracked, into: &output)
        return output
    }

    /// Takes one RTP packet as the caller's `RTPSequenceTracker` tracked it (`track`, for the
    /// stream's SSRC); returns the access units it completed or forced out, in order.
    /// `.restarted` (or `.first` once the stream has begun) resynchronizes; `.duplicate` counts
    /// as a duplicate, `.late` and `.sequenceJump` as late. The SSRC is the caller's business.
    public mutating func push(_ header: RTPHeader, payload: UnsafeRawBufferPointer,
                              tracked: RTPSequenceTracker.Tracked) -> [DepacketizedAccessUnit] {
        var output: [DepacketizedAccessUnit] = []
        push(header, payload: payload, tracked: tracked, into: &output)
        return output
    }

    /// Like `push(_:payload:tracked:)`, appending the access units to `output`: a caller that
    /// reuses one array releases none per packet (most packets complete nothing).
    public mutating func push(_ header: RTPHeader, payload: UnsafeRawBufferPointer, tracked: RTPSequenceTracker.Tracked,
                              into output: inout [DepacketizedAccessUnit]) {
        counters.packets += 1
        let sequence = tracked.extendedSequence
        switch tracked.outcome {
        case .duplicate:
            counters.duplicate += 1
            return
        case .late, .sequenceJump:
            counters.late += 1
            return
        case .restarted, .first:
            if nextSequence != nil {
                counters.resynchronizations += 1
                giveUpEverything(into: &output)
                resetSequenceState()
            }
        case .inOrder, .reordered:
            break
        }
        guard let next = nextSequence else {
            startStream(at: sequence, header, payload, into: &output)
            return
        }
        if sequence < next && !started && highestSequence - sequence <= Int64(reorderWindow)
            && held[slot(sequence, held.count)]?.sequence != sequence {
            // Stream start: an earlier packet arrived late; the stream begins at it instead.
            nextSequence = sequence
        } else if sequence < next {
            counters.late += 1  // its sequence number was consumed or given up
            return
        }
        // (Nothing held, nothing to compare: reading a slot copies the optional packet out.)
        if heldCount > 0, held[slot(sequence, held.count)]?.sequence == sequence {
            counters.duplicate += 1
            return
        }
        var packet = Packet(sequence: sequence, timestamp: header.timestamp, marker: header.marker,
                            content: parseContent(payload))
        if started && heldCount == 0 && sequence == next {
            // The next packet with nothing waiting: consumed from the caller's bytes, no copy
            // (what `accept` would do: nothing is given up, nothing else drains).
            highestSequence = max(highestSequence, sequence)
            consume(packet, payload: payload, into: &output)
            nextSequence = next + 1
            return
        }
        packet.payload = Self.keptPayload(packet.content, payload)
        accept(packet, into: &output)
    }

    /// Takes the next packet in sequence, as `push(_:payload:tracked:into:)` would take it
    /// `.inOrder` at `sequence`, if it is a fragment (FU) that continues the stream with nothing
    /// held or missing: the start of a NAL unit beginning a new access unit or following a whole
    /// NAL unit in the one under assembly, a middle or an end fragment of the NAL unit under
    /// assembly (same timestamp and FuType), within the size limit. One check of the stream's
    /// state instead of a packet's whole way through (the packets of a frame of fragmented slices
    /// are all such fragments); the access unit its marker ends goes to `output`, as `push`
    /// would give it (a NAL unit left open by the marker is dropped there). Returns false for
    /// any other packet, everything left as it was: push it.
    public mutating func pushFragment(_ header: RTPHeader, payload: UnsafeRawBufferPointer, sequence: Int64,
                                      into output: inout [DepacketizedAccessUnit]) -> Bool {
        guard payload.count > 3, started, heldCount == 0, nextSequence == sequence, pendingGap == 0,
              closedTimestamp == nil else { return false }
        let byte0 = payload[0]
        let fuHeader = payload[2]
        let type = fuHeader & 0x3f
        guard byte0 & 0x80 == 0, byte0 >> 1 & 0x3f == HEVCNALUnitType.fragmentationUnit.rawValue, type < 48 else { return false }
        let data = UnsafeRawBufferPointer(rebasing: payload[3...])
        switch fuHeader & 0xC0 {
        case 0x80:
            // A start: of a new access unit after the last one's marker (as `consume` begins
            // one with no gap before it), or of the next NAL unit of this one.
            if assembling {
                guard assembly.timestamp == header.timestamp, !assembly.abandoned, assembly.openFragment == nil,
                      assembly.byteCount + data.count + 2 <= maxAccessUnitSize else { return false }
            } else {
                guard data.count + 2 <= maxAccessUnitSize else { return false }
                beginAssembly(timestamp: header.timestamp, sequence: sequence)
            }
            assembly.discarding = .none
            assembly.byteCount += data.count + 2
            Self.openFragment(data, type: type, nalHeader: ((byte0 & 0x81) | type << 1, payload[1]), in: &assembly,
                              peaks: &fragmentedNALPeak, spares: &spareNALUnits)
        case 0x00, 0x40:
            // A middle or end fragment of the NAL unit under assembly.
            let end = fuHeader & 0x40 != 0
            guard assembling, assembly.timestamp == header.timestamp, !assembly.abandoned,
                  assembly.openFragment != nil, type == assembly.openFragmentType,
                  assembly.byteCount + data.count <= maxAccessUnitSize else { return false }
            assembly.byteCount += data.count
            assembly.openFragment!.append(contentsOf: Self.bytes(data))
            if end { Self.closeFragment(in: &assembly, peaks: &fragmentedNALPeak) }
        default:
            return false
        }
        counters.packets += 1
        highestSequence = max(highestSequence, sequence)
        joining = false
        assembly.lastSequence = sequence
        assembly.packetCount += 1
        nextSequence = sequence + 1
        if header.marker { emit(takeAssembly(), into: &output) }
        return true
    }

    /// `raw` as bytes: an array appends an `UnsafeBufferPointer<UInt8>` with one copy of the
    /// whole, a raw buffer through the generic sequence code.
    @inline(__always)
    static func bytes(_ raw: UnsafeRawBufferPointer) -> UnsafeBufferPointer<UInt8> {
        raw.assumingMemoryBound(to: UInt8.self)
    }

    /// Takes back the NAL units of an access unit this depacketizer returned, once the caller is
    /// done with them: their arrays are reused for the NAL units to come (no allocation per
    /// NAL unit or per access unit while the caller gives them back). Arrays the caller still
    /// shares elsewhere stay intact (reusing one copies it first). `nalUnits` is left empty.
    public mutating func recycle(_ nalUnits: inout [[UInt8]]) {
        while let nal = nalUnits.popLast() {
            if spareNALUnits.count < Self.maxSpareNALUnits && nal.capacity <= Self.maxSpareCapacity {
                spareNALUnits.append(nal)
            }
        }
        if spareLists.count < 2 {
            spareLists.append(nalUnits)
            nalUnits = []
        }
    }

    /// Ends the access unit under assembly without its marker: every gap is given up and what
    /// is assembled comes out (incomplete), now. For a receiver that knows the rest of it is
    /// overdue (`ReceiveSession`: the sender's reports counted packets that never came, and
    /// their deadline passed). Unlike `flush()` the stream goes on: packets numbered after the
    /// highest are taken as usual, except those of the access unit closed, which are late (it
    /// is out already; taken, they would make a second access unit of the same timestamp).
    public mutating func closeAccessUnit(into output: inout [DepacketizedAccessUnit]) {
        giveUpEverything(into: &output, closing: true)
    }

    /// Takes one RTP packet whose payload is an array; see `push(_:payload:)`.
    public mutating func push(_ header: RTPHeader, payload: [UInt8]) -> [DepacketizedAccessUnit] {
        payload.withUnsafeBytes { push(header, payload: $0) }
    }

    /// Ends the stream: gives up every gap and returns what is left, in order. An access unit
    /// without its marker comes out incomplete. The sequence state is reset for a new stream
    /// (the next packet starts it, whatever its tracked outcome).
    public mutating func flush() -> [DepacketizedAccessUnit] {
        var output: [DepacketizedAccessUnit] = []
        giveUpEverything(into: &output)
        resetSequenceState()
        ssrc = nil
        tracker = RTPSequenceTracker()
        return output
    }

    // MARK: Sequence handling

    private func slot(_ sequence: Int64, _ count: Int) -> Int {
        let remainder = Int(sequence % Int64(count))
        return remainder < 0 ? remainder + count : remainder
    }

    private mutating func startStream(at sequence: Int64, _ header: RTPHeader, _ payload: UnsafeRawBufferPointer,
                                      into output: inout [DepacketizedAccessUnit]) {
        nextSequence = sequence
        highestSequence = sequence
        let content = parseContent(payload)
        accept(Packet(sequence: sequence, timestamp: header.timestamp, marker: header.marker, content: content,
                      payload: Self.keptPayload(content, payload)), into: &output)
    }

    /// The bytes a held packet keeps: its payload, none for a rejected one.
    private static func keptPayload(_ content: Content, _ payload: UnsafeRawBufferPointer) -> [UInt8] {
        if case .rejected = content { return [] }
        return Array(payload)
    }

    /// Consumes a held packet from the bytes it kept.
    private mutating func consumeHeld(_ packet: Packet, into output: inout [DepacketizedAccessUnit]) {
        (packet.payload ?? []).withUnsafeBytes { consume(packet, payload: $0, into: &output) }
    }

    private mutating func resetSequenceState() {
        nextSequence = nil
        pendingGap = 0
        closedTimestamp = nil
        joining = true
        started = false
    }

    private mutating func accept(_ packet: Packet, into output: inout [DepacketizedAccessUnit]) {
        guard let next = nextSequence else { return }
        highestSequence = max(highestSequence, packet.sequence)
        // Give up gaps more than reorderWindow behind this packet.
        let windowStart = packet.sequence - Int64(reorderWindow)
        if windowStart > next { advance(to: windowStart, into: &output) }
        held[slot(packet.sequence, held.count)] = packet
        heldCount += 1
        drainContiguous(into: &output)
        if heldCount > 0, let end = laterCompleteAccessUnitEnd() {
            advance(to: end + 1, into: &output)
            drainContiguous(into: &output)
        }
    }

    /// Consumes held packets from `nextSequence` while there is no gap.
    private mutating func drainContiguous(into output: inout [DepacketizedAccessUnit]) {
        // At stream start nothing is consumed until a later access unit is provably complete
        // (or the window overflows): packets reordered ahead of the first one must not be lost.
        guard started else { return }
        while let next = nextSequence, heldCount > 0 {
            let index = slot(next, held.count)
            guard let packet = held[index], packet.sequence == next else { return }
            held[index] = nil
            heldCount -= 1
            consumeHeld(packet, into: &output)
            nextSequence = next + 1
        }
    }

    /// Consumes or gives up every sequence number before `target`.
    private mutating func advance(to target: Int64, into output: inout [DepacketizedAccessUnit]) {
        started = true
        while let next = nextSequence, next < target {
            if heldCount == 0 {
                recordGap(Int(target - next))
                nextSequence = target
                return
            }
            let index = slot(next, held.count)
            if let packet = held[index], packet.sequence == next {
                held[index] = nil
                heldCount -= 1
                consumeHeld(packet, into: &output)
            } else {
                recordGap(1)
            }
            nextSequence = next + 1
        }
    }

    private mutating func recordGap(_ count: Int) {
        counters.lostPackets += count
        pendingGap += count
    }

    /// The marker sequence number of an access unit that is complete behind the current gap:
    /// held packets running without a gap from just after a held marker packet to a marker.
    private func laterCompleteAccessUnitEnd() -> Int64? {
        guard let next = nextSequence, highestSequence > next else { return nil }
        var runFollowsMarker = false
        var sequence = next + 1
        while sequence <= highestSequence {
            if let packet = held[slot(sequence, held.count)], packet.sequence == sequence {
                if runFollowsMarker && packet.marker { return sequence }
                if packet.marker { runFollowsMarker = true }
            } else {
                runFollowsMarker = false
            }
            sequence += 1
        }
        return nil
    }

    /// Consumes what is held, giving up its gaps, and puts out the access unit under assembly
    /// (incomplete); with `closing`, its later packets are late (`closeAccessUnit`).
    private mutating func giveUpEverything(into output: inout [DepacketizedAccessUnit], closing: Bool = false) {
        if nextSequence != nil, heldCount > 0 {
            advance(to: highestSequence + 1, into: &output)
        }
        if assembling {
            if closing { closedTimestamp = assembly.timestamp }
            // No marker: the end of this access unit was never seen.
            assembly.damaged = true
            emit(takeAssembly(), into: &output)
        }
        pendingGap = 0
    }

    // MARK: Assembly

    private mutating func consume(_ packet: Packet, payload: UnsafeRawBufferPointer,
                                  into output: inout [DepacketizedAccessUnit]) {
        let gap = pendingGap
        pendingGap = 0
        if let closed = closedTimestamp {
            // A packet of the access unit closed before its end came (and any gap before it,
            // which was that access unit's too): out already, so late.
            guard packet.timestamp != closed else {
                counters.late += 1
                return
            }
            closedTimestamp = nil
        }
        var startDamaged = false
        var startMissing = 0
        var continuing = false
        // The access unit under assembly is changed where it is stored, never copied or
        // moved: copying it (`if var current = assembly` when it was an optional) retained and
        // released its arrays every packet, and moving it out and back copied its bytes
        // (results/profile.md section 17).
        if assembling {
            if packet.timestamp != assembly.timestamp {
                // A new access unit without a marker on the last one.
                if gap > 0 {
                    // The old access unit lost at least its marker packet. One lost packet is
                    // exactly that; more are ambiguous: they may also have begun the new one.
                    assembly.missing += gap
                    assembly.damaged = true
                    startDamaged = gap > 1
                }
                emit(takeAssembly(), into: &output)
            } else {
                continuing = true
                if gap > 0 {
                    assembly.missing += gap
                    assembly.damaged = true
                    assembly.discarding = assembly.openFragment == nil ? .afterGap : .countedNAL
                    Self.breakFragment(&assembly, byLoss: true, counters: &counters)
                }
            }
        } else if gap > 0 {
            startMissing = gap
            startDamaged = true
        }
        if !continuing {
            beginAssembly(timestamp: packet.timestamp, sequence: packet.sequence, missing: startMissing,
                          damaged: startDamaged)
            if startDamaged || joining { assembly.discarding = .afterGap }
        }
        joining = false
        assembly.lastSequence = packet.sequence
        assembly.packetCount += 1
        if !assembly.abandoned {
            Self.apply(packet.content, payload: payload, to: &assembly, counters: &counters, peaks: &fragmentedNALPeak,
                       spares: &spareNALUnits, limit: maxAccessUnitSize)
        }
        if packet.marker { emit(takeAssembly(), into: &output) }
    }

    /// Begins a new access unit under assembly at `sequence`, in a list of NAL units given back
    /// (`recycle`) when there is one.
    private mutating func beginAssembly(timestamp: UInt32, sequence: Int64, missing: Int = 0, damaged: Bool = false) {
        assembly = Assembly(timestamp: timestamp, nalUnits: spareLists.popLast() ?? [], firstSequence: sequence,
                            lastSequence: sequence, missing: missing, damaged: damaged)
    }

    /// The access unit under assembly, leaving an empty one in its place.
    private mutating func takeAssembly() -> Assembly {
        var taken = Assembly.none
        swap(&taken, &assembly)
        return taken
    }

    /// Adds a packet's content to the access unit, copying its NAL unit bytes from `payload`
    /// (the one copy between the receive buffer and the frame).
    private static func apply(_ content: Content, payload: UnsafeRawBufferPointer, to current: inout Assembly,
                              counters: inout DepacketizerCounters, peaks fragmentedNALPeak: inout [Int],
                              spares: inout [[UInt8]], limit: Int) {
        switch content {
        case .rejected:
            current.damaged = true
            current.discarding = current.openFragment == nil ? .afterGap : .countedNAL
            breakFragment(&current, byLoss: true, counters: &counters)
        case .nal:
            breakFragment(&current, byLoss: false, counters: &counters)
            current.discarding = .none
            append(payload, to: &current, counters: &counters, limit: limit)
        case .units:
            breakFragment(&current, byLoss: false, counters: &counters)
            current.discarding = .none
            var offset = 2
            while offset < payload.count && !current.abandoned {
                let size = Int(payload[offset]) << 8 | Int(payload[offset + 1])
                offset += 2
                append(UnsafeRawBufferPointer(rebasing: payload[offset..<(offset + size)]), to: &current,
                       counters: &counters, limit: limit)
                offset += size
            }
        case .fragment(let start, let end, let type, let nalHeader):
            let data = UnsafeRawBufferPointer(rebasing: payload[3...])
            if start {
                breakFragment(&current, byLoss: false, counters: &counters)
                current.discarding = .none
                guard reserve(data.count + 2, in: &current, counters: &counters, limit: limit) else { return }
                openFragment(data, type: type, nalHeader: nalHeader, in: &current, peaks: &fragmentedNALPeak, spares: &spares)
                return
            }
            if current.openFragment != nil {
                guard current.openFragmentType == type else {
                    reject(.fragmentTypeMismatch, counters: &counters)
                    current.damaged = true
                    breakFragment(&current, byLoss: true, counters: &counters)
                    current.discarding = end ? .none : .countedNAL
                    return
                }
                guard reserve(data.count, in: &current, counters: &counters, limit: limit) else { return }
                current.openFragment!.append(contentsOf: bytes(data))
                if end { closeFragment(in: &current, peaks: &fragmentedNALPeak) }
            } else if current.discarding != .none {
                // The start of this NAL unit was lost (or came before we joined the stream).
                if current.discarding == .afterGap { counters.droppedNALUnits += 1 }
                current.damaged = true
                current.discarding = end ? .none : .countedNAL
            } else {
                reject(.fragmentWithoutStart, counters: &counters)
                counters.droppedNALUnits += 1
                current.damaged = true
                current.discarding = end ? .none : .countedNAL
            }
        }
    }

    /// Opens the fragmented NAL unit a start fragment begins (its bytes already accounted):
    /// its two-byte header, then `data`.
    private static func openFragment(_ data: UnsafeRawBufferPointer, type: UInt8, nalHeader: (UInt8, UInt8),
                                     in current: inout Assembly, peaks fragmentedNALPeak: inout [Int],
                                     spares: inout [[UInt8]]) {
        // Room for a NAL unit like the largest of its type lately (a quarter more):
        // growing by doubling copied each frame's slice several times over (8 % of
        // `streamer recv`'s CPU at 240 fps: results/profile.md). At most one allocation per NAL
        // unit, none when a recycled array has the room.
        let peak = fragmentedNALPeak[Int(type & 63)]
        var nal = spares.popLast() ?? []
        nal.removeAll(keepingCapacity: true)
        nal.reserveCapacity(max(data.count + 2, peak + peak / 4))
        nal.append(nalHeader.0)
        nal.append(nalHeader.1)
        nal.append(contentsOf: bytes(data))
        current.openFragment = nal
        current.openFragmentType = type
    }

    /// Ends the open fragmented NAL unit (an end fragment's data appended): into the access unit.
    private static func closeFragment(in current: inout Assembly, peaks fragmentedNALPeak: inout [Int]) {
        let nal = current.openFragment.take()!
        let type = Int(current.openFragmentType & 63)
        let peak = fragmentedNALPeak[type]
        fragmentedNALPeak[type] = max(nal.count, peak - peak / 64)
        current.nalUnits.append(nal)
        noteNAL(firstByte: nal[0], in: &current)
    }

    /// Drops an unfinished fragmented NAL unit. Without a loss to explain it, it is malformed.
    private static func breakFragment(_ current: inout Assembly, byLoss: Bool, counters: inout DepacketizerCounters) {
        guard let open = current.openFragment else { return }
        current.byteCount -= open.count
        current.openFragment = nil
        current.damaged = true
        counters.droppedNALUnits += 1
        if !byLoss { reject(.fragmentWithoutEnd, counters: &counters) }
    }

    /// Accounts `count` more bytes; abandons the access unit when it would grow too large.
    private static func reserve(_ count: Int, in current: inout Assembly, counters: inout DepacketizerCounters,
                                limit maxAccessUnitSize: Int) -> Bool {
        guard current.byteCount + count <= maxAccessUnitSize else {
            counters.oversizedAccessUnits += 1
            current.abandoned = true
            current.nalUnits = []
            current.openFragment = nil
            current.byteCount = 0
            return false
        }
        current.byteCount += count
        return true
    }

    private static func append(_ nal: UnsafeRawBufferPointer, to current: inout Assembly, counters: inout DepacketizerCounters,
                               limit: Int) {
        guard reserve(nal.count, in: &current, counters: &counters, limit: limit) else { return }
        current.nalUnits.append(Array(bytes(nal)))
        noteNAL(firstByte: nal[0], in: &current)
    }

    private static func noteNAL(firstByte: UInt8, in current: inout Assembly) {
        if HEVCNALUnitType(rawValue: firstByte >> 1).isIRAP { current.isKeyframe = true }
    }

    private mutating func emit(_ finished: consuming Assembly, into output: inout [DepacketizedAccessUnit]) {
        var current = finished
        guard !current.abandoned else { return }
        if current.openFragment != nil {
            Self.breakFragment(&current, byLoss: current.missing > 0 || current.damaged, counters: &counters)
        }
        let unit = DepacketizedAccessUnit(
            timestamp: current.timestamp, nalUnits: current.nalUnits, isComplete: !current.damaged,
            isKeyframe: current.isKeyframe, firstSequence: current.firstSequence,
            lastSequence: current.lastSequence, packetCount: current.packetCount,
            missingPackets: current.missing)
        counters.accessUnits += 1
        counters.nalUnits += unit.nalUnits.count
        if !unit.isComplete { counters.incompleteAccessUnits += 1 }
        output.append(unit)
    }

    // MARK: Payload parsing

    private mutating func reject(_ reason: HEVCPayloadRejection) {
        Self.reject(reason, counters: &counters)
    }

    private static func reject(_ reason: HEVCPayloadRejection, counters: inout DepacketizerCounters) {
        counters.rejected[reason, default: 0] += 1
    }

    /// Validates a payload's structure (every size checked); copies nothing.
    private mutating func parseContent(_ payload: UnsafeRawBufferPointer) -> Content {
        guard payload.count >= 2 else {
            reject(.truncatedPayloadHeader)
            return .rejected
        }
        let byte0 = payload[0]
        guard byte0 & 0x80 == 0 else {
            reject(.forbiddenBitSet)
            return .rejected
        }
        let type = (byte0 >> 1) & 0x3f
        switch type {
        case 0...47:
            return .nal
        case HEVCNALUnitType.aggregationPacket.rawValue:
            var unitCount = 0
            var offset = 2
            while offset < payload.count {
                guard offset + 2 <= payload.count else {
                    reject(.aggregationSizeOverrun)
                    return .rejected
                }
                let size = Int(payload[offset]) << 8 | Int(payload[offset + 1])
                offset += 2
                guard size >= 2 else {
                    reject(.aggregationUnitTooShort)
                    return .rejected
                }
                guard offset + size <= payload.count else {
                    reject(.aggregationSizeOverrun)
                    return .rejected
                }
                let unitByte0 = payload[offset]
                guard unitByte0 & 0x80 == 0, (unitByte0 >> 1) & 0x3f < 48 else {
                    reject(.aggregationInvalidUnit)
                    return .rejected
                }
                unitCount += 1
                offset += size
            }
            guard unitCount > 0 else {
                reject(.aggregationUnitTooShort)
                return .rejected
            }
            return .units
        case HEVCNALUnitType.fragmentationUnit.rawValue:
            guard payload.count >= 3 else {
                reject(.truncatedPayloadHeader)
                return .rejected
            }
            let fuHeader = payload[2]
            let start = fuHeader & 0x80 != 0
            let end = fuHeader & 0x40 != 0
            let fuType = fuHeader & 0x3f
            guard !(start && end) else {
                reject(.fragmentStartAndEnd)
                return .rejected
            }
            guard fuType < 48 else {
                reject(.fragmentInvalidType)
                return .rejected
            }
            guard payload.count > 3 else {
                reject(.fragmentEmpty)
                return .rejected
            }
            let nalHeader = ((byte0 & 0x81) | fuType << 1, payload[1])
            return .fragment(start: start, end: end, type: fuType, nalHeader: nalHeader)
        case HEVCNALUnitType.paci.rawValue:
            reject(.paciUnsupported)
            return .rejected
        default:
            reject(.unsupportedNALType)
            return .rejected
        }
    }
}
