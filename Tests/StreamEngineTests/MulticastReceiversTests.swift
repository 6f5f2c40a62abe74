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
            table.handle($0, ssrc: media, clockRate: 90_000, now: now, unixNow: Double(now))
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
}
