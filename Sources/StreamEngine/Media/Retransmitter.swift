import MediaFormats
import UringIO

/// A flow's retransmissions in the send path: a `DatagramProducer` in front of the flow's
/// own (media and path-MTU probes), whose retransmissions go first, through the same pacer
/// and within the congestion controller's window, where RFC 4588 retransmissions count in
/// flight until the receiver's per-packet feedback confirms them or they are written off
/// (`MediaFlow.retransmissionBytesInFlight`).
/// It keeps every media packet written in a `RetransmissionHistory` and answers NACKs from it.
///
/// Retransmissions use a route of their own (same socket and marking): a send slot holds one
/// route, so send reports of retransmissions (tag with `tagBit`) never count as media.
final class Retransmitter: DatagramProducer {
    /// Set in the tag of a retransmission's send slot.
    static let tagBit: UInt64 = 1 << 62
    /// Most retransmissions waiting for the pacer; past that the oldest are dropped (counted).
    static let maxQueued = 4096

    private let inner: DatagramProducer
    private let flow: MediaFlow
    let route: Int
    private let clock: () -> Int64
    // Unchecked, as the flow's per-datagram state (results/profile.md sections 16, 18, 41):
    // touched on the engine thread only, and no access to them stays open across a call out
    // (`handle` copies `waiting` before the history's answer calls back into it). Checked, the
    // send path paid ~20 dynamic exclusivity checks a frame here (~4,500 instructions a frame
    // of a 30 fps sender with feedback, section 43).
    @exclusivity(unchecked) private(set) var history: RetransmissionHistory
    @exclusivity(unchecked) private var queue: [(original: UInt16, datagram: [UInt8])] = []
    /// The original sequence numbers of the retransmissions waiting in `queue`.
    private var waiting = Set<UInt16>()
    @exclusivity(unchecked) private var queueHead = 0
    @exclusivity(unchecked) private var queuedBytes = 0
    @exclusivity(unchecked) private var peekedRetransmission = false
    /// Retransmissions the kernel accepted, and their bytes; failed ones.
    private(set) var sent = 0
    private(set) var sentBytes = 0
    private(set) var failed = 0
    /// Retransmissions dropped because too many waited.
    private(set) var overflowed = 0
    /// RFC 4588 retransmissions on the wire by RTX sequence number: their original, when they
    /// left, whether feedback confirmed them, their bytes while in flight (the latest `maxTracked`,
    /// oldest first in `sentOrder`).
    private var sentRetransmissions: [UInt16: (original: UInt16, sentAt: Int64, confirmed: Bool, bytes: Int)] = [:]
    /// The RTX sequence number of each original's latest retransmission among them.
    private var latestRetransmission: [UInt16: UInt16] = [:]
    private var sentOrder: [UInt16] = []
    private var sentOrderHead = 0
    /// How far `writeOffOvertaken` has looked in `sentOrder` (every one before was overtaken).
    private var overtakenHead = 0
    /// When the newest-sent retransmission the receiver confirmed was sent (`.min`: none yet).
    private var newestConfirmedSentAt = Int64.min
    static let maxTracked = 8192
    /// Originals whose retransmission the receiver confirmed (recovered at the sender's count).
    private var recoveredOriginals = Set<UInt16>()
    /// Retransmissions the receiver confirmed; lost (unconfirmed for the loss timeout); and
    /// originals recovered (a retransmission of theirs confirmed).
    private(set) var confirmed = 0
    private(set) var lost = 0
    private(set) var recovered = 0

    init(inner: DatagramProducer, flow: MediaFlow, route: Int, history: RetransmissionHistory,
         clock: @escaping () -> Int64 = monotonicNanoseconds) {
        self.inner = inner
        self.flow = flow
        self.route = route
        self.history = history
        self.clock = clock
    }

    /// From the flow's RTT (milliseconds): a packet is retransmitted at most once per half of
    /// it, and only once it was sent at least half of it ago (at most 20 ms either way). No
    /// floor: on a LAN whose round trip is 0.1 ms, a NACK 0.3 ms after the send is the
    /// receiver's answer to the next packet's arrival, not a guess.
    func noteRTT(milliseconds rtt: Double) {
        let half = min(Int64(rtt * 1e6) / 2, 20_000_000)
        history.minRepeatInterval = half
        history.minAge = half
    }

