import MediaFormats
import Synchronization
import Testing
import UringIO
@testable import StreamEngine

/// What a flow tells its congestion controller: every datagram it writes, and each RFC 8888
/// report translated (extended sequence numbers, arrival times on the receiver's clock, ECN,
/// packets reported missing).
struct CongestionFeedbackTranslationTests {
    /// Keeps what the controller was told.
    final class Recording: Sendable {
        let sent = Mutex<[SentPacketRecord]>([])
        let feedback = Mutex<[CongestionFeedback]>([])
    }

    struct RecordingController: CongestionController {
        let recording: Recording
        var window: Int { 1 << 20 }
        var bytesInFlight: Int { 0 }
        var pacingRate: Int { 1_000_000 }
        var targetBitrate: Int { 1_000_000 }
        mutating func packetSent(_ packet: SentPacketRecord) { recording.sent.withLock { $0.append(packet) } }
        mutating func feedbackReceived(_ feedback: CongestionFeedback) { recording.feedback.withLock { $0.append(feedback) } }
        mutating func advance(to now: Duration) {}
    }

    private func report(_ flow: MediaFlow, begin: Int64, _ metrics: [RTCPCongestionControlFeedback.Metric],
                        timestamp: UInt32) -> [UInt8] {
        RTCPCompoundBuilder.build([.congestionControlFeedback(RTCPCongestionControlFeedback(
            senderSSRC: 7, reports: [.init(mediaSSRC: flow.ssrc, beginSequence: UInt16(truncatingIfNeeded: begin),
                                           metrics: metrics)],
            reportTimestamp: timestamp))])
    }

    @Test func reportsReachTheControllerAsTheReceiverGaveThem() throws {
        let recording = Recording()
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        flow.tracksPackets = true
        flow.congestion = RecordingController(recording: recording)
        flow.now = 5_000_000_000
        // 4000 NAL bytes: four FU datagrams.
        flow.enqueue(AccessUnit(nalUnits: [[0x26, 0x01] + [UInt8](repeating: 0xAB, count: 3998)], timestamp: 0,
                                isKeyframe: true))
        var buffer = [UInt8](repeating: 0, count: 2048)
        var sizes: [Int] = []
        while let pending = flow.peekDatagram() {
            buffer.withUnsafeMutableBytes { flow.writeDatagram(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<pending.size])) }
            sizes.append(pending.size)
        }
        let sent = recording.sent.withLock { $0 }
        try #require(sent.count == 4)
        let first = sent[0].sequence
        #expect(sent.map(\.sequence) == Array(first..<first + 4))
        #expect(sent.map(\.bytes) == sizes && sent.allSatisfy { $0.sentAt == .nanoseconds(5_000_000_000) })

        // Received (ECT(0), 10/1024 s before the report), missing, CE (5/1024 s), ECT(1) (at the
        // report's time); the report timestamp just before the compact NTP clock wraps.
        let feedback = SenderFeedback(ssrc: flow.ssrc, cname: "test")
        let metrics: [RTCPCongestionControlFeedback.Metric] = [
            .init(received: true, ecn: ECNCodepoint.ect0.rawValue, arrivalTimeOffset: 10), .notReceived,
            .init(received: true, ecn: ECNCodepoint.ce.rawValue, arrivalTimeOffset: 5),
            .init(received: true, ecn: ECNCodepoint.ect1.rawValue, arrivalTimeOffset: 0),
        ]
        let firstReport = report(flow, begin: first, metrics, timestamp: 0xFFFF_FF00)
        _ = firstReport.withUnsafeBytes { feedback.handle($0, flow: flow, now: 6_000_000_000, realtime: 1) }
        var told = recording.feedback.withLock { $0 }
        try #require(told.count == 1)
        let packets = told[0].packets
        let reportTime = try #require(told[0].reportTime)
        #expect(told[0].receivedAt == .nanoseconds(6_000_000_000))
        #expect(packets.map(\.sequence) == Array(first..<first + 4))
        #expect(packets.map(\.ecn) == [.ect0, .notECT, .ce, .ect1])
        #expect(packets[1].arrival == nil)
        #expect(packets[0].arrival == reportTime - .nanoseconds(10 * 1_000_000_000 / 1024))
        #expect(packets[2].arrival == reportTime - .nanoseconds(5 * 1_000_000_000 / 1024))
        #expect(packets[3].arrival == reportTime)
        #expect(flow.log.confirmed == 3 && feedback.ceReported == 1)

        // The next report, 512/65536 s later across the wrap: its time moves on by exactly that.
        let secondReport = report(flow, begin: first + 1, [.init(received: true, ecn: 2, arrivalTimeOffset: 0)],
                                  timestamp: 0x0000_0100)
        _ = secondReport.withUnsafeBytes { feedback.handle($0, flow: flow, now: 6_010_000_000, realtime: 1) }
        told = recording.feedback.withLock { $0 }
        try #require(told.count == 2)
        #expect(told[1].reportTime.map { $0 - reportTime } == .nanoseconds(512 * 1_000_000_000 / 65_536))
        #expect(told[1].packets.map(\.sequence) == [first + 1] && told[1].packets[0].arrival == told[1].reportTime)
    }
}
