import MediaFormats
@testable import StreamEngine
import Testing

/// A receiver that cannot decode asks for a keyframe: one that joined mid-stream (its first
/// frames follow no keyframe it has) as well as one whose chain broke.
extension ReceiveSessionTests {
    static func pictureLossRequests(_ harness: Harness) -> [(time: Int64, pli: RTCPPictureLossIndication)] {
        zip(harness.transmits, harness.transmitTimes).flatMap { transmit, time in
            transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }.compactMap { packet in
                if case .pictureLossIndication(let pli) = packet { return (time, pli) }
                return nil
            }
        }
    }

    /// Started within a group of pictures: the first frame, complete but after a keyframe this
    /// receiver never had, asks for one at once (not at the next regular keyframe, up to the
    /// group's length later); once asked, no more requests while the frames come within the
    /// repeat interval, none after the keyframe mends the chain.
    @Test func aReceiverThatJoinsMidStreamAsksForAKeyframe() {
        let frames = Self.stream(frames: 40, keyframeEvery: 30)
        var harness = Harness()
        for frame in frames[3..<40] {
            for datagram in frame.datagrams { harness.deliver(datagram, step: 2 * Self.millisecond) }
        }
        harness.deliver([], step: 300 * Self.millisecond)  // time for the last report
        harness.finish()
        let stats = harness.session.stats
        let requests = Self.pictureLossRequests(harness)
        #expect(requests.map(\.pli) == [RTCPPictureLossIndication(senderSSRC: 0xFEED, mediaSSRC: Self.ssrc)])
        #expect(stats.keyframeRequests == 1)
        // Asked within one report interval (20 ms) and a packet's step of the first frame out.
        let firstFrameOut = try! #require(harness.unitTimes.first)
        #expect(requests[0].time - firstFrameOut <= 22 * Self.millisecond, "\((requests[0].time - firstFrameOut) / Self.millisecond) ms")
        // Frames 3 to 29 undecodable; the keyframe at 30 starts the chain.
        #expect(stats.framesComplete == 37 && stats.framesUndecodable == 27)
        #expect(harness.units.filter(\.followsIntactChain).map(\.timestamp) == frames[30...].map(\.unit.timestamp))
    }

    /// Runs the session's timeouts as a receive loop would (at each deadline) for `duration`.
    static func idle(_ harness: inout Harness, for duration: Int64) {
        let end = harness.now + duration
        for _ in 0..<10_000 {
            guard let deadline = harness.session.nextDeadline, deadline <= end else { break }
            harness.now = max(harness.now, deadline)
            harness.session.handleTimeout(now: harness.now)
            harness.drain()
        }
        harness.now = end
    }

    /// The same with frames half a second apart: while the chain stays broken the request is
    /// repeated once a second (the request or its keyframe may have been lost), no more often.
    @Test func aReceiverStillWithoutAKeyframeAsksAgainEverySecond() {
        let frames = Self.stream(frames: 12, keyframeEvery: 10)
        var harness = Harness()
        for frame in frames[1..<10] {
            for datagram in frame.datagrams { harness.deliver(datagram) }
            Self.idle(&harness, for: 500 * Self.millisecond)
        }
        // Nine frames over 4.5 s: asked at the first and then every second or a little more
        // (at the first frame after the second has passed).
        let requests = Self.pictureLossRequests(harness)
        #expect((4...5).contains(requests.count), "\(requests.count) requests")
        let gaps = zip(requests.dropFirst(), requests).map { ($0.time - $1.time) / Self.millisecond }
        #expect(gaps.allSatisfy { $0 > 1_000 && $0 < 1_600 }, "\(gaps) ms")
        for datagram in frames[10...11].flatMap(\.datagrams) { harness.deliver(datagram) }
        Self.idle(&harness, for: 2_000 * Self.millisecond)
        #expect(Self.pictureLossRequests(harness).count == requests.count)
    }
}

extension ReceiveSessionTests {
    /// `frames` with frame `index` at RTP timestamp `timestamps[index]` (headers rewritten).
    static func retimed(_ frames: [Frame], _ timestamps: [UInt32]) -> [Frame] {
        zip(frames, timestamps).map { frame, timestamp in
            var frame = frame
            frame.unit.timestamp = timestamp
            frame.datagrams = frame.datagrams.map { datagram in
                var datagram = datagram
                datagram.replaceSubrange(4..<8, with: [UInt8(timestamp >> 24), UInt8(timestamp >> 16 & 0xFF),
                                                       UInt8(timestamp >> 8 & 0xFF), UInt8(timestamp & 0xFF)])
                return datagram
            }
            return frame
        }
    }

    /// A source that slows down (a camera at 30 fps, then 15 in the dark, then 10): with no
    /// packet lost no frame is missing, the chain stays intact and no keyframe is asked for;
    /// a frame lost whole is still counted, and breaks the chain until the next keyframe.
    @Test func aSourceThatSlowsDownMissesNoFrame() {
        var timestamps: [UInt32] = []
        var timestamp: UInt32 = 90_000
        for index in 0..<60 {
            timestamps.append(timestamp)
            timestamp += index < 20 ? 3000 : index < 40 ? 6000 : 9000
        }
        let frames = Self.retimed(Self.stream(frames: 60, keyframeEvery: 30), timestamps)
        var harness = Harness()
        harness.deliver(frames)
        harness.finish()
        var stats = harness.session.stats
        #expect(Self.same(harness.units, frames))
        #expect(stats.framesComplete == 60 && stats.framesMissing == 0 && stats.framesUndecodable == 0)
        #expect(harness.units.allSatisfy(\.followsIntactChain) && stats.keyframeRequests == 0)

        // Frame 45 (10 fps by then) lost whole: frame 46 is incomplete, and the chain broken to 59.
        var lossy = Harness()
        for (index, frame) in frames.enumerated() where index != 45 { lossy.deliver([frame]) }
        lossy.finish()
        stats = lossy.session.stats
        #expect(stats.framesComplete == 58 && stats.framesIncomplete == 1 && stats.framesMissing >= 1)
        #expect(stats.framesUndecodable == 14 && stats.keyframeRequests >= 1)
    }
}
