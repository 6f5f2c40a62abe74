import MediaFormats
import StreamEngine
import Testing

/// The end of a stream: packets lost at the very end, which no later packet reveals, are
/// found from the sender's reports (their packet count) and repaired or given up like any
/// gap; the sender's BYE releases every frame held at once.
extension ReceiveSessionTests {
    typealias Link = LossRecoveryTests.Link

    /// A sender report of the stream's SSRC saying `packets` were sent; with `bye`, the
    /// compound ends with a BYE for the media and RTX SSRCs (as `streamer send` ends).
    static func senderReport(packets: Int, bye: Bool = false, ssrc: UInt32 = ReceiveSessionTests.ssrc) -> [UInt8] {
        var packets: [RTCPPacket] = [.senderReport(RTCPSenderReport(ssrc: ssrc, ntpTimestamp: 0x1234_0000_0000,
                                                                    rtpTimestamp: 0, packetCount: UInt32(packets), octetCount: 0))]
        if bye { packets.append(.goodbye(RTCPGoodbye(ssrcs: [ssrc, LossRecoveryTests.rtxSSRC]))) }
        return RTCPCompoundBuilder.build(packets)
    }

    /// The link with sender reports every 100 ms after the last packet, each saying `packets` were sent.
    static func reportsAfterTheLastPacket(_ link: inout Link, packets: Int, count: Int = 5) {
        let last = link.pending.map(\.time).max() ?? link.harness.now
        for index in 1...count {
            link.arrive(senderReport(packets: packets), at: last + Int64(index) * 100 * millisecond)
        }
    }

    /// Sends `datagrams` on the link (those at `drop` lost) with a sender report after the
    /// first half, as a sender reports while it sends.
    static func send(_ datagrams: [[UInt8]], drop: Set<Int>, on link: inout Link) {
        let half = datagrams.count / 2
        link.send(Array(datagrams[..<half]), drop: drop.filter { $0 < half })
        link.arrive(senderReport(packets: half), at: (link.pending.map(\.time).max() ?? 0) + millisecond / 2)
        link.send(Array(datagrams[half...]), drop: Set(drop.filter { $0 >= half }.map { $0 - half }))
    }

    /// The stream's first packet lost: no gap shows it (the receiver's sequence starts at the
    /// first packet it gets), so `lost` cannot hold it; the sender reports' packet count, one
    /// over the packets expected here, does (`sentBeforeFirst`). A report sent while packets
    /// are in flight counts more; the least difference is kept. Nothing lost: 0. Before, the
    /// receiver's count fell one short of the router's drops in one lab run of ten at 10 %
    /// random loss (`LabRetransmissionTests`). Without loss recovery nothing is kept (nil).
    @Test func aLostFirstPacketIsCountedFromTheSenderReports() {
        let frames = LossRecoveryTests.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        for dropFirst in [true, false] {
            var link = Link(latency: .milliseconds(100))
            Self.send(datagrams, drop: dropFirst ? [0] : [], on: &link)
            // A report sent with ten packets still on their way (it arrives before them).
            link.arrive(Self.senderReport(packets: datagrams.count), at: link.harness.now + 2 * Self.millisecond)
            Self.reportsAfterTheLastPacket(&link, packets: datagrams.count)
            link.run(quiet: 200 * Self.millisecond)
            let stats = link.stats
            #expect(stats.lost == 0 && stats.received == datagrams.count - (dropFirst ? 1 : 0))
            #expect(stats.sentBeforeFirst == (dropFirst ? 1 : 0))
            #expect(link.asked.isEmpty)
        }
        var plain = Harness()
        for datagram in datagrams.dropFirst() { plain.deliver(datagram) }
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        plain.deliver(Self.senderReport(packets: datagrams.count), from: rtcpSource, port: .rtcp)
        #expect(plain.session.stats.sentBeforeFirst == nil)
    }

