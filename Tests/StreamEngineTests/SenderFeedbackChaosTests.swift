@testable import StreamEngine
import MediaFormats
import Testing
import TestSupport

/// The sender's feedback path under RTCP that says anything: a flow sending frames, its
/// feedback handler and its congestion controller (SCReAM) fed, among honest-looking reports,
/// RFC 8888 reports of any range, marks and arrival times, receiver reports whose blocks say
/// anything, NACKs, PLIs and random bytes. Whatever comes, nothing traps, the controller's
/// bytes in flight stay between none and what was sent, its window stays positive and its
/// target within the configured bitrates, and every malformed packet is counted.
@Suite struct SenderFeedbackChaosTests {
    @Test(arguments: 1...8 as ClosedRange<UInt64>) func anyFeedbackLeavesTheControllerSound(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        let configuration = ScreamConfiguration()
        flow.congestion = ScreamController(configuration: configuration)
        let feedback = SenderFeedback(ssrc: flow.ssrc, cname: "test")
        var buffer = [UInt8](repeating: 0, count: 2048)
        var now: Int64 = 5_000_000_000
        var bytesSent = 0
        var sequences: [UInt16] = []
        var malformed = 0
        var accepted = 0
        var inFlightSeen = 0
        for frame in 0..<300 {
            now += 33_000_000
            flow.now = now
            let size = Int.random(in: 200...12_000, using: &rng)
            flow.enqueue(AccessUnit(nalUnits: [[0x02, 0x01] + [UInt8](repeating: 0xAB, count: size)], timestamp: UInt32(frame) * 3000,
                                    isKeyframe: frame % 30 == 0))
            while let pending = flow.peekDatagram() {
                buffer.withUnsafeMutableBytes { flow.writeDatagram(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<pending.size])) }
                sequences.append(UInt16(buffer[2]) << 8 | UInt16(buffer[3]))
                bytesSent += pending.size
            }
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                let (datagram, isMalformed) = Self.feedback(for: flow.ssrc, sent: sequences, using: &rng)
                if isMalformed { malformed += 1 }
                now += Int64.random(in: 0...5_000_000, using: &rng)
                if datagram.withUnsafeBytes({ feedback.handle($0, flow: flow, now: now, realtime: now) }) { accepted += 1 }
            }
            flow.congestion?.advance(to: .nanoseconds(now))
            let controller = try #require(flow.congestion)
            #expect(controller.bytesInFlight >= 0 && controller.bytesInFlight <= bytesSent, "frame \(frame)")
            inFlightSeen = max(inFlightSeen, controller.bytesInFlight)
            #expect(controller.window > 0 && controller.pacingRate > 0, "frame \(frame)")
            #expect(controller.targetBitrate >= configuration.minBitrate && controller.targetBitrate <= configuration.maxBitrate,
                    "frame \(frame): \(controller.targetBitrate)")
        }
        let rejected = feedback.rejected.values.reduce(0, +)
        #expect(malformed == 0 || rejected > 0)
        // Not vacuous: reports were taken, packets were in flight, losses declared (and undone).
        #expect(accepted > 0 && inFlightSeen > 0 && (flow.congestion?.lossCounts?.declared ?? 0) > 0)
    }

    /// One RTCP datagram for the flow of `ssrc` that has sent `sent` (in order): whether it is
    /// random bytes that cannot be RTCP.
    static func feedback(for ssrc: UInt32, sent: [UInt16], using rng: inout SplitMix64) -> ([UInt8], Bool) {
        func near() -> UInt16 {
            guard let last = sent.last else { return .random(in: 0...UInt16.max, using: &rng) }
            return Bool.random(using: &rng) ? last &- UInt16.random(in: 0...300, using: &rng)
                                            : UInt16.random(in: 0...UInt16.max, using: &rng)
        }
        switch Int.random(in: 0..<6, using: &rng) {
        case 0, 1:
            // RFC 8888: any range, any marks and arrival offsets, any report time.
            let metrics = (0..<Int.random(in: 1...400, using: &rng)).map { _ in
                RTCPCongestionControlFeedback.Metric(rawValue: UInt16.random(in: 0...UInt16.max, using: &rng))
            }
            let report = RTCPCongestionControlFeedback(
                senderSSRC: 7, reports: [.init(mediaSSRC: ssrc, beginSequence: near(), metrics: metrics)],
                reportTimestamp: .random(in: 0...UInt32.max, using: &rng))
            return (RTCPCompoundBuilder.build([.congestionControlFeedback(report)]), false)
        case 2:
            // A receiver report whose block says anything (loss, jitter, LSR, DLSR).
            let block = RTCPReportBlock(ssrc: ssrc, fractionLost: .random(in: 0...255, using: &rng),
                                        cumulativeLost: .random(in: -8_388_608...8_388_607, using: &rng),
                                        extendedHighestSequence: .random(in: 0...UInt32.max, using: &rng),
                                        jitter: .random(in: 0...UInt32.max, using: &rng),
                                        lastSR: .random(in: 0...UInt32.max, using: &rng),
                                        delaySinceLastSR: .random(in: 0...UInt32.max, using: &rng))
            return (RTCPCompoundBuilder.build([.receiverReport(RTCPReceiverReport(ssrc: 7, reportBlocks: [block]))]), false)
        case 3:
            let nack = RTCPGenericNACK(senderSSRC: 7, mediaSSRC: ssrc,
                                       sequenceNumbers: (0..<Int.random(in: 1...50, using: &rng)).map { _ in near() })
            return (RTCPCompoundBuilder.build([.genericNACK(nack), .pictureLossIndication(.init(senderSSRC: 7, mediaSSRC: ssrc))]), false)
        default:
            // Random bytes behind an RTCP-looking first word: they do not parse.
            var bytes = (0..<Int.random(in: 4...120, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            bytes[0] = 0x80 | (bytes[0] & 0x1F)
            bytes[1] = .random(in: 200...206, using: &rng)
            bytes[2] = 0xFF
            return (bytes, true)
        }
    }
}