    /// Answers a NACK about the flow's SSRC: its retransmissions wait for the pacer.
    func handle(_ nack: RTCPGenericNACK) {
        let waiting = waiting
        for datagram in history.answer(nack, now: clock(), isWaiting: waiting.contains) {
            if queue.count - queueHead >= Self.maxQueued {
                take()
                overflowed += 1
            }
            // The original sequence number: the RTX payload's first two bytes, or the header's.
            let original = history.sameSSRC ? UInt16(datagram[2]) << 8 | UInt16(datagram[3])
                : UInt16(datagram[RTPHeader.fixedSize]) << 8 | UInt16(datagram[RTPHeader.fixedSize + 1])
            writeOffEarlierRetransmission(of: original)
            queue.append((original, datagram))
            self.waiting.insert(original)
            queuedBytes += datagram.count
        }
    }

    /// The receiver asked again for `original` and the history answers (the ask is not premature):
    /// the retransmission sent before did not arrive, so it leaves the flight now rather than
    /// at the loss timeout (at least 200 ms, and in a small window it held back everything
    /// else, the new retransmission too). Counted lost when it expires, as before.
    private func writeOffEarlierRetransmission(of original: UInt16) {
        guard let sequence = latestRetransmission[original], let entry = sentRetransmissions[sequence],
              !entry.confirmed, entry.bytes > 0 else { return }
        sentRetransmissions[sequence]?.bytes = 0
        flow.retransmissionBytesInFlight -= entry.bytes
    }

