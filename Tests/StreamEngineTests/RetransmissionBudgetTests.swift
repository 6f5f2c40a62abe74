@testable import StreamEngine
import MediaFormats
import Testing

/// RFC 4588 retransmissions spend the congestion controller's budget: they count in flight
/// with the media until per-packet feedback on the RTX SSRC confirms them (or they are lost
/// or written off). Socket-free: a `Retransmitter` in front of an idle producer, a fake clock.
@Suite struct RetransmissionBudgetTests {
    typealias History = RetransmissionHistoryTests
    static let millisecond = History.millisecond

    /// A controller with a fixed window that sees nothing in flight of its own.
    struct StillController: CongestionController {
        let window: Int
        var bytesInFlight: Int { 0 }
        var pacingRate: Int { 10_000_000 }
        var targetBitrate: Int { 5_000_000 }
        mutating func packetSent(_ packet: SentPacketRecord) {}
        mutating func feedbackReceived(_ feedback: CongestionFeedback) {}
        mutating func advance(to now: Duration) {}
    }

    /// Produces nothing: only retransmissions go.
    final class Idle: DatagramProducer {
        func peekDatagram() -> PendingDatagram? { nil }
        func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {}
    }

    /// A flow under a 3,000-byte window, and a retransmitter whose history holds 20 packets of
    /// 1,012 bytes (1,014 as RTX).
    static func setUp() throws -> (MediaFlow, Retransmitter) {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        flow.congestion = StillController(window: 3_000)
        flow.congestionActive = true
        let retransmitter = Retransmitter(inner: Idle(), flow: flow, route: 1, history: History.history(first: 100),
                                          clock: { 100 * RetransmissionBudgetTests.millisecond })
        return (flow, retransmitter)
    }

    final class Clock { var now: Int64 = 0 }

    /// A flow under `window` with a retransmitter on a clock the test moves, set to 40 ms,
    /// after an RTT of 4 ms.
    static func setUp(window: Int) throws -> (Clock, MediaFlow, Retransmitter) {
        let clock = Clock()
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        flow.congestion = StillController(window: window)
        flow.congestionActive = true
        let retransmitter = Retransmitter(inner: Idle(), flow: flow, route: 1, history: History.history(first: 100),
                                          clock: { clock.now })
        retransmitter.noteRTT(milliseconds: 4)
        clock.now = 40 * Self.millisecond
        return (clock, flow, retransmitter)
    }

    /// Sends what the window lets out; returns the RTX sequence numbers sent.
    static func sendAll(_ retransmitter: Retransmitter) throws -> [UInt16] {
        var sent: [UInt16] = []
        while let pending = retransmitter.peekDatagram() {
            var buffer = [UInt8](repeating: 0, count: pending.size)
            buffer.withUnsafeMutableBytes { retransmitter.writeDatagram(into: $0) }
            sent.append(try RTPHeader.parse(buffer).header.sequenceNumber)
        }
        return sent
    }

    /// On a path whose round trip is a fraction of a millisecond (a LAN, the lab), a NACK that
    /// comes a third of a millisecond after its packet was sent is the receiver's answer to the
    /// next packet's arrival: it is answered. (Before, the half-RTT age had a floor of 1 ms and
    /// rejected it `tooEarly`: in the lab at 10 % random loss, 121 of 226 asks, and with the
    /// default 50 ms playout latency half the frames came late.) Over a 10 ms round trip the
    /// same ask is still premature.
    @Test func onAFastPathAnEarlyNACKIsAnswered() throws {
        let clock = Clock()
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        let retransmitter = Retransmitter(inner: Idle(), flow: flow, route: 1, history: History.history(first: 100),
                                          clock: { clock.now })
        retransmitter.noteRTT(milliseconds: 0.2)
        clock.now = 19 * Self.millisecond + 300_000  // packet 119 was sent at 19 ms
        retransmitter.handle(History.nack([119]))
        #expect(try Self.sendAll(retransmitter).count == 1 && retransmitter.history.rejected.isEmpty)
        retransmitter.noteRTT(milliseconds: 10)
        clock.now = 21 * Self.millisecond  // packet 118 was sent at 18 ms: 3 ms, under half the RTT
        retransmitter.handle(History.nack([118]))
        #expect(try Self.sendAll(retransmitter).isEmpty && retransmitter.history.rejected == [.tooEarly: 1])
    }

