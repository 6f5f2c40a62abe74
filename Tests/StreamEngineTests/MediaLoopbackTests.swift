import Foundation
import MediaFormats
import MediaSources
@testable import StreamEngine
import Synchronization
import Testing
import UringIO

/// Encodes `count` frames of the synthetic source with x265.
func encodeSynthetic(count: Int, width: Int = 640, height: Int = 360, bitrateKbps: Int = 2000) throws -> [AccessUnit] {
    let encoder = try X265Encoder(EncoderConfig(width: width, height: height, bitrateKbps: bitrateKbps,
                                                keyframeInterval: 60))
    let source = SyntheticSource(width: width, height: height)
    var units: [AccessUnit] = []
    for index in 0..<count {
        if let unit = try encoder.encode(source.frame(at: index)) { units.append(unit) }
    }
    units += encoder.flush()
    return units
}

/// Sends `units` through a MediaSender to a MediaReceiver on loopback; returns what arrived
/// (the receiver stops at `frameLimit` frames, by default as many as sent).
/// `configure` may change both ends' configurations (SRTP keys, say) first.
func sendThroughEngine(_ units: [AccessUnit], mtu: MTUSetting, pace: Double? = 50_000_000, frameLimit: Int? = nil,
                       configure: (inout MediaSenderConfig, inout MediaReceiverConfig) -> Void = { _, _ in })
    throws -> (received: [DepacketizedAccessUnit], sender: SenderStats, receiver: ReceiverStats)
{
    var receiverConfig = MediaReceiverConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!)
    var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: 0)!)
    configure(&config, &receiverConfig)
    let receiver = try MediaReceiver(config: receiverConfig)
    let collected = Mutex<[DepacketizedAccessUnit]>([])
    let receiverDone = DispatchSemaphore(value: 0)
    let count = frameLimit ?? units.count
    Thread {
        try? receiver.run(frameLimit: count) { unit in collected.withLock { $0.append(unit) } }
        receiverDone.signal()
    }.start()
    config.destination = receiver.localAddress
    config.mtu = mtu
    config.paceBitsPerSecond = pace
    config.maxQueuedFrames = units.count
    let sender = try MediaSender(config: config)
    for unit in units { sender.send(unit) }
    sender.finish()
    try sender.run()
    if receiverDone.wait(timeout: .now() + 20) == .timedOut { receiver.stop(); receiverDone.wait() }
    return (collected.withLock { $0 }, sender.stats, receiver.stats)
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct MediaLoopbackTests {
    /// 300 x265 frames through the whole engine at MTU 1500 and 1280: the received Annex B
    /// stream is byte-identical frame by frame, and no datagram exceeded the MTU.
    @Test(arguments: [1500, 1280])
    func encodedStreamArrivesByteIdentical(mtu: Int) throws {
        let units = try encodeSynthetic(count: 300)
        try #require(units.count == 300)
        let result = try sendThroughEngine(units, mtu: .fixed(mtu))
        #expect(result.received.count == 300)
        #expect(result.received.allSatisfy { $0.isComplete })
        for (sent, got) in zip(units, result.received) where sent.annexB != got.annexB {
            Issue.record("frame at timestamp \(sent.timestamp) differs")
            break
        }
        #expect(result.received.map(\.annexB) == units.map(\.annexB))
        #expect(result.sender.framesSent == 300)
        #expect(result.sender.packetsSent == result.receiver.received)
        #expect(result.sender.datagramSize <= mtu - 28)
        #expect(result.sender.datagramSize >= mtu - 28 - 10)  // big frames fill the MTU
        #expect(result.sender.clamped == 0)
        #expect(result.sender.pathMTU == mtu)
        #expect(result.sender.mtuSource == .configured)
        #expect(result.receiver.lost == 0)
        #expect(result.receiver.framesComplete == 300)
        #expect(result.receiver.ecn[Int(ECNCodepoint.ect0.rawValue)] == result.receiver.received)
        #expect(result.receiver.dscp[34] == result.receiver.received)
        #expect(result.sender.gsoSends > 0 || !UDPSocket.kernelSupportsGSO)
    }
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct PlayoutFrameLimitTests {
    /// With a playout latency, frames wait after they are whole; a frame limit reached while
    /// later frames wait delivers exactly the limit (the rest come out at the end, undelivered).
    @Test func aFrameLimitDeliversNoFrameHeldForPlayout() throws {
        let units = try encodeSynthetic(count: 20, width: 320, height: 240, bitrateKbps: 500)
        func playout(_ sender: inout MediaSenderConfig, _ receiver: inout MediaReceiverConfig) {
            // A sender with retransmission lingers `rtxTime` (500 ms) after its last packet
            // before its BYE, which would release the frames still waiting at once.
            sender.retransmission = true
            receiver.feedback = true
            receiver.retransmission = true
            receiver.latency = .milliseconds(300)
        }
        let all = try sendThroughEngine(units, mtu: .fixed(1500), configure: playout)
        #expect(all.received.count == 20 && all.receiver.playoutAddedLatencyMs?.frames == 20)
        // Served at the next wake-up up to the loop's slack after it, a frame never goes out
        // before its playout time (the histogram reads a sample to within 1 %).
        #expect((all.receiver.playoutAddedLatencyMs?.p50 ?? 0) >= 297)
        let three = try sendThroughEngine(units, mtu: .fixed(1500), frameLimit: 3, configure: playout)
        // The frames after the third were whole, still waiting for their playout time.
        #expect(three.received.count == 3 && three.receiver.framesComplete > 3)
    }

    /// A deadline is served up to a quarter of the report interval late, never more than 5 ms
    /// (about one frame at 240 fps, what lets the next frame's wake-up serve it), and only while
    /// datagrams come that often: at 30 fps, on time.
    @Test func theReceiveLoopServesADeadlineAtMostAFrameLate() {
        let at240fps: Int64 = 4_166_667
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), datagramInterval: at240fps) == 5_000_000)
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .seconds(1)), datagramInterval: at240fps) == 5_000_000)
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(8)), datagramInterval: 1_000_000) == 2_000_000)
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(8)), datagramInterval: at240fps) == 0)
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), datagramInterval: 33_333_333) == 0)
        #expect(MediaReceiver.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), datagramInterval: .max) == 0)
    }
}