    /// Takes the oldest waiting retransmission out of the queue.
    @discardableResult
    private func take() -> [UInt8] {
        let (original, datagram) = queue[queueHead]
        queuedBytes -= datagram.count
        waiting.remove(original)
        queueHead += 1
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
        }
        return datagram
    }

    /// Remembers an RFC 4588 retransmission put on the wire, for the receiver's feedback.
    private func track(_ datagram: [UInt8]) {
        let sequence = UInt16(datagram[2]) << 8 | UInt16(datagram[3])
        let original = UInt16(datagram[RTPHeader.fixedSize]) << 8 | UInt16(datagram[RTPHeader.fixedSize + 1])
        if sentOrder.count - sentOrderHead >= Self.maxTracked { forgetOldest() }
        sentRetransmissions[sequence] = (original, clock(), false, datagram.count)
        latestRetransmission[original] = sequence
        sentOrder.append(sequence)
        flow.retransmissionBytesInFlight += datagram.count
    }

    private func forgetOldest() {
        let sequence = sentOrder[sentOrderHead]
        sentOrderHead += 1
        if let entry = sentRetransmissions.removeValue(forKey: sequence) {
            if latestRetransmission[entry.original] == sequence { latestRetransmission[entry.original] = nil }
            if !entry.confirmed {
                lost += 1
                flow.retransmissionBytesInFlight -= entry.bytes
            }
        }
        if sentOrderHead > 4096 && sentOrderHead * 2 > sentOrder.count {
            sentOrder.removeFirst(sentOrderHead)
            overtakenHead = max(overtakenHead - sentOrderHead, 0)
            sentOrderHead = 0
        }
    }

    /// Per-packet feedback says these retransmissions (RTX sequence numbers) arrived.
    func confirm(_ sequences: [UInt16]) {
        for sequence in sequences {
            guard let entry = sentRetransmissions[sequence], !entry.confirmed else { continue }
            sentRetransmissions[sequence]?.confirmed = true
            flow.retransmissionBytesInFlight -= entry.bytes
            confirmed += 1
            newestConfirmedSentAt = max(newestConfirmedSentAt, entry.sentAt)
            if recoveredOriginals.insert(entry.original).inserted {
                recovered += 1
                if recoveredOriginals.count > Self.maxTracked { recoveredOriginals.removeAll() }
            }
        }
    }

    /// The receiver got a packet sent after these retransmissions (a media packet sent at
    /// `deliveredSentAt`, or a later retransmission it confirmed): on a path that keeps order
    /// they came before it, so those not confirmed by now were lost (RACK's rule, RFC 8985
    /// 6.2, with `reorderWindow` as its reo_wnd). They leave the flight now rather than at the
    /// loss timeout (at least 200 ms, while in a window of a few packets they held back every
    /// other packet: the lab at 20 % random loss); they are counted lost when they expire, as
    /// before, and a late confirmation still counts.
    func writeOffOvertaken(deliveredSentAt: Int64, reorderWindow: Int64) {
        let newest = max(deliveredSentAt, newestConfirmedSentAt)
        guard newest != .min else { return }
        let deadline = newest - max(reorderWindow, 0)
        var index = max(overtakenHead, sentOrderHead)
        while index < sentOrder.count {
            let sequence = sentOrder[index]
            if let entry = sentRetransmissions[sequence] {
                guard entry.sentAt < deadline else { break }
                if !entry.confirmed && entry.bytes > 0 {
                    sentRetransmissions[sequence]?.bytes = 0
                    flow.retransmissionBytesInFlight -= entry.bytes
                }
            }
            index += 1
        }
        overtakenHead = index
    }

    /// Retransmissions sent before `deadline` and not confirmed count as lost.
    func expire(sentBefore deadline: Int64) {
        while sentOrderHead < sentOrder.count {
            guard let entry = sentRetransmissions[sentOrder[sentOrderHead]] else { sentOrderHead += 1; continue }
            guard entry.confirmed || entry.sentAt < deadline else { break }
            forgetOldest()
        }
    }

    /// Without per-packet feedback nothing will confirm a retransmission: none counts in flight.
    func writeOffInFlight() {
        guard flow.retransmissionBytesInFlight > 0 else { return }
        for (sequence, entry) in sentRetransmissions where !entry.confirmed && entry.bytes > 0 {
            sentRetransmissions[sequence]?.bytes = 0
            flow.retransmissionBytesInFlight -= entry.bytes
        }
    }

    /// Counts a NACK that is not the flow's to answer.
    func rejectForeign() { history.rejectForeign() }

    /// What retransmissions may spend of a flow's pace (bits per second): a quarter of it, in
    /// bytes per second (nil: unpaced, unlimited).
    static func rate(ofPace pace: Double?) -> Double? { pace.map { $0 / 8 / 4 } }

    /// The flow's pace changed (one that follows its stream): retransmissions spend a quarter of the new one.
    func followPace(_ pace: Double?) { history.rateBytesPerSecond = Self.rate(ofPace: pace) }

    /// A send completion: true when it was a retransmission's (counted here).
    func handleSendReport(_ report: SendReport) -> Bool {
        guard report.tag & Self.tagBit != 0 else { return false }
        sent += report.sentDatagrams
        sentBytes += report.sentBytes
        failed += report.failedDatagrams
        return true
    }

    // MARK: - DatagramProducer

    func peekDatagram() -> PendingDatagram? {
        // Within the congestion controller's window when the flow obeys one (retransmissions
        // wait while it is full, and RFC 4588 ones count in flight: see `track`).
        if queueHead < queue.count && flow.pathViable && flow.congestionWindowAllows(queue[queueHead].datagram.count) {
            peekedRetransmission = true
            return PendingDatagram(route: route, size: queue[queueHead].datagram.count, tag: Self.tagBit | UInt64(queueHead))
        }
        peekedRetransmission = false
        return inner.peekDatagram()
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        if peekedRetransmission {
            let datagram = take()
            datagram.withUnsafeBytes { buffer.copyMemory(from: $0) }
            if !history.sameSSRC { track(datagram) }
            return
        }
        inner.writeDatagram(into: buffer)
        // Media of the flow (not a path-MTU probe) goes into the history.
        if buffer.count >= RTPHeader.fixedSize && buffer[1] & 0x7f == flow.payloadType {
            history.record(UnsafeRawBufferPointer(buffer), at: clock())
        }
    }

    var pendingBytes: Int {
        let (sum, overflow) = inner.pendingBytes.addingReportingOverflow(queuedBytes)
        return overflow ? .max : sum
    }

    func readyIn(now: Int64) -> Int64? { inner.readyIn(now: now) }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension Retransmitter: Sendable {}
