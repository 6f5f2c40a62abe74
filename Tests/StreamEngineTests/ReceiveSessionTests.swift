import MediaFormats
import StreamEngine
import Testing
import TestSupport
import UringIO

/// The receive session driven with synthetic packet sequences and a fake clock: no sockets.
@Suite struct ReceiveSessionTests {
    static let sender = SocketAddress(ip: "10.0.0.2", port: 5004)!
    static let stranger = SocketAddress(ip: "10.0.0.3", port: 5004)!
    static let ssrc: UInt32 = 0x5EED_0001
    /// Where the fake clock starts: a realtime value (2026), as kernel timestamps are.
    static let start: Int64 = 1_780_000_000_000_000_000
    static let millisecond: Int64 = 1_000_000

    /// One frame as sent: the access unit and its datagrams (RTP header + RFC 7798 payload).
    struct Frame {
        var unit: AccessUnit
        var datagrams: [[UInt8]]
    }

    /// `count` frames 3000 ticks apart: a keyframe (VPS, SPS, PPS, IDR) every `keyframeEvery`,
    /// P slices between, several of them larger than one packet (fragmented).
    static func stream(frames count: Int, firstSequence: UInt16 = 1000, firstTimestamp: UInt32 = 90_000,
                       ssrc: UInt32 = ssrc, keyframeEvery: Int = 10, seed: UInt64 = 1) -> [Frame] {
        var rng = SplitMix64(seed: seed)
        let packetizer = try! HEVCPacketizer(maxPayloadSize: 1200)
        var sequence = firstSequence
        var frames: [Frame] = []
        for index in 0..<count {
            func nal(_ type: UInt8, _ size: Int) -> [UInt8] {
                [type << 1, 1] + (0..<size).map { _ in UInt8.random(in: 1...255, using: &rng) }
            }
            let keyframe = index % keyframeEvery == 0
            let nals = keyframe ? [nal(32, 20), nal(33, 40), nal(34, 8), nal(19, 3000 + index)]
                                : [nal(1, [200, 1500, 4000][index % 3] + index)]
            let unit = AccessUnit(nalUnits: nals, timestamp: firstTimestamp &+ UInt32(index) &* 3000, isKeyframe: keyframe)
            var datagrams: [[UInt8]] = []
            for payload in packetizer.plan(unit) {
                let header = RTPHeader(marker: payload.marker, payloadType: 96, sequenceNumber: sequence,
                                       timestamp: unit.timestamp, ssrc: ssrc)
                datagrams.append(header.bytes + packetizer.bytes(of: payload, of: unit))
                sequence &+= 1
            }
            frames.append(Frame(unit: unit, datagrams: datagrams))
        }
        return frames
    }

    /// The access units out are the frames sent (a Bool, so a failure prints no megabytes).
    static func same(_ units: [DepacketizedAccessUnit], _ frames: [Frame]) -> Bool {
        units.map(\.accessUnit) == frames.map(\.unit)
    }

    static func packetCount(_ frames: [Frame]) -> Int { frames.reduce(0) { $0 + $1.datagrams.count } }
    static func byteCount(_ frames: [Frame]) -> Int { frames.reduce(0) { $0 + $1.datagrams.reduce(0) { $0 + $1.count } } }

    /// A session, a fake clock, and everything it output.
    struct Harness {
        var session: ReceiveSession
        var now = ReceiveSessionTests.start
        var units: [DepacketizedAccessUnit] = []
        /// Each unit's time.
        var unitTimes: [Int64] = []
        var transmits: [ReceiveSession.Transmit] = []
        /// Each transmit's time.
        var transmitTimes: [Int64] = []

        init(feedback: Bool = true, rtcpMux: Bool = false, from: SocketAddress? = nil) {
            var config = MediaReceiverConfig(listen: SocketAddress(ip: "0.0.0.0", port: 5004)!)
            config.feedback = feedback
            config.rtcpMux = rtcpMux
            config.from = from
            session = ReceiveSession(config: config, ssrc: 0xFEED, cname: "test")
        }

        /// Delivers one datagram `step` after the last event, then runs the timeout if it is due.
        mutating func deliver(_ datagram: [UInt8], from source: SocketAddress = ReceiveSessionTests.sender, tos: UInt8 = 0,
                              port: ReceiveSession.Port = .rtp, step: Int64 = ReceiveSessionTests.millisecond,
                              completion: Int? = nil) {
            now += step
            datagram.withUnsafeBytes {
                session.handleDatagram($0, from: source, tos: tos, arrival: now, port: port, now: now, completion: completion)
            }
            drain()
            if let deadline = session.nextDeadline, now >= deadline {
                session.handleTimeout(now: now)
                drain()
            }
        }

        mutating func deliver(_ frames: [Frame]) {
            for frame in frames { for datagram in frame.datagrams { deliver(datagram) } }
        }

        mutating func finish() {
            session.finish(now: now)
            drain()
        }

        mutating func drain() {
            while let output = session.pollOutput() {
                switch output {
                case .accessUnit(let unit):
                    units.append(unit)
                    unitTimes.append(now)
                case .transmit(let transmit):
                    transmits.append(transmit)
                    transmitTimes.append(now)
                    session.recordFeedbackSend(succeeded: true)
                }
            }
        }

