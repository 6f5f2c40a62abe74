/// The sender's record of every packet it put on the wire and what became of it:
/// unconfirmed, confirmed by feedback, lost (reported missing, or unconfirmed for too
/// long), or abandoned (sent to a receiver the flow has since left). Bounded: a fixed ring
/// of entries indexed by extended sequence number. `sent` is always the sum of the other four.
///
/// Counts are exact: a packet declared lost that feedback later confirms moves from
/// `lost` to `confirmed`.
struct SentPacketLog: Sendable {
    private enum State: UInt8 { case empty = 0, unconfirmed, confirmed, lost, abandoned }

    private struct Entry {
        var sequence: Int64 = -1
        var sentAt: Int64 = 0
        var bytes: Int32 = 0
        var state: State = .empty
    }

    private var entries: [Entry]
    private let mask: Int64
    /// Extended sequence of the oldest packet that may still be unconfirmed.
    private var oldestOpen: Int64 = 0
    /// Extended sequence of the newest packet logged (-1 before the first).
    private(set) var newest: Int64 = -1
    private var first: Int64 = -1

    /// The highest extended sequence a cumulative report confirmed through (`confirmThrough`).
    private var reportedThrough: Int64 = -1
    /// Packets logged.
    private(set) var sent = 0
    /// Packets feedback confirmed.
    private(set) var confirmed = 0
    /// Packets declared lost (and not confirmed since).
    private(set) var lost = 0
    /// Packets written off by `abandonUnconfirmed`: no receiver will confirm them.
    private(set) var abandoned = 0
    /// Packets neither confirmed nor lost (nor abandoned).
    private(set) var unconfirmedPackets = 0
    /// Bytes of those.
    private(set) var unconfirmedBytes = 0
    /// Packets that fell out of the log while unconfirmed (counted lost too).
    private(set) var expired = 0
    /// Confirmations for sequence numbers never sent or long gone: rejected, counted.
    private(set) var rejectedConfirmations = 0
    /// Packets of at least this many bytes are full-size (sized to the MTU in use) and count in
    /// `fullConfirmed` (path-MTU black-hole detection; set by `PathMTUController`).
    var fullBytes = Int.max
    /// Full-size packets confirmed.
    private(set) var fullConfirmed = 0
    /// When the newest full-size packet confirmed was sent (`.min`: none yet).
    private(set) var newestFullConfirmedSentAt: Int64 = .min
    /// When the newest-sent packet confirmed was sent, any size (`.min`: none yet).
    private(set) var newestConfirmedSentAt: Int64 = .min
    /// Keep the size and send time of packets declared lost for `takeLostPackets` (path-MTU
    /// black-hole detection).
    var recordsLostPackets = false
    private var lostPackets: [LostPacket] = []

    /// A packet declared lost: its size and when it was sent (the time of the wake-up that
    /// wrote it: the packets of one send share it).
    struct LostPacket: Sendable, Equatable {
        /// Its size in bytes (RTP header and payload).
        var bytes: Int32
        /// Monotonic nanoseconds it was sent at.
        var sentAt: Int64
    }

    /// The packets declared lost since the last call, in the order they were declared (when
    /// `recordsLostPackets`; at most 4,096 between calls).
    mutating func takeLostPackets() -> [LostPacket] {
        defer { lostPackets.removeAll(keepingCapacity: true) }
        return lostPackets
    }

