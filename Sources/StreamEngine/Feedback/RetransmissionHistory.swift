import MediaFormats

/// Why the sender did not answer a NACK's request; `rawValue` is the stats key under `nack.rejected`.
public enum NACKRejection: String, Sendable, CaseIterable {
    /// A sequence number the flow never sent (ahead of the newest, or before the first).
    case neverSent
    /// Sent longer ago than `rtx-time`, or pushed out of the bounded history.
    case tooOld
    /// Asked again sooner than the receiver could have seen the last retransmission.
    case repeated
    /// Asked for sooner after it was sent than the receiver could have missed it (a receiver
    /// that predicts arrivals, as GStreamer's jitter buffer does, asks for packets on their way).
    case tooEarly
    /// The retransmission rate limit was reached.
    case rateLimited
    /// A NACK about another SSRC, or from another address than the receiver's.
    case foreign
}

/// The sender's history of sent media packets and the answers to NACKs (RFC 4585 generic
/// NACK) from it: RFC 4588 retransmissions on an SSRC and payload type of their own (the
/// original sequence number first in the payload), or, with `sameSSRC`, the original packet
/// unchanged. Pure: times are passed in (nanoseconds).
///
/// Bounded: packets older than `rtxTime` and beyond `maxBytes` leave the history. No
/// amplification: a NACK gets at most one retransmission per sequence number it names that
/// is in the history, none for a packet retransmitted less than `minRepeatInterval` ago, and
/// all of them within a token bucket of `rateBytesPerSecond`.
struct RetransmissionHistory: Sendable {
    struct Entry: Sendable {
        var extendedSequence: Int64
        var sentAt: Int64
        /// Where the packet's bytes start in `store`, and how many there are.
        var offset: Int
        var length: Int
        var lastRetransmission: Int64?
        /// The 16-bit number on the wire.
        var sequence: UInt16 { UInt16(truncatingIfNeeded: extendedSequence) }
    }

    /// How long a sent packet can be retransmitted (nanoseconds).
    var rtxTime: Int64
    /// RTX payload type.
    var payloadType: UInt8
    /// RTX SSRC.
    let ssrc: UInt32
    /// Retransmit the original unchanged on the media SSRC instead of RFC 4588.
    var sameSSRC: Bool
    /// Most bytes kept.
    var maxBytes: Int
    /// A packet is retransmitted at most once per this long (nanoseconds).
    var minRepeatInterval: Int64 = 10_000_000
    /// A packet is retransmitted only once it was sent at least this long ago (nanoseconds;
    /// half the RTT: a request sent before the packet could have arrived is premature).
    var minAge: Int64 = 0
    /// Rate limit of retransmitted bytes (nil: none).
    var rateBytesPerSecond: Double?

    /// The packets, each in the slot of its 16-bit sequence number (`number & (count - 1)`):
    /// a power of two that doubles, up to 65,536 (a slot per number), when a packet's slot is
    /// held by another number still in the history. Not a dictionary: hashing every packet's
    /// number four times (recorded, expired) was ~800 instructions a packet of a sender with
    /// feedback (results/profile.md section 43). At most 65,536 slots, as many entries as the
    /// dictionary held at most.
    private var slots = [Entry?](repeating: nil, count: 256)
    /// Packets in the history.
    private(set) var count = 0
    /// The packets' bytes, one after another in sending order, in a ring: a packet that does
    /// not fit before the end starts again at 0, and the oldest live packet's start is the
    /// ring's tail. Not an array per packet: their allocation, release and reference
    /// counting cost ~330 instructions a packet more than this (results/profile.md section
    /// 45). Grows by doubling when a packet does not fit, up to `maxBytes` and two largest
    /// datagrams more; there the oldest packets leave to make room.
    private var store = [UInt8](repeating: 0, count: 1 << 16)
    /// Where the next packet's bytes go in `store`.
    private var head = 0
    /// The ring's size in bytes.
    var storeCapacity: Int { store.count }
    /// Extended sequence numbers in sending order from `orderHead` on.
    private var order: [Int64] = []
    private var orderHead = 0
    private var keptBytes = 0
    /// The newest extended sequence number recorded (-1: none) and the first ever.
    private var newest: Int64 = -1
    private var first: Int64 = -1
    private var tokens: Double = 0
    private var tokensAt: Int64 = 0
    private var nextSequence: UInt16