        /// Every RTCP packet sent, parsed.
        var feedbackPackets: [RTCPPacket] {
            transmits.flatMap { transmit in
                transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }
            }
        }
    }

    @Test func inOrderStreamIsDeliveredWhole() {
        let frames = Self.stream(frames: 30)
        var harness = Harness()
        harness.deliver(frames)
        harness.finish()
        let stats = harness.session.stats
        let packets = Self.packetCount(frames)
        #expect(packets > 60)  // fragmented frames
        #expect(Self.same(harness.units, frames))
        let sameBytes = harness.units.map(\.annexB) == frames.map(\.unit.annexB)
        #expect(sameBytes)
        #expect(harness.units.allSatisfy { $0.isComplete && $0.followsIntactChain })
        #expect(stats.received == packets && stats.lost == 0 && stats.late == 0 && stats.duplicate == 0)
        #expect(stats.bytesReceived == Self.byteCount(frames))
        #expect(stats.framesComplete == 30 && stats.framesIncomplete == 0 && stats.framesMissing == 0)
        #expect(stats.keyframes == 3 && stats.framesUndecodable == 0)
        #expect(stats.rejected.isEmpty)
        #expect(stats.ssrc == Self.ssrc && stats.source == Self.sender.description)
        #expect(stats.ecn[0] == packets && stats.dscp[0] == packets)
    }

    @Test func reorderedPacketsStillMakeWholeFrames() {
        let frames = Self.stream(frames: 30)
        var rng = SplitMix64(seed: 7)
        // Shuffled within each frame (a later frame complete behind a gap gives the gap up).
        let datagrams = frames.flatMap { $0.datagrams.shuffled(using: &rng) }
        var harness = Harness()
        for datagram in datagrams { harness.deliver(datagram) }
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, frames))
        #expect(harness.units.allSatisfy { $0.isComplete })
        #expect(stats.reordered > 0 && stats.lost == 0 && stats.received == datagrams.count)
        #expect(stats.framesComplete == 30 && stats.framesUndecodable == 0)
    }

    @Test func lossMakesFramesIncompleteOrMissingAndAsksForAKeyframe() {
        let frames = Self.stream(frames: 30, keyframeEvery: 15)
        var harness = Harness()
        var dropped = 0
        for (index, frame) in frames.enumerated() {
            for (packet, datagram) in frame.datagrams.enumerated() {
                // Frame 11 loses a middle fragment; frame 20 (one P slice) is lost whole.
                if (index == 11 && packet == 1) || index == 20 { dropped += 1; continue }
                harness.deliver(datagram)
            }
        }
        #expect(frames[11].datagrams.count >= 3)
        harness.deliver([], step: 300 * Self.millisecond)  // garbage, and time for a report
        harness.finish()
        let stats = harness.session.stats
        #expect(stats.lost == Int64(dropped))
        #expect(stats.received == Self.packetCount(frames) - dropped)
        // Frame 21 is incomplete too: the packets lost before it may have begun it.
        #expect(stats.framesComplete == 27 && stats.framesIncomplete == 2 && stats.framesMissing == 1)
        // Undecodable: frame 11 and the rest of its GOP (to 14); 21 to 29 after the missing one.
        #expect(stats.framesUndecodable == 4 + 9)
        let decodable = harness.units.filter(\.followsIntactChain).map(\.timestamp)
        let expected = frames.indices.filter { $0 < 11 || (15..<20).contains($0) }.map { frames[$0].unit.timestamp }
        #expect(decodable == expected)
        #expect(harness.units.count == 29)
        #expect(stats.rejected == [.rtp(.tooShort): 1])
        // One PLI (at most one per 200 ms) for the incomplete frames, for the stream's SSRC.
        let plis = harness.feedbackPackets.compactMap { packet -> RTCPPictureLossIndication? in
            if case .pictureLossIndication(let pli) = packet { return pli }
            return nil
        }
        #expect(plis == [RTCPPictureLossIndication(senderSSRC: 0xFEED, mediaSSRC: Self.ssrc)])
        #expect(stats.keyframeRequests == 1)
        // The receiver report counts the loss.
        let lastBlock = harness.feedbackPackets.compactMap { packet -> RTCPReportBlock? in
            if case .receiverReport(let report) = packet { return report.reportBlocks.first }
            return nil
        }.last
        #expect(lastBlock?.cumulativeLost == Int32(dropped))
    }

    /// A frame lost whole right after the first leaves the stream's first step between frames
    /// two intervals long, before any step of one: counted missing once the interval shows.
    @Test func aFrameLostRightAfterTheFirstIsCountedMissing() {
        let frames = Self.stream(frames: 10)
        var harness = Harness(feedback: false)
        for (index, frame) in frames.enumerated() where index != 1 {
            for datagram in frame.datagrams { harness.deliver(datagram) }
        }
        harness.finish()
        let stats = harness.session.stats
        // (Frame 2 is incomplete: the packets lost before it may have begun it.)
        #expect(stats.framesComplete == 8 && stats.framesIncomplete == 1 && stats.framesMissing == 1)
        #expect(harness.units.map(\.timestamp) == frames.indices.filter { $0 != 1 }.map { frames[$0].unit.timestamp })
    }

    /// The PLI or the keyframe it asked for may be lost: while no complete keyframe mends the
    /// chain, the request is repeated every second (not every 200 ms, which would ask again
    /// for a keyframe still on its way), and not after the chain is mended.
    @Test func aKeyframeRequestIsRepeatedWhileTheChainStaysBroken() {
        // 30 fps, keyframes at frames 0 and 60 only; frame 5 loses a middle fragment.
        let frames = Self.stream(frames: 90, keyframeEvery: 60)
        var harness = Harness()
        var pliTimes: [Int64] = []
        for (index, frame) in frames.enumerated() {
            for (packet, datagram) in frame.datagrams.enumerated() {
                if index == 5 && packet == 1 { continue }
                let transmitsBefore = harness.transmits.count
                harness.deliver(datagram, step: packet == 0 ? 33 * Self.millisecond : 0)
                for transmit in harness.transmits[transmitsBefore...] {
                    let packets = transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }
                    if packets.contains(where: { if case .pictureLossIndication = $0 { true } else { false } }) {
                        pliTimes.append(harness.now)
                    }
                }
            }
        }
        #expect(frames[5].datagrams.count >= 3)
        harness.finish()
        let stats = harness.session.stats
        #expect(stats.framesIncomplete == 1 && stats.framesComplete == 89)
        // Frames 5 to 59 undecodable (55 frames, ~1.8 s): the first request at frame 5, one
        // repeat a second later (the first frame more than 1 s after it), none after frame 60.
        #expect(stats.framesUndecodable == 55)
        #expect(pliTimes.count == 2 && stats.keyframeRequests == 2)
        if pliTimes.count == 2 {
            // Time moves only with packets here: a request is made when a frame is emitted (at
            // the next frame's first packet) and sent with the next feedback (by the next
            // packet after 20 ms): each lags its cause by at most one frame interval.
            let gap = pliTimes[1] - pliTimes[0]
            #expect(gap > 1_000 * Self.millisecond - 33 * Self.millisecond && gap <= 1_066 * Self.millisecond,
                    "\(pliTimes)")
        }
    }

    /// A receiver that starts listening within a keyframe: the datagram with its VPS, SPS and PPS
    /// went before, its slices arrive whole from their first packet. The frame is complete but
    /// not decodable (no parameter sets): the chain of references starts at the next keyframe.
    @Test func aKeyframeWithoutItsParameterSetsDoesNotStartTheChain() throws {
        let frames = Self.stream(frames: 30, keyframeEvery: 10)
        // The keyframe's first datagram holds the parameter sets (an AP), the IDR slice follows.
        let first = try #require(frames[0].datagrams.first)
        #expect(first.count < 100 && frames[0].datagrams.count >= 3)
        var harness = Harness()
        for datagram in frames[0].datagrams.dropFirst() { harness.deliver(datagram) }
        harness.deliver(Array(frames.dropFirst()))
        harness.finish()
        let stats = harness.session.stats
        let firstUnit = try #require(harness.units.first)
        #expect(firstUnit.isComplete && firstUnit.isKeyframe && !firstUnit.followsIntactChain)
        #expect(firstUnit.nalUnits.count == 1)
        let decodable = harness.units.filter(\.followsIntactChain).map(\.timestamp)
        #expect(decodable == frames[10...].map(\.unit.timestamp))
        #expect(stats.framesComplete == 30 && stats.framesUndecodable == 10)
        // From the start, the same stream is decodable from its first frame.
        var whole = Harness()
        whole.deliver(frames)
        whole.finish()
        #expect(whole.units.count == 30 && whole.units.allSatisfy(\.followsIntactChain))
    }

    @Test func duplicatesAreCountedAndDroppedOnce() {
        let frames = Self.stream(frames: 20)
        var harness = Harness()
        var duplicates = 0
        for (index, datagram) in frames.flatMap(\.datagrams).enumerated() {
            harness.deliver(datagram)
            if index % 3 == 0 {
                harness.deliver(datagram)
                duplicates += 1
            }
        }
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, frames))
        #expect(harness.units.allSatisfy { $0.isComplete })
        #expect(stats.duplicate == duplicates && stats.received == Self.packetCount(frames))
        #expect(stats.lost == 0 && stats.framesComplete == 20)
    }

    @Test func sequenceNumbersWrapWithoutALoss() {
        let frames = Self.stream(frames: 30, firstSequence: 65_500)
        var harness = Harness()
        harness.deliver(frames)
        harness.finish()
        let stats = harness.session.stats
        #expect(frames.flatMap(\.datagrams).count > 36)  // past 65535
        #expect(Self.same(harness.units, frames))
        #expect(harness.units.last!.lastSequence > 65_535)
        #expect(stats.lost == 0 && stats.late == 0 && stats.framesComplete == 30)
    }

    /// The sender restarts its sequence numbers (same SSRC): the first packet far off is kept
    /// aside, the second in sequence makes the session follow, and both go into the frames.
    @Test func aSenderThatRestartsItsSequenceIsFollowed() {
        let before = Self.stream(frames: 10, firstSequence: 1000)
        let after = Self.stream(frames: 10, firstSequence: 40_000, firstTimestamp: 90_000 + 10 * 3000, seed: 2)
        var harness = Harness()
        harness.deliver(before)
        harness.deliver(after)
        harness.finish()
        let stats = harness.session.stats
        let packets = Self.packetCount(before + after)
        #expect(Self.same(harness.units, before + after))
        #expect(harness.units.allSatisfy { $0.isComplete && $0.followsIntactChain })
        #expect(stats.received == packets && stats.lost == 0)
        #expect(stats.rejected == [.sequenceJump: 1])  // the first one, until the second showed a restart
        #expect(stats.framesComplete == 20 && stats.framesMissing == 0)
        #expect(stats.bytesReceived == Self.byteCount(before + after))  // the first one's counted once
    }

    /// A new sender (another SSRC) on the same address is not followed: the session stays
    /// locked on the first stream, and counts the other's packets.
    @Test func anotherSSRCIsCountedNotFollowed() {
        let first = Self.stream(frames: 10)
        let other = Self.stream(frames: 10, firstSequence: 7, ssrc: 0xBAD, seed: 3)
        var harness = Harness()
        harness.deliver(first)
        harness.deliver(other)
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, first))
        #expect(stats.rejected == [.foreignSSRC: Self.packetCount(other)])
        #expect(stats.ssrc == Self.ssrc)
    }

    /// A sender whose RTP clock jumps by 100 s (wall-clock timestamps across a pause): one
    /// stray far off is rejected; two packets in sequence on the new clock are followed.
    @Test func aClockThatJumpsIsFollowedAfterTwoPacketsInSequence() {
        let before = Self.stream(frames: 10, firstSequence: 100)
        let lastSequence = UInt16(100 + Self.packetCount(before))
        let after = Self.stream(frames: 10, firstSequence: lastSequence, firstTimestamp: 90_000 + 10 * 3000 + 9_000_000,
                                keyframeEvery: 5, seed: 4)
        var stray = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 500, timestamp: 50_000_000, ssrc: Self.ssrc).bytes
        stray += [19 << 1, 1, 0x80]
        var harness = Harness()
        harness.deliver(before)
        harness.deliver(stray)
        harness.deliver(after)
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, before + after))
        #expect(harness.units.allSatisfy { $0.isComplete })
        #expect(stats.timestampRestarts == 1 && stats.rejected == [.timestampJump: 1])
        #expect(stats.received == Self.packetCount(before + after) && stats.lost == 0)
    }

    /// A flood of foreign datagrams (another address, another SSRC, another payload type,
    /// garbage) among the stream: each counted by its reason, none in the frames, and the
    /// session's memory does not grow with them (the outputs are drained each time).
    @Test func floodsOfForeignPacketsAreCountedByReason() {
        let frames = Self.stream(frames: 20)
        var rng = SplitMix64(seed: 5)
        var harness = Harness()
        var sent: [ReceiveRejection: Int] = [:]
        func foreign(_ index: Int) -> (bytes: [UInt8], from: SocketAddress, reason: ReceiveRejection?) {
            let valid = frames[index % frames.count].datagrams[0]
            switch index % 6 {
            case 0: return (valid, Self.stranger, .foreignSource)
            case 1:
                var bytes = valid
                bytes[8] ^= 0xFF  // SSRC
                return (bytes, Self.sender, .foreignSSRC)
            case 2:
                var bytes = valid
                bytes[1] = bytes[1] & 0x80 | 97
                return (bytes, Self.sender, .unexpectedPayloadType)
            case 3:
                let bytes = (0..<Int.random(in: 0...11, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                return (bytes, Self.sender, .rtp(.tooShort))
            case 4:
                // The stream's SSRC, far from its sequence numbers (even ones: never two in a
                // row, which would be a restart).
                var bytes = valid
                let far = UInt16(30_000 + (2 * index) % 20_000)
                bytes[2] = UInt8(far >> 8)
                bytes[3] = UInt8(far & 0xFF)
                return (bytes, Self.sender, .sequenceJump)
            default:
                var bytes = (0..<40).map { _ in UInt8.random(in: 0...255, using: &rng) }
                bytes[0] = 0x40  // version 1
                return (bytes, Self.sender, .rtp(.badVersion))
            }
        }
        harness.deliver(frames[0].datagrams[0])  // the stream comes first and is locked onto
        var floodIndex = 0
        for datagram in frames.flatMap(\.datagrams).dropFirst() {
            for _ in 0..<200 {
                let flood = foreign(floodIndex)
                floodIndex += 1
                harness.deliver(flood.bytes, from: flood.from, step: 1000)
                if let reason = flood.reason { sent[reason, default: 0] += 1 }
            }
            harness.deliver(datagram)
        }
        harness.finish()
        let stats = harness.session.stats
        #expect(floodIndex == 200 * (Self.packetCount(frames) - 1))
        #expect(stats.rejected == sent)
        #expect(Self.same(harness.units, frames))
        #expect(stats.received == Self.packetCount(frames) && stats.lost == 0)
        #expect(stats.bytesReceived == Self.byteCount(frames))
        // Nothing of the flood was kept: the RFC 8888 feedback holds only the stream's packets.
        let reported = harness.feedbackPackets.reduce(0) { total, packet in
            guard case .congestionControlFeedback(let feedback) = packet else { return total }
            return total + feedback.reports.reduce(0) { $0 + $1.metrics.filter(\.received).count }
        }
        #expect(reported == stats.received)
    }

    /// Until a stream is locked nothing is reported, and `from` locks onto one address only.
    @Test func fromLocksOntoOneAddress() {
        let frames = Self.stream(frames: 5)
        var harness = Harness(from: Self.stranger)
        #expect(harness.session.nextDeadline == nil)
        harness.deliver(frames)
        #expect(harness.session.nextDeadline == nil && harness.transmits.isEmpty)
        harness.finish()
        #expect(harness.units.isEmpty && harness.transmits.isEmpty)
        #expect(harness.session.stats.rejected == [.foreignSource: Self.packetCount(frames)])
    }

    /// The sender's address changes mid-stream (a new source address on its path): the same
    /// SSRC continuing its sequence from the new address is followed, once, with nothing lost
    /// or rejected, and the feedback goes there from then on. Packets of the stream's SSRC
    /// from elsewhere that do not continue it (far ahead, another payload type), and any move
    /// when the user pinned the sender (`--from`), stay foreign.
    @Test func followsTheStreamToANewSourceAddress() {
        let moved = SocketAddress(ip: "10.0.0.4", port: 40_000)!
        let frames = Self.stream(frames: 20)
        var harness = Harness()
        harness.deliver(Array(frames.prefix(10)))
        let transmitsBefore = harness.transmits.count
        // Not a continuation: 600 packets ahead, or a probe/other payload type from there.
        var farAhead = frames[10].datagrams[0]
        farAhead[2] &+= 3
        harness.deliver(farAhead, from: moved)
        for datagram in frames.dropFirst(10).flatMap(\.datagrams) { harness.deliver(datagram, from: moved) }
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, frames))
        #expect(stats.sourceMoves == 1)
        #expect(stats.lost == 0 && stats.received == Self.packetCount(frames))
        #expect(stats.rejected == [.foreignSource: 1])
        #expect(stats.source == moved.description)
        let after = harness.transmits.dropFirst(transmitsBefore)
        #expect(!after.isEmpty && after.allSatisfy { $0.destination.host == moved.host && $0.destination.port == moved.port + 1 })
        // The reports the old address may have missed go to the new one again: every packet of
        // the last second before the move is confirmed there (the sender counts each once).
        var confirmedThere = Set<UInt16>()
        for transmit in after {
            for case .congestionControlFeedback(let report) in transmit.bytes.withUnsafeBytes({ RTCPPacket.parseCompound($0).packets }) {
                for stream in report.reports {
                    for (offset, metric) in stream.metrics.enumerated() where metric.received {
                        confirmedThere.insert(stream.beginSequence &+ UInt16(offset))
                    }
                }
            }
        }
        let beforeMove = frames.prefix(10).flatMap(\.datagrams).map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        #expect(Set(beforeMove).isSubset(of: confirmedThere))

        var pinned = Harness(from: Self.sender)
        pinned.deliver(Array(frames.prefix(10)))
        for datagram in frames.dropFirst(10).flatMap(\.datagrams) { pinned.deliver(datagram, from: moved) }
        #expect(pinned.session.stats.sourceMoves == 0)
        #expect(pinned.session.stats.rejected == [.foreignSource: Self.packetCount(Array(frames.dropFirst(10)))])
    }

    /// The GRO segments of one completion share their source, compared with the stream's once
    /// (`completion`): the accounting is that of the same datagrams delivered one by one. A
    /// completion from elsewhere has each of its segments counted foreign, a move inside a
    /// completion is followed once, and with `from` pinned every segment from elsewhere stays foreign.
    @Test func segmentsOfOneCompletionAreAccountedLikeSingleDatagrams() {
        let moved = SocketAddress(ip: "10.0.0.4", port: 40_000)!
        let frames = Self.stream(frames: 20)
        var farAhead = frames[10].datagrams[0]
        farAhead[2] &+= 3
        // (datagrams, source) per completion: ten frames from the sender, three far-ahead
        // copies from the new address, then the stream's next ten frames from there, two a completion.
        let completions = frames.prefix(10).map { ($0.datagrams, Self.sender) } + [([farAhead, farAhead, farAhead], moved)]
            + stride(from: 10, to: 20, by: 2).map { (frames[$0].datagrams + frames[$0 + 1].datagrams, moved) }
        // The move is proved, and followed, inside the first completion from there.
        #expect(completions[11].0.count > 3)  // ReceiveSession.moveEvidence
        func run(from pinned: SocketAddress?, numbered: Bool) -> (ReceiverStats, [DepacketizedAccessUnit]) {
            var harness = Harness(from: pinned)
            for (number, completion) in completions.enumerated() {
                for datagram in completion.0 {
                    harness.deliver(datagram, from: completion.1, completion: numbered ? number + 1 : nil)
                }
            }
            harness.finish()
            return (harness.session.stats, harness.units)
        }
        let (stats, units) = run(from: nil, numbered: true)
        #expect(Self.same(units, frames))
        #expect(stats.sourceMoves == 1 && stats.source == moved.description)
        #expect(stats.lost == 0 && stats.received == Self.packetCount(frames))
        #expect(stats.rejected == [.foreignSource: 3])
        let (oneByOne, _) = run(from: nil, numbered: false)
        #expect(oneByOne.rejected == stats.rejected && oneByOne.received == stats.received && oneByOne.sourceMoves == 1)
        let (pinned, pinnedUnits) = run(from: Self.sender, numbered: true)
        #expect(pinned.sourceMoves == 0 && pinned.source == Self.sender.description)
        #expect(pinned.rejected == [.foreignSource: 3 + Self.packetCount(Array(frames.dropFirst(10)))])
        #expect(pinnedUnits.count == 10)
    }

    /// Feedback goes to the sender's RTP port + 1 (the same port with rtcp-mux), every
    /// report interval while packets arrive, every 250 ms without them, and not before its
    /// deadline.
    @Test(arguments: [false, true]) func feedbackIsSentOnScheduleToTheRightPort(rtcpMux: Bool) {
        let frames = Self.stream(frames: 40)
        var harness = Harness(rtcpMux: rtcpMux)
        for datagram in frames.flatMap(\.datagrams) { harness.deliver(datagram, step: 2 * Self.millisecond) }
        let expectedPort = rtcpMux ? Self.sender.port : Self.sender.port + 1
        #expect(!harness.transmits.isEmpty)
        #expect(harness.transmits.allSatisfy { $0.destination.port == expectedPort && $0.destination.host == Self.sender.host })
        // While packets arrive: one report per 20 ms interval (the default), never closer.
        let gaps = zip(harness.transmitTimes.dropFirst(), harness.transmitTimes).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= 20 * Self.millisecond && $0 <= 22 * Self.millisecond }, "\(gaps)")
        // Each report: RR with a block for the stream, SDES, and the packets since the last one.
        let packets = harness.feedbackPackets
        #expect(packets.contains { if case .sourceDescription = $0 { true } else { false } })
        // Silence: nothing before the deadline, then a report every 250 ms.
        let last = harness.transmits.count
        let deadline = harness.session.nextDeadline!
        harness.session.handleTimeout(now: deadline - 1)
        harness.drain()
        #expect(harness.transmits.count == last)
        // The last packets are news: reported at the report interval, then silence rules.
        harness.now = deadline
        harness.session.handleTimeout(now: harness.now)
        harness.drain()
        #expect(harness.transmits.count == last + 1)
        let quiet = harness.session.nextDeadline!
        #expect(quiet == deadline + 250 * Self.millisecond)
        harness.now = quiet
        harness.session.handleTimeout(now: harness.now)
        harness.drain()
        #expect(harness.transmits.count == last + 2)
        // The end: a last report whatever the time.
        harness.finish()
        #expect(harness.transmits.count == last + 3)
        #expect(harness.session.stats.feedbackSent == last + 3)
    }

    /// A file at 30 fps paced out in bursts (`Pacer.fixedPaceQuantum`): each frame of two or more
    /// packets comes in two bursts 10 ms apart, frames 33.3 ms apart, and a sender report now
    /// and then between them. The loop serves every deadline at its time (as
    /// `MediaReceiver`'s would). One report per frame, each at the arrival of the frame's last
    /// packet, none between frames (each would be a wake-up of the receiver and one of the
    /// sender): each frame's first burst used to be reported at once and its tail 20 ms later,
    /// and a sender report 20 ms after the last report. Every packet is reported, and every sender
    /// report answered (its LSR in the next report), its hold time in the DLSR.
    @Test func aFramePacedInBurstsIsReportedOnceAtItsEnd() throws {
        let frames = Self.stream(frames: 30, keyframeEvery: 1000)
        var harness = Harness()
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        let frameInterval: Int64 = 33_333_333
        var events: [(time: Int64, datagram: [UInt8], port: ReceiveSession.Port, frameEnd: Bool)] = []
        var senderReports: [(time: Int64, ntp: UInt64)] = []
        for (index, frame) in frames.enumerated() {
            let start = Self.start + Int64(index) * frameInterval
            let firstBurst = max(1, frame.datagrams.count / 2)
            for (position, datagram) in frame.datagrams.enumerated() {
                let time = start + (position < firstBurst ? 0 : 10 * Self.millisecond) + Int64(position) * 10_000
                events.append((time, datagram, .rtp, position == frame.datagrams.count - 1))
            }
            if index % 3 == 1 {  // a sender report 15 ms after a frame began: 5 ms after its tail
                let ntp = UInt64(0x1000_0000_0000 + index) << 16
                senderReports.append((start + 15 * Self.millisecond, ntp))
                events.append((start + 15 * Self.millisecond, RTCPCompoundBuilder.build([.senderReport(RTCPSenderReport(
                    ssrc: Self.ssrc, ntpTimestamp: ntp, rtpTimestamp: 0, packetCount: 1, octetCount: 1))]), .rtcp, false))
            }
        }
        events.sort { $0.time < $1.time }
        var frameEnds: Set<Int64> = []
        for event in events {
            // Deadlines up to the event, each at its own time.
            while let deadline = harness.session.nextDeadline, deadline < event.time {
                harness.now = max(harness.now, deadline)
                harness.session.handleTimeout(now: harness.now)
                harness.drain()
            }
            harness.deliver(event.datagram, from: event.port == .rtcp ? rtcpSource : Self.sender, port: event.port,
                            step: event.time - harness.now)
            if event.frameEnd { frameEnds.insert(event.time) }
        }
        #expect(harness.units.count == frames.count)
        // The stream's first packet is reported at once (the sender learns of its receiver), the
        // rest of the first frame an interval later; from the second frame on, one per frame.
        let times = harness.transmitTimes.map { ($0 - Self.start) / 100_000 }  // 0.1 ms
        #expect(harness.transmitTimes.first == Self.start && harness.transmitTimes.dropFirst().first == Self.start + 20 * Self.millisecond, "\(times)")
        #expect(harness.transmits.count == frames.count + 1, "\(times)")
        #expect(harness.transmitTimes.dropFirst(2).allSatisfy { frameEnds.contains($0) }, "\(times)")
        let packets = harness.feedbackPackets
        var reported: [Int] = []
        for case .congestionControlFeedback(let ccfb) in packets {
            for report in ccfb.reports {
                for (offset, metric) in report.metrics.enumerated() where metric.received {
                    reported.append(Int(report.beginSequence) + offset)
                }
            }
        }
        #expect(reported == Array(1000..<(1000 + Self.packetCount(frames))))
        // Each sender report's first answer: its LSR, and the time it was held as its DLSR (1/65,536 s).
        var answers: [UInt32: (time: Int64, delay: UInt32)] = [:]
        for (transmit, time) in zip(harness.transmits, harness.transmitTimes) {
            for case .receiverReport(let report) in transmit.bytes.withUnsafeBytes({ RTCPPacket.parseCompound($0).packets }) {
                if let block = report.reportBlocks.first, block.lastSR != 0, answers[block.lastSR] == nil {
                    answers[block.lastSR] = (time, block.delaySinceLastSR)
                }
            }
        }
        #expect(answers.count == senderReports.count)
        for report in senderReports {
            let answer = try #require(answers[UInt32(truncatingIfNeeded: report.ntp >> 16)])
            let held = (answer.time - report.time) * 65_536 / 1_000_000_000
            #expect(answer.time > report.time && abs(Int64(answer.delay) - held) <= 1, "\(answer) \(report)")
        }
    }

    /// Two sender reports back to back right behind a frame's last packet, whose report has
    /// just gone (a draining queue delivers them so when no media left between them): the
    /// first is answered before the second replaces it, so each gives the sender its RTT
    /// sample. Early answers stay at most one a quarter interval however many reports come.
    @Test func senderReportsBackToBackBehindAFramesReportAreEachAnswered() throws {
        let frames = Self.stream(frames: 8, keyframeEvery: 1000)
        var harness = Harness()
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        func deliverFrame(_ frame: Frame) {
            for (index, datagram) in frame.datagrams.enumerated() {
                harness.deliver(datagram, step: index == 0 ? 33 * Self.millisecond : 10_000)
            }
        }
        func senderReport(_ index: Int) -> (bytes: [UInt8], lastSR: UInt32) {
            let ntp = UInt64(0x2000_0000_0000 + index) << 16
            return (RTCPCompoundBuilder.build([.senderReport(RTCPSenderReport(
                ssrc: Self.ssrc, ntpTimestamp: ntp, rtpTimestamp: 0, packetCount: 1, octetCount: 1))]),
                    UInt32(truncatingIfNeeded: ntp >> 16))
        }
        func answered() -> Set<UInt32> {
            Set(harness.feedbackPackets.compactMap { packet -> UInt32? in
                if case .receiverReport(let report) = packet { return report.reportBlocks.first?.lastSR }
                return nil
            })
        }
        for frame in frames.prefix(4) { deliverFrame(frame) }
        try #require(harness.transmitTimes.last == harness.now, "a report at the frame's last packet")
        let pair = [senderReport(1), senderReport(2)]
        harness.deliver(pair[0].bytes, from: rtcpSource, port: .rtcp, step: 300_000)
        harness.deliver(pair[1].bytes, from: rtcpSource, port: .rtcp, step: 300_000)
        for frame in frames[4..<6] { deliverFrame(frame) }
        #expect(answered().isSuperset(of: pair.map(\.lastSR)), "answered \(answered())")
        // A flood: 50 reports 0.1 ms apart, 5 ms in all, then the rest of the stream.
        let before = harness.transmits.count
        let flood = (10..<60).map(senderReport)
        for report in flood { harness.deliver(report.bytes, from: rtcpSource, port: .rtcp, step: 100_000) }
        #expect(harness.transmits.count - before <= 2, "\(harness.transmits.count - before) reports for 50 sender reports in 5 ms")
        for frame in frames[6...] { deliverFrame(frame) }
        harness.finish()
        #expect(answered().contains(flood.last!.lastSR))
        #expect(harness.session.stats.senderReports == 52)
    }

    /// Each sender report is answered (LSR = its NTP timestamp's middle bits), RTCP from
    /// another host is counted and ignored, and a probe is confirmed without being media.
    @Test func senderReportsAreAnsweredAndProbesConfirmed() {
        let frames = Self.stream(frames: 5)
        var harness = Harness()
        harness.deliver(frames)
        let ntp: UInt64 = 0x1234_5678_9ABC_DEF0
        let report = RTCPCompoundBuilder.build([.senderReport(RTCPSenderReport(
            ssrc: Self.ssrc, ntpTimestamp: ntp, rtpTimestamp: 0, packetCount: 1, octetCount: 1))])
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        harness.deliver(report, from: Self.stranger, port: .rtcp)
        harness.deliver(report, from: rtcpSource, port: .rtcp, step: 30 * Self.millisecond)
        let probe = PathMTUProbe(probeID: 42, size: 1400, ssrc: Self.ssrc).bytes
        harness.deliver(probe)
        harness.deliver([], step: 30 * Self.millisecond)
        let stats = harness.session.stats
        #expect(stats.senderReports == 1 && stats.probesReceived == 1)
        #expect(stats.rejected == [.rtcpForeignSource: 1, .rtp(.tooShort): 1])
        #expect(stats.received == Self.packetCount(frames))
        let blocks = harness.feedbackPackets.compactMap { packet -> RTCPReportBlock? in
            if case .receiverReport(let report) = packet { return report.reportBlocks.first }
            return nil
        }
        #expect(blocks.last?.lastSR == UInt32(truncatingIfNeeded: ntp >> 16))
        let confirmations = harness.feedbackPackets.compactMap { packet -> RTCPPathMTUConfirmation? in
            if case .application(let app) = packet { return RTCPPathMTUConfirmation(app) }
            return nil
        }
        #expect(confirmations.flatMap(\.entries) == [.init(probeID: 42, size: 1400)])
    }

    /// A sender report that came before the stream's first packet (ffmpeg sends its first one
    /// so) is taken once the stream locks, if it came from the stream's host within 2 s: not
    /// counted foreign, answered, an RTT sample. From another host, or older, it stays foreign.
    @Test func aSenderReportBeforeTheFirstPacketIsTakenWhenTheStreamLocks() {
        let frames = Self.stream(frames: 3)
        let ntp: UInt64 = 0x1234_5678_9ABC_DEF0
        let report = RTCPCompoundBuilder.build([.senderReport(RTCPSenderReport(
            ssrc: Self.ssrc, ntpTimestamp: ntp, rtpTimestamp: 0, packetCount: 0, octetCount: 0))])
        var rtcpSource = Self.sender
        rtcpSource.port += 1
        func run(from: SocketAddress?, reportFrom source: SocketAddress, before step: Int64) -> (ReceiverStats, answered: Bool) {
            var harness = Harness(from: from)
            harness.deliver(report, from: source, port: .rtcp)
            harness.now += step
            harness.deliver(frames)
            harness.finish()
            let answered = harness.feedbackPackets.contains { packet in
                if case .receiverReport(let report) = packet { return report.reportBlocks.first?.lastSR == UInt32(truncatingIfNeeded: ntp >> 16) }
                return false
            }
            #expect(Self.same(harness.units, frames))
            return (harness.session.stats, answered)
        }
        let taken = run(from: nil, reportFrom: rtcpSource, before: 20 * Self.millisecond)
        #expect(taken.0.rejected.isEmpty && taken.0.senderReports == 1 && taken.answered, "\(taken.0.rejected)")
        let pinned = run(from: Self.sender, reportFrom: rtcpSource, before: 20 * Self.millisecond)
        #expect(pinned.0.rejected.isEmpty && pinned.0.senderReports == 1 && pinned.answered)
        let stranger = run(from: nil, reportFrom: Self.stranger, before: 20 * Self.millisecond)
        #expect(stranger.0.rejected == [.rtcpForeignSource: 1] && stranger.0.senderReports == 0 && !stranger.answered)
        let old = run(from: nil, reportFrom: rtcpSource, before: 2_100 * Self.millisecond)
        #expect(old.0.rejected == [.rtcpForeignSource: 1] && old.0.senderReports == 0 && !old.answered)
    }

    /// ECN and DSCP of each stream packet are counted from its TOS byte.
    @Test func trafficMarksAreCounted() {
        let frames = Self.stream(frames: 3)
        var harness = Harness(feedback: false)
        let datagrams = frames.flatMap(\.datagrams)
        for (index, datagram) in datagrams.enumerated() {
            harness.deliver(datagram, tos: index % 2 == 0 ? 34 << 2 | 2 : 46 << 2 | 3)  // AF41 ECT(0), EF CE
        }
        harness.finish()
        let stats = harness.session.stats
        let even = (datagrams.count + 1) / 2
        #expect(stats.ecn == [0, 0, even, datagrams.count - even])
        #expect(stats.dscp[34] == even && stats.dscp[46] == datagrams.count - even)
        #expect(harness.transmits.isEmpty && harness.session.nextDeadline == nil)
    }

    /// The marks are counted per accepted packet, also when they come in runs of one TOS byte
    /// (a completion's GRO segments) with rejected datagrams of the same mark between them,
    /// and when the stats are read in the middle of a run.
    @Test func trafficMarksCountAcceptedPacketsOfARun() {
        let datagrams = Self.stream(frames: 6).flatMap(\.datagrams)
        let af41ECT0: UInt8 = 34 << 2 | 2, efCE: UInt8 = 46 << 2 | 3
        var harness = Harness(feedback: false)
        for datagram in datagrams.prefix(5) { harness.deliver(datagram, tos: af41ECT0, completion: 1) }
        #expect(harness.session.stats.ecn == [0, 0, 5, 0] && harness.session.stats.dscp[34] == 5)
        var foreign = datagrams[5]
        foreign[8] ^= 0xFF  // SSRC
        harness.deliver(foreign, tos: af41ECT0, completion: 1)
        harness.deliver([0x80, 96], tos: af41ECT0, completion: 1)  // too short for RTP
        for datagram in datagrams[5..<8] { harness.deliver(datagram, tos: af41ECT0, completion: 1) }
        for datagram in datagrams[8...] { harness.deliver(datagram, tos: efCE, completion: 2) }
        harness.finish()
        let stats = harness.session.stats
        #expect(stats.rejected == [.foreignSSRC: 1, .rtp(.tooShort): 1])
        #expect(stats.ecn == [0, 0, 8, datagrams.count - 8])
        #expect(stats.dscp[34] == 8 && stats.dscp[46] == datagrams.count - 8 && stats.dscp.reduce(0, +) == datagrams.count)
    }
}