    /// Makes a log that remembers `capacity` (a power of two) packets.
    init(capacity: Int = 1 << 16) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0)
        entries = Array(repeating: Entry(), count: capacity)
        mask = Int64(capacity - 1)
    }

    /// Records a packet put on the wire with the next extended sequence number.
    mutating func recordSent(sequence: Int64, bytes: Int, at time: Int64) {
        if first < 0 { first = sequence; oldestOpen = sequence }
        let index = Int(sequence & mask)
        if entries[index].state == .unconfirmed {
            // Overwritten while still unconfirmed: it leaves as lost.
            release(index, as: .lost)
            expired += 1
        }
        entries[index] = Entry(sequence: sequence, sentAt: time, bytes: Int32(bytes), state: .unconfirmed)
        newest = sequence
        sent += 1
        unconfirmedPackets += 1
        unconfirmedBytes += bytes
    }

    /// Maps a 16-bit sequence number from feedback to the nearest logged extended one.
    func extend(_ sequence: UInt16) -> Int64? {
        guard newest >= 0 else { return nil }
        let delta = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: newest)))
        let extended = newest + delta
        return extended >= first && extended <= newest ? extended : nil
    }

    /// What `confirm` made of a confirmation.
    enum Confirmation: Sendable, Equatable {
        /// The packet was unconfirmed (or declared lost) and is now confirmed.
        case confirmed
        /// It was confirmed before.
        case repeated
        /// No such packet was sent (or it is no longer in the log): rejected and counted.
        case rejected
    }

    /// Feedback says `sequence` arrived.
    @discardableResult
    mutating func confirm(_ sequence: Int64) -> Confirmation {
        guard sequence >= first, sequence <= newest else { rejectedConfirmations += 1; return .rejected }
        let index = Int(sequence & mask)
        guard entries[index].sequence == sequence else { rejectedConfirmations += 1; return .rejected }
        switch entries[index].state {
        case .unconfirmed:
            unconfirmedPackets -= 1
            unconfirmedBytes -= Int(entries[index].bytes)
        case .lost:
            lost -= 1
        case .abandoned:
            abandoned -= 1
        case .confirmed, .empty:
            return .repeated
        }
        entries[index].state = .confirmed
        confirmed += 1
        newestConfirmedSentAt = max(newestConfirmedSentAt, entries[index].sentAt)
        if Int(entries[index].bytes) >= fullBytes {
            fullConfirmed += 1
            newestFullConfirmedSentAt = max(newestFullConfirmedSentAt, entries[index].sentAt)
        }
        return .confirmed
    }

    /// Confirms every packet up to `sequence` not confirmed yet, those declared lost for their
    /// age included: a receiver report's cumulative highest, from receivers that report nothing
    /// per packet (and count what they lost themselves: the caller keeps that count).
    mutating func confirmThrough(_ sequence: Int64) {
        guard sequence >= first else { return }
        var current = max(first, reportedThrough + 1, sequence - mask)
        while current <= min(sequence, newest) {
            let index = Int(current & mask)
            // Abandoned packets went to an earlier receiver: this one's highest says nothing of them.
            if entries[index].sequence == current && entries[index].state != .confirmed
                && entries[index].state != .abandoned { confirm(current) }
            current += 1
        }
        reportedThrough = max(reportedThrough, min(sequence, newest))
        advanceOldestOpen()
    }

    /// Declares lost every unconfirmed packet sent before `deadline`. Returns how many.
    @discardableResult
    mutating func expireUnconfirmed(sentBefore deadline: Int64) -> Int {
        releaseUnconfirmed(sentBefore: deadline, as: .lost)
    }

    /// Writes off every unconfirmed packet: no receiver will confirm them (the flow moved to
    /// another receiver and only the current one is heard, or the receiver sends no feedback
    /// at all). They leave the unconfirmed count (and so the bound) without counting as lost,
    /// since nothing says they were. Returns how many.
    @discardableResult
    mutating func abandonUnconfirmed() -> Int {
        releaseUnconfirmed(sentBefore: .max, as: .abandoned)
    }

    /// Moves every unconfirmed packet sent before `deadline` (oldest first) to `state`.
    private mutating func releaseUnconfirmed(sentBefore deadline: Int64, as state: State) -> Int {
        var count = 0
        var current = oldestOpen
        while current <= newest {
            let index = Int(current & mask)
            let entry = entries[index]
            if entry.sequence == current && entry.state == .unconfirmed {
                guard entry.sentAt < deadline else { break }
                release(index, as: state)
                count += 1
            }
            current += 1
        }
        advanceOldestOpen()
        return count
    }

    /// For a receiver that has never reported: every packet declared lost (by age alone, as
    /// no report said anything) and every unconfirmed one becomes abandoned. Returns how many.
    @discardableResult
    mutating func abandonUnreported() -> Int {
        var moved = lost
        if lost > 0 {  // once: nothing is declared lost while the receiver stays silent
            for index in entries.indices where entries[index].state == .lost { entries[index].state = .abandoned }
            abandoned += lost
            lost = 0
        }
        moved += abandonUnconfirmed()
        return moved
    }

    /// Send time of the oldest unconfirmed packet, if any.
    var oldestUnconfirmedSendTime: Int64? {
        var current = oldestOpen
        while current <= newest {
            let entry = entries[Int(current & mask)]
            if entry.sequence == current && entry.state == .unconfirmed { return entry.sentAt }
            current += 1
        }
        return nil
    }

    /// Takes an unconfirmed packet out of the unconfirmed count, as lost or abandoned.
    private mutating func release(_ index: Int, as state: State) {
        entries[index].state = state
        unconfirmedPackets -= 1
        unconfirmedBytes -= Int(entries[index].bytes)
        if state == .lost {
            lost += 1
            if recordsLostPackets && lostPackets.count < 4096 {
                lostPackets.append(LostPacket(bytes: entries[index].bytes, sentAt: entries[index].sentAt))
            }
        } else {
            abandoned += 1
        }
    }

    private mutating func advanceOldestOpen() {
        while oldestOpen <= newest {
            let entry = entries[Int(oldestOpen & mask)]
            if entry.sequence == oldestOpen && entry.state == .unconfirmed { break }
            oldestOpen += 1
        }
    }
}
