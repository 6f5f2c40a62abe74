import MediaFormats
import Testing
@testable import StreamEngine

/// `ReceiverFeedback.makeReports` cuts what arrived since the last report into datagrams of at
/// most `metricsPerDatagram` sequence numbers each: every arrival is reported once, in order.
@Suite struct ReceiverFeedbackTests {
    /// Reported sequence numbers (received metrics) of each datagram's CCFB.
    static func reported(_ datagram: [UInt8]) -> [Int] {
        var sequences: [Int] = []
        for case .congestionControlFeedback(let ccfb) in RTCPPacket.parseCompound(datagram).packets {
            for report in ccfb.reports {
                for (offset, metric) in report.metrics.enumerated() where metric.received {
                    sequences.append(Int(report.beginSequence) + offset)
                }
            }
        }
        return sequences
    }

    @Test(arguments: [1, 479, 480, 481, 1000, 2000])
    func everyArrivalIsReportedOnceInDatagramsOfAtMostOneCCFBsSpan(count: Int) {
        var feedback = ReceiverFeedback(ssrc: 9, cname: "r")
        var tracker = RTPSequenceTracker()
        // Out of order within each run of ten, one in 97 lost: the cut is by sequence number.
        let lost = Set(stride(from: 50, to: count, by: 97))
        for base in stride(from: 0, to: count, by: 10) {
            for sequence in (base..<min(base + 10, count)).reversed() where !lost.contains(sequence) {
                _ = tracker.record(sequence: UInt16(sequence), rtpTimestamp: 0, arrival: 0)
                feedback.record(sequence: UInt16(sequence), arrival: 1_000_000, ecn: 0)
            }
        }
        let datagrams = feedback.makeReports(now: 2_000_000, mediaSSRC: 7, tracker: &tracker)
        let expected = (0..<count).filter { !lost.contains($0) }
        #expect(datagrams.count == (expected.last! - expected.first!) / ReceiverFeedback.metricsPerDatagram + 1)
        #expect(datagrams.flatMap(Self.reported) == expected)
        for datagram in datagrams {
            let span = Self.reported(datagram)
            #expect(span.last! - span.first! < ReceiverFeedback.metricsPerDatagram)
        }
        #expect(!feedback.hasNews)
    }
}