    @Test func retransmissionsCountInFlightUntilConfirmed() throws {
        let (flow, retransmitter) = try Self.setUp()
        retransmitter.handle(History.nack([100, 101, 102, 103, 104]))
        // The first goes into an empty window, the second fits beside it (2,028 <= 3,000), the
        // third would not: it waits, and so would media.
        let first = try Self.sendAll(retransmitter)
        #expect(first.count == 2 && flow.retransmissionBytesInFlight == 2 * 1_014)
        #expect(!flow.congestionWindowAllows(1_000) && flow.congestionWindowAllows(900))
        // The receiver's per-packet feedback confirms one: the next goes.
        retransmitter.confirm([first[0]])
        #expect(flow.retransmissionBytesInFlight == 1_014)
        let second = try Self.sendAll(retransmitter)
        #expect(second.count == 1 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // A confirmation repeated changes nothing; both confirmed empty the window.
        retransmitter.confirm([first[0], first[1], second[0]])
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.confirmed == 3)
        #expect(try Self.sendAll(retransmitter).count == 2)
    }

    /// The receiver asks again for a packet whose retransmission it never got: that
    /// retransmission leaves the flight as the new one is queued, not at the loss timeout
    /// (at least 200 ms). Before, in a window of two packets (the lab at 10 % random loss),
    /// two lost retransmissions held back every other packet, the new ones too, for that long.
    /// A repeated ask the history rejects (premature) leaves the first one in flight.
    @Test func anAskRepeatedTakesTheLostRetransmissionOutOfFlight() throws {
        let (clock, flow, retransmitter) = try Self.setUp(window: 2_100)
        retransmitter.handle(History.nack([100, 101]))
        #expect(try Self.sendAll(retransmitter).count == 2 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // Asked again at once: within half the RTT of the answer, rejected; both stay in flight.
        clock.now += 1 * Self.millisecond
        retransmitter.handle(History.nack([100]))
        #expect(try Self.sendAll(retransmitter).isEmpty && flow.retransmissionBytesInFlight == 2 * 1_014)
        // Asked again an RTT later: the first one did not arrive. It leaves the flight, and its
        // successor fits in the window beside the other.
        clock.now += 4 * Self.millisecond
        retransmitter.handle(History.nack([100]))
        #expect(flow.retransmissionBytesInFlight == 1_014)
        let again = try Self.sendAll(retransmitter)
        #expect(again.count == 1 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // Its confirmation empties the window of it; the lost one counts once, when it expires.
        retransmitter.confirm(again)
        #expect(flow.retransmissionBytesInFlight == 1_014 && retransmitter.lost == 0)
        retransmitter.expire(sentBefore: clock.now + 1)
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.lost == 2)
    }

    /// A retransmission the receiver never got, while a packet sent after it arrived (a media
    /// packet, or a later retransmission): on a path that keeps order it would have come first,
    /// so it leaves the flight at that report, beyond the reorder window (RACK), not at the loss
    /// timeout (at least 200 ms). Before, in the lab at 20 % random loss, one or two of them in a
    /// window of three or four packets held every other packet back for that long. One sent
    /// within the reorder window before the delivered packet stays; a late confirmation still
    /// counts, and the loss is counted once, when it expires.
    @Test func aRetransmissionOvertakenLeavesTheFlight() throws {
        let (clock, flow, retransmitter) = try Self.setUp(window: 5_000)
        retransmitter.handle(History.nack([100, 101]))
        let first = try Self.sendAll(retransmitter)
        #expect(first.count == 2 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // Nothing delivered yet, or only what was sent with them or within the reorder window after.
        retransmitter.writeOffOvertaken(deliveredSentAt: .min, reorderWindow: 0)
        retransmitter.writeOffOvertaken(deliveredSentAt: 40 * Self.millisecond, reorderWindow: 0)
        retransmitter.writeOffOvertaken(deliveredSentAt: 41 * Self.millisecond, reorderWindow: 2 * Self.millisecond)
        #expect(flow.retransmissionBytesInFlight == 2 * 1_014)
        // A media packet sent 3 ms after them arrived: both were lost.
        retransmitter.writeOffOvertaken(deliveredSentAt: 43 * Self.millisecond, reorderWindow: 2 * Self.millisecond)
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.lost == 0)
        // One arrives after all: confirmed, and the flight stays empty.
        retransmitter.confirm([first[1]])
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.confirmed == 1)

        // A later retransmission confirmed overtakes an earlier one (no media needed).
        clock.now = 50 * Self.millisecond
        retransmitter.handle(History.nack([102]))
        let second = try Self.sendAll(retransmitter)
        clock.now = 51 * Self.millisecond
        retransmitter.handle(History.nack([103]))
        let third = try Self.sendAll(retransmitter)
        #expect(second.count == 1 && third.count == 1 && flow.retransmissionBytesInFlight == 2 * 1_014)
        retransmitter.confirm(third)
        retransmitter.writeOffOvertaken(deliveredSentAt: 43 * Self.millisecond, reorderWindow: 0)
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.confirmed == 2)
        retransmitter.expire(sentBefore: clock.now + 1)
        #expect(retransmitter.lost == 2)
    }

    @Test func unconfirmedRetransmissionsLeaveTheWindowWhenLostOrWrittenOff() throws {
        let (flow, retransmitter) = try Self.setUp()
        retransmitter.handle(History.nack([100, 101]))
        #expect(try Self.sendAll(retransmitter).count == 2 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // Not confirmed within the loss timeout: lost, out of flight.
        retransmitter.expire(sentBefore: 101 * Self.millisecond)
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.lost == 2)

        retransmitter.handle(History.nack([105, 106]))
        #expect(try Self.sendAll(retransmitter).count == 2 && flow.retransmissionBytesInFlight == 2 * 1_014)
        // A receiver without per-packet feedback can never confirm them: written off, not lost.
        retransmitter.writeOffInFlight()
        #expect(flow.retransmissionBytesInFlight == 0 && retransmitter.lost == 2)
        retransmitter.confirm([1, 2, 3, 4])
        #expect(flow.retransmissionBytesInFlight == 0)
    }
}