    // Counters.
    private(set) var nacksReceived = 0
    private(set) var requested = 0
    private(set) var retransmitted = 0
    private(set) var retransmittedBytes = 0
    /// Bytes of the original packets retransmitted (what the NACKs asked for).
    private(set) var requestedBytes = 0
    private(set) var rejected: [NACKRejection: Int] = [:]

    init(ssrc: UInt32, payloadType: UInt8 = 97, rtxTime: Int64 = 500_000_000, sameSSRC: Bool = false,
         maxBytes: Int = 16 << 20, rateBytesPerSecond: Double? = nil, firstSequence: UInt16 = .random(in: 0...UInt16.max)) {
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.rtxTime = rtxTime
        self.sameSSRC = sameSSRC
        self.maxBytes = maxBytes
        self.rateBytesPerSecond = rateBytesPerSecond
        nextSequence = firstSequence
    }

    /// A media packet went on the wire (`bytes`: the whole datagram, RTP header first).
    mutating func record(_ bytes: UnsafeRawBufferPointer, at now: Int64) {
        guard bytes.count >= RTPHeader.fixedSize else { return }
        let sequence = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
        let extended = newest < 0 ? Int64(sequence)
            : newest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: newest)))
        if first < 0 { first = extended }
        newest = max(newest, extended)
        var index = slot(of: sequence)
        while let old = slots[index] {
            if old.sequence == sequence {
                // The same number sent again within the history (a wrap): the newer packet's.
                slots[index] = nil
                count -= 1
                keptBytes -= old.length
                break
            }
            growSlots()
            index = slot(of: sequence)
        }
        let offset = place(bytes.count)
        store.withUnsafeMutableBytes { store in
            UnsafeMutableRawBufferPointer(rebasing: store[offset..<offset + bytes.count]).copyMemory(from: bytes)
        }
        head = offset + bytes.count
        slots[index] = Entry(extendedSequence: extended, sentAt: now, offset: offset, length: bytes.count)
        count += 1
        keptBytes += bytes.count
        order.append(extended)
        expire(now: now)
    }

    /// Drops what is older than `rtxTime` or beyond `maxBytes`.
    mutating func expire(now: Int64) {
        while let entry = oldest(), now - entry.sentAt > rtxTime || keptBytes > maxBytes { removeOldest(entry) }
        if orderHead > 4096 && orderHead * 2 > order.count {
            order.removeFirst(orderHead)
            orderHead = 0
        }
    }

    /// Answers a NACK: the datagrams to send (in the order asked), each counted. A packet for
    /// which `isWaiting` says a retransmission still waits to be sent is not sent again (`repeated`).
    mutating func answer(_ nack: RTCPGenericNACK, now: Int64, isWaiting: (UInt16) -> Bool = { _ in false }) -> [[UInt8]] {
        nacksReceived += 1
        expire(now: now)
        refill(now: now)
        var seen = Set<UInt16>()
        var datagrams: [[UInt8]] = []
        for sequence in nack.sequenceNumbers where seen.insert(sequence).inserted {
            requested += 1
            let index = slot(of: sequence)
            guard var entry = slots[index], entry.sequence == sequence else {
                rejected[classifyMissing(sequence), default: 0] += 1
                continue
            }
            if isWaiting(sequence) || entry.lastRetransmission.map({ now - $0 < minRepeatInterval }) == true {
                rejected[.repeated, default: 0] += 1
                continue
            }
            if now - entry.sentAt < minAge {
                rejected[.tooEarly, default: 0] += 1
                continue
            }
            let size = entry.length + (sameSSRC ? 0 : 2)
            if rateBytesPerSecond != nil {
                guard tokens >= Double(size) else {
                    rejected[.rateLimited, default: 0] += 1
                    continue
                }
                tokens -= Double(size)
            }
            entry.lastRetransmission = now
            slots[index] = entry
            let original = Array(store[entry.offset..<entry.offset + entry.length])
            let datagram = sameSSRC ? original : rtxPacket(of: original)
            retransmitted += 1
            retransmittedBytes += datagram.count
            requestedBytes += entry.length
            datagrams.append(datagram)
        }
        return datagrams
    }

    /// The oldest live packet's entry (stale numbers, sent again since within the history, are
    /// passed over and leave `order`).
    private mutating func oldest() -> Entry? {
        while orderHead < order.count {
            let extended = order[orderHead]
            if let entry = slots[slot(of: UInt16(truncatingIfNeeded: extended))], entry.extendedSequence == extended {
                return entry
            }
            orderHead += 1
        }
        return nil
    }

    /// Where in `store` a packet of `length` bytes goes: after the newest, or at 0 when it does
    /// not fit before the end, never over a live packet. Grows the ring, or makes the oldest
    /// packets leave, when there is no room.
    private mutating func place(_ length: Int) -> Int {
        while true {
            guard let eldest = oldest() else {
                if length > store.count { store = [UInt8](repeating: 0, count: length) }
                return 0
            }
            let tail = eldest.offset
            // Live bytes are [tail, head) or, wrapped, [tail, end) and [0, head) (head == tail: full).
            if head > tail {
                if store.count - head >= length { return head }
                if tail >= length { return 0 }
            } else if tail - head >= length {
                return head
            }
            if store.count < maxBytes + 2 * 65_536 {
                grow(toFit: length)
            } else {
                removeOldest(eldest)
            }
        }
    }

    /// A ring twice as large (or larger, for `length` more bytes), the live packets laid out
    /// from 0 in their order.
    private mutating func grow(toFit length: Int) {
        var capacity = store.count * 2
        while capacity < keptBytes + length { capacity *= 2 }
        var bigger = [UInt8](repeating: 0, count: max(min(capacity, maxBytes + 2 * 65_536), keptBytes + length))
        var offset = 0
        for position in orderHead..<order.count {
            let index = slot(of: UInt16(truncatingIfNeeded: order[position]))
            guard var entry = slots[index], entry.extendedSequence == order[position] else { continue }
            bigger.withUnsafeMutableBytes { bigger in
                store.withUnsafeBytes { store in
                    UnsafeMutableRawBufferPointer(rebasing: bigger[offset..<offset + entry.length])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: store[entry.offset..<entry.offset + entry.length]))
                }
            }
            entry.offset = offset
            slots[index] = entry
            offset += entry.length
        }
        store = bigger
        head = offset
    }

    /// The oldest packet (`oldest()`'s answer) leaves: expired, or the ring is as large as it may be.
    private mutating func removeOldest(_ entry: Entry) {
        slots[slot(of: entry.sequence)] = nil
        count -= 1
        keptBytes -= entry.length
        orderHead += 1
    }

    private func slot(of sequence: UInt16) -> Int { Int(sequence) & (slots.count - 1) }

    /// Twice the slots, every entry moved to its slot among them.
    private mutating func growSlots() {
        var bigger = [Entry?](repeating: nil, count: slots.count * 2)
        for case let entry? in slots {
            bigger[Int(entry.sequence) & (bigger.count - 1)] = entry
        }
        slots = bigger
    }

    /// Counts a NACK that was not for this flow (another SSRC, another address).
    mutating func rejectForeign() {
        rejected[.foreign, default: 0] += 1
    }

    /// Never sent, or too old: by where the number falls around the newest one sent.
    private func classifyMissing(_ sequence: UInt16) -> NACKRejection {
        guard newest >= 0 else { return .neverSent }
        let extended = newest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: newest)))
        return extended > newest || extended < first ? .neverSent : .tooOld
    }

    private mutating func refill(now: Int64) {
        guard let rate = rateBytesPerSecond else { return }
        let burst = max(64 * 1024, rate / 10)
        if tokensAt == 0 { tokens = burst }
        tokens = min(burst, tokens + rate * Double(max(0, now - tokensAt)) / 1e9)
        tokensAt = now
    }

    /// The RFC 4588 packet for `original`: its header with the RTX payload type, SSRC and
    /// next RTX sequence number (marker and timestamp kept), then the original sequence number
    /// and the original payload.
    private mutating func rtxPacket(of original: [UInt8]) -> [UInt8] {
        guard let parsed = try? RTPHeader.parse(original) else { return original }
        let header = RTPHeader(marker: parsed.header.marker, payloadType: payloadType, sequenceNumber: nextSequence,
                               timestamp: parsed.header.timestamp, ssrc: ssrc)
        nextSequence &+= 1
        var packet = header.bytes
        packet.reserveCapacity(packet.count + 2 + parsed.payloadRange.count)
        packet.append(UInt8(parsed.header.sequenceNumber >> 8))
        packet.append(UInt8(parsed.header.sequenceNumber & 0xff))
        packet.append(contentsOf: original[parsed.payloadRange])
        return packet
    }
}