    @Test func aLostLastPacketIsFoundByTheSenderReportAndRecovered() {
        let frames = LossRecoveryTests.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100))
        Self.send(datagrams, drop: [datagrams.count - 1], on: &link)  // the last frame, one packet
        let lastArrival = link.pending.map(\.time).max() ?? 0
        Self.reportsAfterTheLastPacket(&link, packets: datagrams.count)
        link.run(quiet: 200 * Self.millisecond, finish: false)
        // Every frame out, whole, before the stream ends: the report showed the loss, the NACK repaired it.
        #expect(Self.same(link.units, frames))
        #expect(link.units.allSatisfy { $0.isComplete })
        #expect(link.asked.map(\.sequence) == [1000 + UInt16(datagrams.count - 1)])
        let stats = link.stats
        #expect(stats.lost == 1 && stats.recovered == 1 && stats.received == datagrams.count - 1)
        #expect(stats.framesComplete == 10 && stats.framesIncomplete == 0 && stats.senderReports == 6)
        // The second report of the same count (200 ms after the last packet), the reorder allowance,
        // the answer (20 ms), then the frame's playout time (its one packet's arrival + 100 ms): the
        // last frame came out about that long after the packet before it, not at the stream's end.
        let lastOut = (link.harness.unitTimes.last ?? .max) - lastArrival
        #expect(lastOut >= 300 * Self.millisecond && lastOut < 400 * Self.millisecond)
    }

    @Test func aLostTailNeverRepairedIsGivenUpAtItsDeadline() {
        let frames = LossRecoveryTests.stream(frames: 9)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100))
        link.answer = { _ in false }
        let lastFrame = frames.last!.datagrams.count
        // The last frame's last two packets (of four) lost.
        Self.send(datagrams, drop: [datagrams.count - 2, datagrams.count - 1], on: &link)
        Self.reportsAfterTheLastPacket(&link, packets: datagrams.count)
        link.run(quiet: 300 * Self.millisecond, finish: false)
        #expect(link.units.count == 9)
        #expect(Self.same(Array(link.units.prefix(8)), Array(frames.prefix(8))))
        #expect(link.units.last.map { !$0.isComplete && $0.packetCount == lastFrame - 2 } == true)
        let stats = link.stats
        #expect(stats.lost == 2 && stats.recovered == 0)
        #expect(stats.framesComplete == 8 && stats.framesIncomplete == 1)
        // Given up at the second report's arrival + the latency, not at the stream's end.
        let maxAdded = stats.playoutAddedLatencyMs?.max ?? .infinity
        #expect(maxAdded >= 300 && maxAdded < 400)
        // Later reports of the same count ask nothing more.
        #expect(Set(link.asked.map(\.sequence)) == [1000 + UInt16(datagrams.count - 2), 1000 + UInt16(datagrams.count - 1)])
    }

    @Test func aCountAheadOfTheSequenceLosesNothingThatComesLater() {
        let frames = LossRecoveryTests.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        let half = frames.prefix(5).flatMap(\.datagrams).count
        var link = Link(latency: .milliseconds(100))
        // A sender that counts two packets it resent: while it pauses, its reports say two more
        // than it numbered. The "tail" is asked for (nothing answers), then given up.
        Self.send(Array(datagrams[..<half]), drop: [], on: &link)
        Self.reportsAfterTheLastPacket(&link, packets: half + 2, count: 3)
        link.run(quiet: 400 * Self.millisecond, finish: false)
        #expect(link.units.count == 5 && link.stats.lost == 2 && link.asked.count >= 2)
        // It goes on: the packets numbered after its highest are taken, none is late.
        link.send(Array(datagrams[half...]))
        link.run(quiet: 200 * Self.millisecond, finish: false)
        #expect(Self.same(link.units, frames) && link.units.allSatisfy { $0.isComplete })
        #expect(link.stats.lost == 0 && link.stats.late == 0 && link.stats.received == datagrams.count)
    }

    /// A tail given up at its deadline whose packets come after all (they were behind a long
    /// queue, as under a flood on a slow machine: the sender's reports, on a socket of their
    /// own, overtook them): the frame it ended is out, incomplete, once; its packets are late,
    /// not a second frame of the same timestamp, and the frames after it come out whole.
    @Test func aTailGivenUpThatComesAfterAllIsLateNotASecondFrame() {
        let frames = LossRecoveryTests.stream(frames: 12)
        let datagrams = frames.flatMap(\.datagrams)
        let end = frames.prefix(9).flatMap(\.datagrams).count  // the ninth frame's last packet + 1
        #expect(frames[8].datagrams.count == 4)
        var link = Link(latency: .milliseconds(100))
        link.answer = { _ in false }
        // The ninth frame's last two packets (of four) come late: the reports say they were sent.
        Self.send(Array(datagrams[..<(end - 2)]), drop: [], on: &link)
        Self.reportsAfterTheLastPacket(&link, packets: end, count: 3)
        link.run(quiet: 300 * Self.millisecond, finish: false)
        #expect(link.units.count == 9 && link.units.last.map { !$0.isComplete && $0.timestamp == frames[8].unit.timestamp } == true)
        link.send(Array(datagrams[(end - 2)...]))
        link.run(quiet: 300 * Self.millisecond, finish: false)
        #expect(link.units.count == 12, "\(link.units.map { ($0.timestamp, $0.isComplete) })")
        let whole = Self.same(Array(link.units.prefix(8)), Array(frames.prefix(8)))
            && Self.same(Array(link.units.suffix(3)), Array(frames.suffix(3)))
        #expect(whole)
        let stats = link.stats
        #expect(stats.framesComplete + stats.framesIncomplete + stats.framesMissing == 12)
        #expect(stats.framesIncomplete == 1 && stats.late == 2 && stats.lost == 0 && stats.received == datagrams.count)
    }

    @Test func aReceiverThatJoinedLateIsNotAskedForPacketsBeforeItsFirst() {
        let frames = LossRecoveryTests.stream(frames: 10)
        let first = frames.prefix(5).flatMap(\.datagrams)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100))
        // The sender had sent 50 packets before this receiver's first.
        link.send(first)
        Self.reportsAfterTheLastPacket(&link, packets: first.count + 50, count: 2)
        link.run(quiet: 100 * Self.millisecond, finish: false)
        #expect(link.asked.isEmpty && link.stats.lost == 0 && link.units.count == 5)
        link.send(Array(datagrams[first.count...]), drop: [datagrams.count - first.count - 1])
        Self.reportsAfterTheLastPacket(&link, packets: datagrams.count + 50, count: 2)
        link.run(quiet: 200 * Self.millisecond, finish: false)
        #expect(link.asked.map(\.sequence) == [1000 + UInt16(datagrams.count - 1)])
        #expect(Self.same(link.units, frames) && link.stats.lost == 1 && link.stats.recovered == 1)
    }

    @Test func aReportAheadOfPacketsStillOnTheirWayAsksNothing() {
        let frames = LossRecoveryTests.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100))
        let half = datagrams.count / 2
        link.send(Array(datagrams[..<half]))
        // Two reports that overtook the next packets (a queue that favours RTCP), counting
        // three and then six of them; those come after.
        let last = link.pending.map(\.time).max() ?? 0
        link.arrive(Self.senderReport(packets: half + 3), at: last + Self.millisecond / 2)
        link.arrive(Self.senderReport(packets: half + 6), at: last + Self.millisecond)
        link.send(Array(datagrams[half...]), interval: 2 * Self.millisecond)
        link.run(quiet: 200 * Self.millisecond, finish: false)
        #expect(link.asked.isEmpty && link.stats.nackRequested == 0)
        #expect(Self.same(link.units, frames) && link.stats.lost == 0 && link.stats.recovered == 0)
    }

    @Test func aByeReleasesEveryHeldFrameAtOnce() {
        let frames = LossRecoveryTests.stream(frames: 9)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .seconds(1))
        link.answer = { _ in false }
        link.send(datagrams, drop: [datagrams.count - 1])
        let bye = (link.pending.map(\.time).max() ?? 0) + 10 * Self.millisecond
        // Its first report, so it shows no tail: only the BYE ends the waits.
        link.arrive(Self.senderReport(packets: datagrams.count, bye: true), at: bye)
        link.run(quiet: 100 * Self.millisecond, finish: false)
        #expect(link.units.count == 9 && link.harness.unitTimes.allSatisfy { $0 <= bye })
        #expect(Self.same(Array(link.units.prefix(8)), Array(frames.prefix(8))) && link.units.last?.isComplete == false)
        let stats = link.stats
        #expect(stats.byeReceived == 1 && stats.framesComplete == 8 && stats.framesIncomplete == 1)
    }

    @Test func aByeEndsTheLastFrameWithoutRetransmissionAndOnlyTheStreamsCounts() {
        let frames = Self.stream(frames: 5)
        var harness = Harness()
        for datagram in frames.flatMap(\.datagrams).dropLast() { harness.deliver(datagram) }
        #expect(harness.units.count == 4)
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        // Another source's BYE changes nothing.
        harness.deliver(RTCPCompoundBuilder.build([.goodbye(RTCPGoodbye(ssrcs: [0xABCD]))]), from: rtcpSource, port: .rtcp)
        #expect(harness.units.count == 4 && harness.session.stats.byeReceived == 0)
        harness.deliver(RTCPCompoundBuilder.build([.goodbye(RTCPGoodbye(ssrcs: [Self.ssrc], reason: RTCPText("done")))]),
                        from: rtcpSource, port: .rtcp)
        #expect(harness.units.count == 5 && harness.units.last?.isComplete == false)
        let stats = harness.session.stats
        #expect(stats.byeReceived == 1 && stats.framesComplete == 4 && stats.framesIncomplete == 1)
        harness.finish()
        #expect(harness.units.count == 5)
    }

    /// The BYE overtook the last packet (RTCP on a socket of its own, the media socket's queue
    /// long): the last frame is out, incomplete, once; the packet that comes after it is late,
    /// not a frame of its own.
    @Test func aPacketAfterTheByeThatOvertookItIsLate() {
        let frames = Self.stream(frames: 5)
        let datagrams = frames.flatMap(\.datagrams)
        #expect(frames[4].datagrams.count > 1)
        var harness = Harness()
        for datagram in datagrams.dropLast() { harness.deliver(datagram) }
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        harness.deliver(RTCPCompoundBuilder.build([.goodbye(RTCPGoodbye(ssrcs: [Self.ssrc]))]), from: rtcpSource, port: .rtcp)
        #expect(harness.units.count == 5 && harness.units.last?.isComplete == false)
        harness.deliver(datagrams[datagrams.count - 1])
        harness.finish()
        #expect(harness.units.count == 5, "\(harness.units.map { ($0.timestamp, $0.isComplete) })")
        let stats = harness.session.stats
        #expect(stats.framesComplete + stats.framesIncomplete + stats.framesMissing == 5)
        #expect(stats.received == datagrams.count && stats.late == 1 && stats.lost == 0)
    }
}
