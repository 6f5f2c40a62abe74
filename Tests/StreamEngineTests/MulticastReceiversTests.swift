import MediaFormats
import Testing
@testable import StreamEngine

/// The sender's table of a multicast flow's reporting receivers.
@Suite struct MulticastReceiversTests {
    let media: UInt32 = 0xAABB_CCDD

    func datagram(_ packets: [RTCPPacket]) -> [UInt8] {
        var bytes: [UInt8] = []
        for packet in packets { packet.serialize(into: &bytes) }
        return bytes
    }

    func block(lost: Int32, fraction: UInt8 = 0, about ssrc: UInt32? = nil) -> RTCPReportBlock {
        RTCPReportBlock(ssrc: ssrc ?? media, fractionLost: fraction, cumulativeLost: lost, extendedHighestSequence: 70_000,
                        jitter: 900, lastSR: 0, delaySinceLastSR: 0)
    }

    func handle(_ table: inout MulticastReceivers, _ packets: [RTCPPacket], at now: Int64) -> Bool {
        datagram(packets).withUnsafeBytes {
            table.handle($0, ssrc: media, clockRate: 90_000, now: now, realtime: now)
        }
    }

    @Test func eachReceiverKeepsItsOwnReport() {
        var table = MulticastReceivers(capacity: 8)
        _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 1, reportBlocks: [block(lost: 5, fraction: 64)]))], at: 1)
        _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 2, reportBlocks: [block(lost: 0)]))], at: 2)
        _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 1, reportBlocks: [block(lost: 7, fraction: 32)]))], at: 3)
        // A block about another source is not about this flow.
        _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 3, reportBlocks: [block(lost: 9, about: 42)]))], at: 4)
        let reports = table.reports
        #expect(reports.map(\.ssrc) == [1, 2])
        #expect(reports[0].cumulativeLost == 7)
        #expect(reports[0].fractionLost == 0.125)
        #expect(reports[0].reports == 2)
        #expect(reports[0].jitterMs == 10)  // 900 / 90 kHz
        #expect(reports[1].cumulativeLost == 0)
        #expect(table.evicted == 0)
    }

    @Test func theLeastRecentlyHeardMakesRoomAndIsCounted() {
        var table = MulticastReceivers(capacity: 2)
        for (ssrc, time) in [(UInt32(1), Int64(1)), (2, 2), (1, 3), (3, 4)] {
            _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: ssrc, reportBlocks: [block(lost: 0)]))], at: time)
        }
        #expect(table.reports.map(\.ssrc) == [1, 3])  // 2 was heard last at 2, 1 again at 3
        #expect(table.evicted == 1)
    }

    @Test func pictureLossForThisFlowIsReported() {
        var table = MulticastReceivers(capacity: 2)
        #expect(handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 1)),
                                .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: media))], at: 1))
        #expect(!handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: 1)),
                                 .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 42))], at: 2))
        #expect(table.reports.isEmpty)  // reports without a block about this flow
    }

    @Test func roundTripFromTheAnsweredSenderReport() {
        var table = MulticastReceivers(capacity: 2)
        let arrival: Int64 = 1_800_000_000_000_000_000
        func compact(_ nanoseconds: Int64) -> UInt32 {
            NTPTime(unixSeconds: nanoseconds / 1_000_000_000, nanoseconds: UInt32(nanoseconds % 1_000_000_000)).compact
        }
        // The SR left 30 ms before the report arrived and the receiver held it 20 ms (1310.72 units).
        var answered = block(lost: 0)
        answered.lastSR = compact(arrival - 30_000_000)
        answered.delaySinceLastSR = 1311
        datagram([.receiverReport(RTCPReceiverReport(ssrc: 1, reportBlocks: [answered]))]).withUnsafeBytes {
            _ = table.handle($0, ssrc: media, clockRate: 90_000, now: 1, realtime: arrival)
        }
        let rtt = table.reports.first?.rttMs ?? -1
        #expect(abs(rtt - 10) < 0.1, "rtt \(rtt) ms")
    }
    /// The RSI the sender sends its group: the receivers it knows, the average RTCP packet
    /// size (IP and UDP headers counted, 1/16 weight); and whether all reported the stream's end.
    @Test func summaryAndEndOfStream() {
        var table = MulticastReceivers(capacity: 8, packetOverhead: 28)
        for ssrc in UInt32(1)...3 {
            var reported = block(lost: 0)
            reported.extendedHighestSequence = 0x0001_0000 + 500 + ssrc  // 501, 502, 503 (wrapped once)
            _ = handle(&table, [.receiverReport(RTCPReceiverReport(ssrc: ssrc, reportBlocks: [reported]))], at: Int64(ssrc))
        }
        let summary = table.summary(ssrc: media, realtime: 1_800_000_000_000_000_000)
        #expect(summary.ssrc == media && summary.summarizedSSRC == media)
        #expect(summary.groupAndAveragePacketSize?.groupSize == 3)
        #expect(summary.groupAndAveragePacketSize?.averagePacketSize == 60)  // three RRs of 32 bytes, + 28
        #expect(table.allReported(through: 501))
        #expect(!table.allReported(through: 502))
        #expect(table.allReported(through: 65_000), "65000 is before 501 after the wrap")
        #expect(MulticastReceivers(capacity: 1).allReported(through: 7), "no receiver known: nothing to wait for")
    }
}
