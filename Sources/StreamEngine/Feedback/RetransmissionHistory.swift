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
        var bytes: [UInt8]
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
    /// feedback (results/profile.md section 43). At most 65,536 slots (~3 MB), as many entries
    /// as the dictionary held at most.
    private var slots = [Entry?](repeating: nil, count: 256)
    /// Packets in the history.
    private(set) var count = 0
    /// Byte arrays of expired entries, refilled by `record` (a datagram of the same size is
    /// copied into one instead of a new allocation). At most `maxSpare`.
    private var spare: [[UInt8]] = []
    private static let maxSpare = 64
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
                keptBytes -= old.bytes.count
                break
            }
            growSlots()
            index = slot(of: sequence)
        }
        var copy = spare.popLast() ?? []
        if copy.count == bytes.count {
            copy.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        } else {
            copy = Array(bytes)
        }
        slots[index] = Entry(extendedSequence: extended, sentAt: now, bytes: copy)
        count += 1
        keptBytes += bytes.count
        order.append(extended)
        expire(now: now)
    }

    /// Drops what is older than `rtxTime` or beyond `maxBytes`.
    mutating func expire(now: Int64) {
        while orderHead < order.count {
            let extended = order[orderHead]
            // A number sent again since (a wrap within the history) is the newer entry's.
            let index = slot(of: UInt16(truncatingIfNeeded: extended))
            guard let entry = slots[index], entry.extendedSequence == extended else { orderHead += 1; continue }
            guard now - entry.sentAt > rtxTime || keptBytes > maxBytes else { break }
            slots[index] = nil
            count -= 1
            keptBytes -= entry.bytes.count
            if spare.count < Self.maxSpare { spare.append(entry.bytes) }
            orderHead += 1
        }
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
            let size = entry.bytes.count + (sameSSRC ? 0 : 2)
            if rateBytesPerSecond != nil {
                guard tokens >= Double(size) else {
                    rejected[.rateLimited, default: 0] += 1
                    continue
                }
                tokens -= Double(size)
            }
            entry.lastRetransmission = now
            slots[index] = entry
            let datagram = sameSSRC ? entry.bytes : rtxPacket(of: entry.bytes)
            retransmitted += 1
            retransmittedBytes += datagram.count
            requestedBytes += entry.bytes.count
            datagrams.append(datagram)
        }
        return datagrams
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
