@testable import StreamEngine
import MediaFormats
import Testing
import UringIO

/// The receive session's loss recovery (playout buffer, NACK, RTX) driven by a simulated
/// link with a fake clock: no sockets.
@Suite struct LossRecoveryTests {
    typealias Frame = ReceiveSessionTests.Frame
    static let millisecond = ReceiveSessionTests.millisecond
    static let rtxSSRC: UInt32 = 0x0BAD_F00D

    /// A sender and a link around a receive session: originals on a schedule (some dropped),
    /// and answers to the session's NACKs (RFC 4588 RTX, or the original resent on the media
    /// SSRC) `rtxDelay` after each NACK, unless `answer` says no.
    struct Link {
        var harness: ReceiveSessionTests.Harness
        var rtxDelay: Int64 = 20 * LossRecoveryTests.millisecond
        var sameSSRC = false
        var answer: (UInt16) -> Bool = { _ in true }
        /// Originals by sequence number (what a sender's history holds).
        var history: [UInt16: [UInt8]] = [:]
        /// Where the sender sends from (originals and answers alike).
        var source = ReceiveSessionTests.sender
        var pending: [(time: Int64, datagram: [UInt8], source: SocketAddress)] = []
        var rtxSequence: UInt16 = 500
        /// Every sequence number a NACK asked for, with the time.
        var asked: [(time: Int64, sequence: UInt16)] = []
        /// Every NACK sent.
        var nacks: [RTCPGenericNACK] = []
        /// Each datagram is handed over in one receive buffer, overwritten after each (as a
        /// kernel buffer is reused for the next datagram).
        var reusesOneBuffer = false
        /// Times the session, its timeout just run with nothing handed to it since, still
        /// wanted to be woken at once: a receive loop would spin (the run takes such a deadline
        /// a millisecond later).
        private(set) var deadlinesMetAgain = 0
        private var transmitsSeen = 0
        /// When the last event, a timeout, ran (nil when a datagram came after it).
        private var lastTimeout: Int64?

        init(latency: Duration? = nil, rtxDelay: Int64 = 20 * LossRecoveryTests.millisecond) {
            self.rtxDelay = rtxDelay
            harness = ReceiveSessionTests.Harness()
            var config = harness.session.config
            config.retransmission = true
            config.latency = latency
            harness.session = ReceiveSession(config: config, ssrc: 0xFEED, cname: "test")
        }

        var stats: ReceiverStats { harness.session.stats }
        var units: [DepacketizedAccessUnit] { harness.units }

        /// Sends the datagrams one per `interval` from now; those at `drop` (indexes) are lost.
        mutating func send(_ datagrams: [[UInt8]], drop: Set<Int> = [], interval: Int64 = LossRecoveryTests.millisecond) {
            let start = max(harness.now, pending.last?.time ?? 0)
            for (index, datagram) in datagrams.enumerated() {
                let header = try! RTPHeader.parse(datagram).header
                history[header.sequenceNumber] = datagram
                if !drop.contains(index) { pending.append((start + Int64(index + 1) * interval, datagram, source)) }
            }
        }

        /// `datagram` arrives at `time` (from `source`), whatever was sent.
        mutating func arrive(_ datagram: [UInt8], at time: Int64) { pending.append((time, datagram, source)) }

        /// Runs events (arrivals and the session's timeouts) until nothing is pending and
        /// `quiet` has passed after the last one, then finishes the stream.
        mutating func run(quiet: Int64 = 1_000 * LossRecoveryTests.millisecond, finish: Bool = true) {
            var end = (pending.map(\.time).max() ?? harness.now) + quiet
            var receiveBuffer = [UInt8](repeating: 0x55, count: 65_536)
            while true {
                pending.sort { $0.time < $1.time }
                let arrival = pending.first?.time
                if let deadline = harness.session.nextDeadline, deadline <= (arrival ?? end) {
                    // A deadline the timeout just run left due is taken a millisecond later (no
                    // spin); one due since a datagram, at once.
                    let again = deadline <= harness.now && harness.now == lastTimeout
                    if again { deadlinesMetAgain += 1 }
                    harness.now = again ? harness.now + LossRecoveryTests.millisecond : max(deadline, harness.now)
                    if harness.now > end && arrival == nil { break }
                    lastTimeout = harness.now
                    harness.session.handleTimeout(now: harness.now)
                } else if let arrival {
                    harness.now = max(harness.now, arrival)
                    lastTimeout = nil
                    let (_, datagram, source) = pending.removeFirst()
                    if reusesOneBuffer {
                        let count = datagram.count
                        receiveBuffer.replaceSubrange(0..<count, with: datagram)
                        receiveBuffer.withUnsafeBytes {
                            harness.session.handleDatagram(UnsafeRawBufferPointer(rebasing: $0[0..<count]),
                                                           from: source, tos: 0,
                                                           arrival: harness.now, now: harness.now)
                        }
                        receiveBuffer.replaceSubrange(0..<count, with: repeatElement(0x55, count: count))
                    } else {
                        // The sender's RTCP (reports, BYE) comes on the RTCP port.
                        let port: ReceiveSession.Port = datagram.withUnsafeBytes { ReceiveSession.isMultiplexedRTCP($0) } ? .rtcp : .rtp
                        harness.session.handleDatagram(datagram, from: source, arrival: harness.now,
                                                       port: port, now: harness.now)
                    }
                    end = max(end, harness.now + quiet)
                } else {
                    break
                }
                harness.drain()
                answerNACKs()
            }
            if finish { harness.finish() }
        }

        private mutating func answerNACKs() {
            let new = harness.transmits[transmitsSeen...]
            transmitsSeen = harness.transmits.count
            for transmit in new {
                for packet in transmit.bytes.withUnsafeBytes({ RTCPPacket.parseCompound($0).packets }) {
                    guard case .genericNACK(let nack) = packet else { continue }
                    nacks.append(nack)
                    for sequence in nack.sequenceNumbers {
                        asked.append((harness.now, sequence))
                        guard answer(sequence), let original = history[sequence] else { continue }
                        pending.append((harness.now + rtxDelay, sameSSRC ? original : rtx(of: original), source))
                    }
                }
            }
        }

        /// The RFC 4588 retransmission of `original`.
        mutating func rtx(of original: [UInt8]) -> [UInt8] {
            rtxSequence &+= 1
            return LossRecoveryTests.rtx(of: original, sequence: rtxSequence)
        }
    }

    /// The RFC 4588 retransmission of `original`, numbered `sequence` on the RTX stream.
    static func rtx(of original: [UInt8], sequence rtxSequence: UInt16) -> [UInt8] {
        let parsed = try! RTPHeader.parse(original)
        let header = RTPHeader(marker: parsed.header.marker, payloadType: 97, sequenceNumber: rtxSequence,
                               timestamp: parsed.header.timestamp, ssrc: Self.rtxSSRC)
        let sequence = parsed.header.sequenceNumber
        return header.bytes + [UInt8(sequence >> 8), UInt8(sequence & 0xff)] + original[parsed.payloadRange]
    }

    static func stream(frames: Int) -> [Frame] { ReceiveSessionTests.stream(frames: frames, keyframeEvery: 15) }

    @Test(arguments: [false, true]) func lossIsRecoveredInTime(sameSSRC: Bool) {
        let frames = Self.stream(frames: 40)
        let datagrams = frames.flatMap(\.datagrams)
        // Single losses, a burst of three, the marker packet of a frame.
        let markers = frames.prefix(20).reduce(0) { $0 + $1.datagrams.count } - 1
        let drop: Set<Int> = [5, 17, 30, 31, 32, markers]
        var link = Link()
        link.sameSSRC = sameSSRC
        link.send(datagrams, drop: drop)
        link.run()
        let stats = link.stats
        #expect(ReceiveSessionTests.same(link.units, frames))
        #expect(link.units.allSatisfy { $0.isComplete && $0.followsIntactChain })
        // Originals lost stay lost; every one came back in time.
        #expect(stats.lost == Int64(drop.count) && stats.recovered == drop.count)
        #expect(stats.received == datagrams.count - drop.count)
        #expect(stats.framesComplete == 40 && stats.framesIncomplete == 0 && stats.framesLate == 0)
        #expect(stats.rtxReceived == drop.count && stats.rtxLate == 0 && stats.rtxDuplicate == 0)
        // Each asked once (the answer comes within the re-ask delay), nothing else asked.
        #expect(link.asked.map(\.sequence).sorted() == drop.sorted().map { UInt16(1000 + $0) })
        #expect(stats.nackRequested == drop.count && stats.nackSent == link.nacks.count)
        #expect(stats.rtxBytes == (sameSSRC ? 0 : drop.reduce(0) { $0 + datagrams[$1].count + 2 }))
        // RFC 4588 retransmissions are reported per packet under the RTX SSRC, so the sender
        // learns which arrived; originals resent on the media SSRC are not (they are not originals).
        let rtxReported = link.harness.feedbackPackets.flatMap { packet -> [UInt16] in
            guard case .congestionControlFeedback(let feedback) = packet else { return [] }
            return feedback.reports.filter { $0.mediaSSRC == Self.rtxSSRC }.flatMap { report in
                report.metrics.enumerated().filter(\.element.received).map { report.beginSequence &+ UInt16($0.offset) }
            }
        }
        #expect(rtxReported.sorted() == (sameSSRC ? [] : (0..<drop.count).map { 501 + UInt16($0) }))
        // The RTT is measured from NACK to retransmission; the latency follows it.
        let rtt = stats.retransmissionRTTMs ?? 0
        #expect(rtt >= 20 && rtt < 22)
        #expect(stats.playoutLatencyDerived && (stats.playoutLatencyMs ?? 0) >= 50)
    }

    /// The last packet sent from the sender's old source address is lost (its send failed as
    /// the address went) and the stream goes on from a new one: the receiver follows the stream
    /// there, asks for the packet there, and the answer from there completes the frame.
    @Test(arguments: [false, true]) func aPacketLostAsTheSenderMovesIsRecoveredFromItsNewAddress(sameSSRC: Bool) {
        let frames = Self.stream(frames: 30)
        let moved = SocketAddress(ip: "10.0.0.4", port: 40_000)!
        var link = Link()
        link.sameSSRC = sameSSRC
        let before = frames.prefix(10).flatMap(\.datagrams)
        link.send(before, drop: [before.count - 1])
        link.source = moved
        link.send(frames.dropFirst(10).flatMap(\.datagrams))
        link.run()
        let stats = link.stats
        #expect(stats.sourceMoves == 1 && stats.source == moved.description)
        #expect(ReceiveSessionTests.same(link.units, frames))
        #expect(stats.lost == 1 && stats.recovered == 1)
        #expect(stats.framesComplete == 30 && stats.framesIncomplete == 0 && stats.framesLate == 0)
        #expect(link.asked.map(\.sequence) == [UInt16(1000 + before.count - 1)])
        // The request went to the new address (its RTCP port).
        let nackDestinations = link.harness.transmits.filter { transmit in
            transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }.contains {
                if case .genericNACK = $0 { return true } else { return false }
            }
        }.map(\.destination)
        #expect(nackDestinations.count == 1 && nackDestinations.allSatisfy { $0.host == moved.host && $0.port == moved.port + 1 })
    }

    @Test func packetsAreReadOnlyDuringTheirInput() {
        // Packets released at once (read from the datagram) and packets held behind a gap
        // (kept) both come out intact when the receive buffer is reused for every datagram.
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link()
        link.reusesOneBuffer = true
        link.send(datagrams, drop: [3, 10, 11])
        link.run()
        #expect(ReceiveSessionTests.same(link.units, frames))
        #expect(link.units.allSatisfy { $0.isComplete })
        #expect(link.stats.recovered == 3 && link.stats.received == datagrams.count - 3)
    }

    @Test func theNACKGoesOnceThePacketIsBeyondTheReorderAllowance() {
        let frames = Self.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(rtxDelay: 10 * Self.millisecond)
        link.send(datagrams, drop: [8])
        link.run()
        // The NACK went when the third packet after it arrived (8 + 3 + 1 ms after the start),
        // before the 5 ms allowance ran out; the answer 10 ms later filled the frame, and the
        // frames after it waited for it, in order.
        #expect(ReceiveSessionTests.same(link.units, frames))
        #expect(link.asked.count == 1 && link.asked[0].time == ReceiveSessionTests.start + 12 * Self.millisecond)
    }

    /// The arrival time of each frame's first packet, with datagrams one per `interval` from `start`.
    static func firstArrivals(_ frames: [Frame], interval: Int64 = millisecond) -> [Int64] {
        var index = 0
        return frames.map { frame in
            defer { index += frame.datagrams.count }
            return ReceiveSessionTests.start + Int64(index + 1) * interval
        }
    }

    @Test func aFrameCompleteEarlyIsReleasedAtItsFirstPacketPlusTheLatency() {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100))
        // One loss (in frame 2), answered 20 ms after its NACK: that frame is whole long before its time too.
        link.send(datagrams, drop: [frames[0].datagrams.count + frames[1].datagrams.count + 1])
        link.run(finish: false)
        #expect(link.units.count == 20 && link.units.allSatisfy(\.isComplete) && link.stats.recovered == 1)
        // Every frame waits for its playout time, the latency after its first packet's arrival
        // (the fake clock takes a deadline met twice a millisecond later), never less.
        let latency = 100 * Self.millisecond
        for (released, first) in zip(link.harness.unitTimes, Self.firstArrivals(frames)) {
            #expect(released >= first + latency && released <= first + latency + Self.millisecond)
        }
        let added = try! #require(link.stats.playoutAddedLatencyMs)
        #expect(added.frames == 20 && added.p50 >= 100 && added.p50 <= 101 && added.max <= 101)
    }

    /// Many outputs of one input are each polled once, in order: the stream ends while twelve
    /// frames wait for their playout time, so the end puts them all out at once, with a report.
    @Test func outputsOfOneInputArePolledOnceEachInOrder() {
        let frames = Self.stream(frames: 12)
        var link = Link(latency: .milliseconds(500))
        link.send(frames.flatMap(\.datagrams))
        link.run(quiet: 5 * Self.millisecond, finish: false)
        #expect(link.units.isEmpty)  // all still waiting
        let transmitsBefore = link.harness.transmits.count
        link.harness.finish()
        #expect(link.units.count == 12 && ReceiveSessionTests.same(link.units, frames))
        #expect(link.units.allSatisfy { $0.isComplete && $0.followsIntactChain })
        #expect(link.harness.transmits.count > transmitsBefore)  // the end's report, among the frames
        #expect(link.stats.framesComplete == 12)
    }

    @Test func aFrameCompletedAfterItsPlayoutTimeGoesOutWhenComplete() {
        let frames = Self.stream(frames: 12)
        let datagrams = frames.flatMap(\.datagrams)
        // A frame of 4 packets or more; its third packet is lost. Packets 5 ms apart: the gap is
        // seen 15 ms after the frame's first packet, asked for 5 ms later, and answered 85 ms
        // after that: past the frame's playout time (100 ms), before the gap's deadline
        // (100 ms after the gap was seen).
        let number = try! #require((1..<frames.count).first { frames[$0].datagrams.count >= 4 })
        let firstIndex = frames[..<number].reduce(0) { $0 + $1.datagrams.count }
        let interval = 5 * Self.millisecond
        var link = Link(latency: .milliseconds(100), rtxDelay: 85 * Self.millisecond)
        link.send(datagrams, drop: [firstIndex + 2], interval: interval)
        link.run(finish: false)
        #expect(link.units.count == 12 && link.units.allSatisfy(\.isComplete) && link.stats.recovered == 1)
        let first = Self.firstArrivals(frames, interval: interval)
        let released = link.harness.unitTimes
        let gapSeen = first[number] + 3 * interval
        #expect(released[number] > first[number] + 100 * Self.millisecond && released[number] < gapSeen + 100 * Self.millisecond)
        // The others at their time, in order.
        #expect(released.indices.allSatisfy { released[$0] >= first[$0] + 100 * Self.millisecond })
        #expect(zip(released, released.dropFirst()).allSatisfy { $0 <= $1 })
        let added = try! #require(link.stats.playoutAddedLatencyMs)
        #expect(abs(added.max * 1e6 - Double(released[number] - first[number])) < 1)
    }

    @Test func aRetransmissionAfterTheDeadlineIsLateAndTheFrameIncomplete() {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        // The path is slower than the receiver planned for.
        var link = Link(latency: .milliseconds(80), rtxDelay: 150 * Self.millisecond)
        let lostIndex = frames[0].datagrams.count + frames[1].datagrams.count + 1  // in frame 2
        link.send(datagrams, drop: [lostIndex])
        link.run()
        let stats = link.stats
        #expect(stats.lost == 1 && stats.recovered == 0 && stats.rtxLate >= 1)
        #expect(stats.framesIncomplete == 1 && stats.framesLate == 1 && stats.framesComplete == 19)
        #expect(link.units.count == 20 && !link.units[2].isComplete)
        // Frames after it were not held beyond its deadline, and nothing corrupt came out.
        #expect(link.units.enumerated().allSatisfy { $0.offset == 2 || $0.element.accessUnit == frames[$0.offset].unit })
        // Asked once; not again about an RTT (50 ms assumed) later: that answer could not
        // arrive before the deadline.
        #expect(link.asked.count == 1 && stats.nackAbandoned == 1)
    }

    /// The path's round trip (300 ms) is longer than the latency derived from the RTT assumed
    /// at the start (3 x 50 ms): the first loss's answer comes after its frame was given up. It
    /// still measures the round trip, the latency grows toward three of them, and a later loss is
    /// recovered in time. (Before, a late answer measured nothing, and every loss stayed lost.)
    /// Answers resent on the media SSRC likewise: a packet given up after it was asked for
    /// that then comes is taken for the first answer (an original that late says as much of
    /// the path).
    @Test(arguments: [false, true]) func aLateAnswerStillMeasuresTheRoundTrip(sameSSRC: Bool) {
        let frames = Self.stream(frames: 60)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(rtxDelay: 300 * Self.millisecond)
        link.sameSSRC = sameSSRC
        let first = frames[0].datagrams.count  // frame 1's first packet
        let later = frames.prefix(58).reduce(0) { $0 + $1.datagrams.count }  // frame 58's first
        link.send(datagrams, drop: [first, later], interval: 20 * Self.millisecond)
        link.run()
        let stats = link.stats
        // The first loss was asked for twice (63.5 ms apart, after the 50 ms assumed), both
        // answers late; the second once, its answer in time.
        #expect(link.asked.map(\.sequence) == [UInt16(1000 + first), UInt16(1000 + first), UInt16(1000 + later)])
        #expect(stats.lost == 2 && stats.rtxLate == 2 && stats.recovered == 1)
        #expect(stats.framesIncomplete == 1 && stats.framesComplete == 59)
        #expect(link.units.count == 60 && !link.units[1].isComplete && link.units[58].isComplete)
        // The first loss's answer, 300 ms after its first ask, may answer either ask: it tells
        // a round trip of at least 300 - 63.5 ms (`LossRecovery.noteRoundTrip`); the second loss,
        // asked once, 300 ms exactly.
        let rtt = stats.retransmissionRTTMs ?? 0
        #expect(rtt >= 236 && rtt < 302)
        // The target is three round trips; the latency in use is on its way there (100 ms per
        // second from 150 ms), past the one round trip the second loss needed.
        #expect(stats.playoutLatencyDerived && (stats.playoutLatencyTargetMs ?? 0) >= 3 * rtt)
        let latency = stats.playoutLatencyMs ?? 0
        #expect(latency > 400 && latency < (stats.playoutLatencyTargetMs ?? 0))
    }

    /// When the derived latency grows (the first answers on a 300 ms path measure its round
    /// trip: from 150 ms to ~750 ms), frames go out stretched, at 9/10 of their pace, until the
    /// latency reaches its target, and no frame waits much more than a frame interval after
    /// the one before it. Taking the target at once held the next frame ~800 ms: a freeze.
    @Test func aGrowingLatencyStretchesPlayoutInsteadOfFreezingIt() {
        let frames = Self.stream(frames: 420)
        var link = Link(rtxDelay: 300 * Self.millisecond)
        let frameInterval: Int64 = 1_000_000_000 / 30
        // Each frame's packets 1 ms apart from its capture time; frame 1's first packet and
        // frame 400's first packet are lost.
        var firstArrivals: [Int64] = []
        for (index, frame) in frames.enumerated() {
            let start = ReceiveSessionTests.start + Int64(index) * frameInterval
            firstArrivals.append(start + Self.millisecond)
            for (number, datagram) in frame.datagrams.enumerated() {
                link.history[try! RTPHeader.parse(datagram).header.sequenceNumber] = datagram
                if number == 0 && (index == 1 || index == 400) { continue }
                link.arrive(datagram, at: start + Int64(number + 1) * Self.millisecond)
            }
        }
        link.run(finish: false)
        let stats = link.stats
        #expect(link.units.count == 420 && stats.framesIncomplete == 1 && !link.units[1].isComplete)
        #expect(link.units[400].isComplete && stats.recovered == 1)
        // The latency went from 150 ms to its target (3 x the RTT measured and the jitter) and is there.
        // (The second loss's answer measured 300 ms; the first, asked twice before its answer came,
        // at least 236: `aLateAnswerStillMeasuresTheRoundTrip`.)
        let target = try! #require(stats.playoutLatencyTargetMs)
        #expect(target >= 3 * 236 && target < 1_000 && stats.playoutLatencyMs == target)
        let released = link.harness.unitTimes
        let gaps = zip(released, released.dropFirst()).map { Double($1 - $0) / 1e6 }
        // At most a frame interval stretched by 10/9 and a millisecond of the fake clock.
        #expect(gaps.max()! < 33.34 * 10 / 9 + 1, "longest gap \(gaps.max()!) ms")
        // Stretched while it grew: the added delay went up by ~100 ms per second of frames.
        let added = zip(released, firstArrivals).map { Double($0 - $1) / 1e6 }
        #expect(added[2] < 160 && abs(added[419] - target) < 1)
        // Frame 120 (4 s in) goes out at t with t − 4 s = 150 ms + (t − ~0.4 s) / 10, the
        // climb having begun with the first answer: ~570 ms (not 150, not the target).
        #expect(added[120] > 450 && added[120] < 700, "\(added[120]) ms")
    }

    @Test func aPacketStillMissingAfterAnRTTIsAskedAgain() {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(300), rtxDelay: 150 * Self.millisecond)
        link.send(datagrams, drop: [10])
        link.run()
        let stats = link.stats
        // Asked at 0, 63.5 and 127 ms (1.25 x the 50 ms assumed RTT + 1 ms); the first answer
        // (at 150 ms) fills the gap, the two others are duplicates.
        let times = link.asked.map(\.time)
        #expect(link.asked.allSatisfy { $0.sequence == 1010 } && times.count == 3)
        #expect(zip(times.dropFirst(), times).allSatisfy { $0 - $1 == 63_500_000 })
        #expect(stats.recovered == 1 && stats.rtxDuplicate == 2 && stats.lost == 1)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
    }

    @Test func theRTTDeviationDelaysReasksButNeverStopsAsks() {
        // 52 ms answers under a 100 ms latency: after the first one the RTT's deviation
        // (26 ms) puts RTT + 2 x deviation over the latency; the next losses are asked for all
        // the same (an answer in one RTT still arrives in time).
        let frames = Self.stream(frames: 40)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(latency: .milliseconds(100), rtxDelay: 52 * Self.millisecond)
        link.send(datagrams, drop: [5, 40, 80])
        link.run()
        #expect(link.stats.recovered == 3 && link.stats.nackAbandoned == 0)
        #expect(ReceiveSessionTests.same(link.units, frames))
    }

    @Test func nothingIsAskedThatCannotArriveBeforeItsDeadline() {
        let frames = Self.stream(frames: 10)
        var link = Link(latency: .milliseconds(30))  // shorter than the 50 ms RTT assumed
        link.send(frames.flatMap(\.datagrams), drop: [4, 9])
        link.run()
        let stats = link.stats
        #expect(link.nacks.isEmpty && stats.nackAbandoned == 2)
        #expect(stats.lost == 2 && stats.framesLate == stats.framesIncomplete && stats.framesIncomplete >= 1)
        #expect(link.units.count == 10)
    }

    @Test func reorderingWithinTheAllowanceAsksNothing() {
        let frames = Self.stream(frames: 30)
        var datagrams = frames.flatMap(\.datagrams)
        // Pairs swapped, and a packet three places late (within 3 packets and 5 ms).
        for index in stride(from: 3, to: datagrams.count - 10, by: 9) { datagrams.swapAt(index, index + 1) }
        #expect(datagrams.count > 60)
        datagrams.insert(datagrams.remove(at: 50), at: 52)
        var link = Link()
        link.send(datagrams)
        link.run()
        let stats = link.stats
        #expect(link.nacks.isEmpty && stats.nackRequested == 0)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
        #expect(stats.lost == 0 && stats.reordered > 0 && stats.late == 0)
    }

    /// A path that reorders by more than the allowance: every 20th packet comes 10 places (10 ms)
    /// late. The first is asked for (a spurious ask: its original arrives), and the allowance
    /// grows to cover it: none of the later ones is asked for. (A loss answered first shows the
    /// RTX stream; before it, an asked-for packet on the media SSRC is taken as a same-SSRC
    /// retransmission, which says nothing of reordering.)
    @Test func aPathThatReordersWidensTheReorderAllowance() {
        let frames = Self.stream(frames: 60)
        var datagrams = frames.flatMap(\.datagrams)
        var moved: [UInt16] = []
        for index in stride(from: 20, to: datagrams.count - 20, by: 20) {
            let packet = datagrams.remove(at: index)
            moved.append(try! RTPHeader.parse(packet).header.sequenceNumber)
            datagrams.insert(packet, at: index + 10)
        }
        #expect(moved.count >= 5)
        var link = Link()
        link.send(datagrams, drop: [2])
        link.run()
        let stats = link.stats
        #expect(Set(link.asked.map(\.sequence)) == [1002, moved[0]], "asked \(link.asked.map(\.sequence)) of \(moved)")
        #expect(stats.nackSpurious == 1 && stats.rtxDuplicate == 1 && stats.lost == 1 && stats.recovered == 1)
        #expect(stats.reordered >= moved.count)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
    }

    /// The original of a packet asked for comes after its retransmission (the path held it
    /// back past the ask and the answer): it was not lost, so nothing was recovered, and the
    /// ask was spurious. Counted as recovered, `recovered` exceeded `lost`.
    @Test func anOriginalAfterItsRetransmissionTakesTheRecoveryBack() {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link()
        link.send(datagrams, drop: [12])
        link.arrive(datagrams[12], at: link.harness.now + 90 * Self.millisecond)
        link.run()
        let stats = link.stats
        #expect(link.asked.map(\.sequence) == [1012])
        #expect(stats.rtxReceived == 1 && stats.recovered == 0 && stats.lost == 0 && stats.nackSpurious == 1)
        #expect(stats.late == 0 && stats.received == datagrams.count)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
    }

    /// A packet of the RTX payload type from an SSRC not known yet is the RTX stream's first
    /// only if it names a packet asked for: a stray one (another source of the same address, or
    /// forged) is foreign and does not shut the stream's own retransmissions out.
    @Test func aStrayRetransmissionDoesNotTakeTheRTXStream() {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link()
        link.send(datagrams, drop: [12])
        // Before the answer to the NACK for 1012: an RTX packet of another SSRC for a packet of no gap.
        let stray = RTPHeader(marker: false, payloadType: 97, sequenceNumber: 7, timestamp: 0, ssrc: 0xBAD0_0001).bytes
            + [0x9C, 0x40] + Array(repeating: 0xEE, count: 100)
        link.arrive(stray, at: link.harness.now + 14 * Self.millisecond)
        link.run()
        let stats = link.stats
        #expect(link.asked.map(\.sequence) == [1012])
        #expect(stats.rejected == [.foreignSSRC: 1])
        #expect(stats.recovered == 1 && stats.rtxReceived == 1 && stats.rtxDuplicate == 0)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
    }

    /// RFC 4588 8.3: the sender's SDES names its RTX stream with the media's CNAME. Known before
    /// any retransmission came, a packet asked for that then comes on the media SSRC is its
    /// original, late: reported to the sender per packet (its congestion controller learns that
    /// the path reorders, and takes back a cut for that loss), counted as a spurious ask, and
    /// its retransmission a duplicate. Without the SDES it is taken as resent on the media SSRC.
    @Test(arguments: [false, true]) func theSendersSDESNamesItsRTXStream(announced: Bool) {
        let frames = Self.stream(frames: 20)
        var datagrams = frames.flatMap(\.datagrams)
        datagrams.insert(datagrams.remove(at: 12), at: 22)  // ten packets (10 ms) late
        var link = Link()
        link.send(datagrams)
        if announced {
            let description = RTCPSourceDescription(chunks: [.init(ssrc: ReceiveSessionTests.ssrc, cname: RTCPText("sender")),
                                                             .init(ssrc: Self.rtxSSRC, cname: RTCPText("sender"))])
            let report = RTCPSenderReport(ssrc: ReceiveSessionTests.ssrc, ntpTimestamp: 0x1234_0000_0000, rtpTimestamp: 0,
                                          packetCount: 0, octetCount: 0)
            link.arrive(RTCPCompoundBuilder.build([.senderReport(report), .sourceDescription(description)]),
                        at: link.harness.now + 5 * Self.millisecond + Self.millisecond / 2)
        }
        link.run()
        let stats = link.stats
        #expect(link.asked.map(\.sequence) == [1012])
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
        #expect(stats.rtxDuplicate == 1 && stats.nackSpurious == (announced ? 1 : 0) && stats.recovered == (announced ? 0 : 1))
        // Whether the original's arrival reached the sender in a per-packet report.
        let reported = link.harness.transmits.flatMap { transmit in
            transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }.flatMap { packet -> [UInt16] in
                guard case .congestionControlFeedback(let feedback) = packet else { return [] }
                return feedback.reports.filter { $0.mediaSSRC == ReceiveSessionTests.ssrc }.flatMap { report in
                    report.metrics.enumerated().filter(\.element.received).map { report.beginSequence &+ UInt16($0.offset) }
                }
            }
        }
        #expect(reported.contains(1012) == announced)
    }

    /// The stream's first packets reordered (the keyframe's first packet, with its parameter
    /// sets, two places and 2 ms late): the playout buffer holds the start (at most
    /// `PlayoutBuffer.startHold`), so the stream starts at the first packet sent and every
    /// frame is whole and decodable. One later than the hold is late, counted: the first
    /// keyframe then lacks its parameter sets and the frames up to the next keyframe are
    /// undecodable.
    @Test(arguments: [2, 25]) func theFirstPacketsReorderedStillStartTheStream(lateMs: Int) {
        let frames = Self.stream(frames: 20)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link()
        link.send(Array(datagrams.dropFirst()))
        link.arrive(datagrams[0], at: link.harness.now + Int64(lateMs) * Self.millisecond + Self.millisecond / 2)
        link.run()
        let stats = link.stats
        #expect(link.asked.isEmpty && stats.lost == 0)
        #expect(PlayoutBuffer.startHold == 20 * Self.millisecond)
        if lateMs == 2 {
            #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
            #expect(stats.framesUndecodable == 0 && stats.late == 0)
        } else {
            #expect(stats.late == 1 && stats.framesUndecodable == 15, "late \(stats.late) undecodable \(stats.framesUndecodable) lost \(stats.lost) complete \(stats.framesComplete) incomplete \(stats.framesIncomplete)")  // keyframes every 15 frames
        }
    }

    @Test func aLateOriginalFillsItsGapWithoutARetransmission() {
        let frames = Self.stream(frames: 10)
        var datagrams = frames.flatMap(\.datagrams)
        datagrams.insert(datagrams.remove(at: 12), at: 22)  // ten packets late: asked, then it comes
        var link = Link()
        link.answer = { $0 == 1002 }  // RTX answers the loss of 1002 (so 1012 on the media SSRC is an original)
        link.rtxDelay = 5 * Self.millisecond
        link.send(datagrams, drop: [2])
        link.run()
        let stats = link.stats
        #expect(Set(link.asked.map(\.sequence)) == [1002, 1012])  // 1012 maybe twice (the RTT measured is 5 ms)
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
        #expect(stats.lost == 1 && stats.recovered == 1 && stats.received == datagrams.count - 1)
    }

    @Test func beforeAnyRTXAnAskedPacketOnTheMediaSSRCIsARetransmission() {
        let frames = Self.stream(frames: 10)
        var datagrams = frames.flatMap(\.datagrams)
        datagrams.insert(datagrams.remove(at: 12), at: 22)
        var link = Link()
        link.answer = { _ in false }
        link.send(datagrams)
        link.run()
        let stats = link.stats
        // The sender may resend originals unchanged (ffmpeg's kind of receiver needs that):
        // what was asked for and comes on the media SSRC is taken as the retransmission.
        #expect(link.asked.map(\.sequence) == [1012])
        #expect(stats.lost == 1 && stats.recovered == 1 && stats.rtxReceived == 1)
        #expect(ReceiveSessionTests.same(link.units, frames))
    }

    /// A sender that restarts its sequence numbers (twice, back to where a packet recovered on the
    /// media SSRC was): the new stream's packet of that number is an original, not a second answer.
    @Test func aRecoveredNumberIsForgottenWhenTheSequenceRestarts() {
        let first = ReceiveSessionTests.stream(frames: 20, firstSequence: 10_000)
        let restart = ReceiveSessionTests.stream(frames: 2, firstSequence: 5_000, firstTimestamp: 90_000 + 20 * 3000)
        let again = ReceiveSessionTests.stream(frames: 20, firstSequence: 10_005, firstTimestamp: 90_000 + 22 * 3000)
        var link = Link(rtxDelay: 5 * Self.millisecond)
        link.sameSSRC = true
        link.send(first.flatMap(\.datagrams), drop: [8])  // 10008: asked for, resent, recovered
        link.run(quiet: 100 * Self.millisecond, finish: false)
        #expect(link.stats.recovered == 1)
        link.send(restart.flatMap(\.datagrams) + again.flatMap(\.datagrams))  // 10008 again, an original
        link.run()
        let stats = link.stats
        #expect(ReceiveSessionTests.same(link.units, first + restart + again))
        #expect(stats.recovered == 1 && stats.rtxReceived == 1 && stats.rtxDuplicate == 0)
        #expect(link.asked.map(\.sequence) == [10_008])
    }

    /// Frames wait for their playout time while later ones arrive (the usual state with loss
    /// recovery): a frame handed out is not kept behind by the playout, so the NAL units the
    /// caller gives back (`recycle`) are rebuilt in place, as `MediaReceiver` gives them back.
    /// A copy kept behind made every one given back be reallocated on its first write.
    @Test func framesGivenBackAreRebuiltInPlaceWhileOthersWait() {
        let frames = ReceiveSessionTests.stream(frames: 60, keyframeEvery: 30)
        var link = Link(latency: .milliseconds(50))
        var givenBack: Set<UnsafeRawPointer> = []
        var (reused, built, maxWaiting) = (0, 0, 0)
        for (index, frame) in frames.enumerated() {
            for datagram in frame.datagrams {
                link.harness.deliver(datagram, step: index == 0 ? 0 : 10 * Self.millisecond / Int64(frame.datagrams.count))
            }
            maxWaiting = max(maxWaiting, link.harness.session.waitingFrames)
            var delivered: [[[UInt8]]] = []
            while var unit = link.harness.units.popLast() {
                // Fragmented NAL units (larger than a packet) are built in the buffers given back.
                for nal in unit.nalUnits where nal.count > 1200 {
                    let address = nal.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
                    if index >= 10 {
                        built += 1
                        if givenBack.contains(address) { reused += 1 }
                    }
                    givenBack.insert(address)
                }
                delivered.append(unit.nalUnits)
                unit.nalUnits = []
            }
            while var nalUnits = delivered.popLast() { link.harness.session.recycle(&nalUnits) }
        }
        // Four or five frames wait at 10 ms apart and 50 ms of latency.
        #expect(maxWaiting >= 4)
        #expect(built > 30)
        // Most (the others grew past a buffer's room); none at all while a copy was kept behind.
        #expect(reused * 2 > built, "\(reused) of \(built) NAL units built in a buffer given back")
    }

    @Test func aSecondSameSSRCAnswerIsADuplicateNotAnOriginal() {
        let frames = Self.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(rtxDelay: 5 * Self.millisecond)
        link.sameSSRC = true
        link.send(datagrams, drop: [6])
        // The sender answers once more, later (a re-ask crossed the first answer).
        link.arrive(datagrams[6], at: ReceiveSessionTests.start + 40 * Self.millisecond)
        link.run()
        let stats = link.stats
        #expect(stats.lost == 1 && stats.recovered == 1 && stats.received == datagrams.count - 1)
        #expect(stats.rtxReceived == 2 && stats.rtxDuplicate == 1)
    }

    @Test func nackEntriesCarryPIDAndBLP() {
        var generator = NACKGenerator()
        let now: Int64 = 1_000_000_000
        // 100, 101, 103, 116 in one entry (BLP bits 0, 2, 15); 117 starts the next; 70000 wraps to 4464.
        for sequence: Int64 in [100, 101, 103, 116, 117, 70_000] {
            generator.noteMissing(sequence..<(sequence + 1), now: now, deadline: now + 1_000_000_000)
        }
        let entries = generator.due(now: now + 6_000_000, highest: 70_010, rtt: 20_000_000)
        #expect(entries == [.init(packetID: 100, lostBitmask: 0b1000_0000_0000_0101),
                            .init(packetID: 117, lostBitmask: 0),
                            .init(packetID: 4464, lostBitmask: 0)])
        #expect(generator.requested == 6 && generator.packets == 1 && generator.bytes == 12 + 3 * 4)
        // Not again before 1.25 RTT + 1 ms; then again, all of them.
        #expect(generator.due(now: now + 6_000_000 + 25_000_000, highest: 70_010, rtt: 20_000_000).isEmpty)
        #expect(generator.due(now: now + 6_000_000 + 26_000_000, highest: 70_010, rtt: 20_000_000).count == 3)
        // And on the wire: one generic NACK in the report, the same entries.
        var feedback = ReceiverFeedback(ssrc: 0xFEED)
        feedback.requestRetransmission(entries)
        var tracker = RTPSequenceTracker()
        let report = feedback.makeReports(now: now, mediaSSRC: 0x1234, tracker: &tracker)
        let nacks = report[0].withUnsafeBytes { RTCPPacket.parseCompound($0).packets }.compactMap { packet in
            if case .genericNACK(let nack) = packet { return nack } else { return nil }
        }
        #expect(nacks == [RTCPGenericNACK(senderSSRC: 0xFEED, mediaSSRC: 0x1234, entries: entries)])
    }

    @Test func nackBytesStayWithinTheirShareOfTheMedia() {
        let frames = Self.stream(frames: 60)
        let datagrams = frames.flatMap(\.datagrams)
        let mediaBytes = datagrams.reduce(0) { $0 + $1.count }
        // Every other packet lost and never answered: the receiver would ask for all, again and again.
        let drop = Set(stride(from: 1, to: datagrams.count, by: 2))
        var link = Link(latency: .milliseconds(400))
        link.answer = { _ in false }
        link.send(datagrams, drop: drop)
        link.run()
        let stats = link.stats
        let received = datagrams.enumerated().filter { !drop.contains($0.offset) }.reduce(0) { $0 + $1.element.count }
        #expect(received < mediaBytes)
        // The bucket: 1500 bytes at the start and 2 % of the media bytes received.
        #expect(stats.nackBytes <= 1500 + received * 2 / 100)
        #expect(stats.nackBytes == link.nacks.reduce(0) { $0 + 12 + 4 * $1.entries.count })
        #expect(stats.nackBudgetLimited > 0 && stats.nackSent == link.nacks.count)
        // Asks the budget cannot pay for wait for the media that refills it: the session does
        // not ask to be woken for them at once, again and again, meanwhile.
        #expect(link.deadlinesMetAgain == 0)
    }

    @Test func duplicateAndUnaskedRetransmissionsAreCountedAndDropped() {
        let frames = Self.stream(frames: 10)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link(rtxDelay: 5 * Self.millisecond)
        link.send(datagrams, drop: [6])
        // The sender retransmits packet 6 twice, and packet 2 which was never lost.
        link.arrive(link.rtx(of: datagrams[6]), at: ReceiveSessionTests.start + 40 * Self.millisecond)
        link.arrive(link.rtx(of: datagrams[2]), at: ReceiveSessionTests.start + 41 * Self.millisecond)
        link.run()
        let stats = link.stats
        #expect(ReceiveSessionTests.same(link.units, frames) && link.units.allSatisfy(\.isComplete))
        #expect(stats.recovered == 1 && stats.rtxReceived == 3 && stats.rtxDuplicate == 2 && stats.rtxLate == 0)
        #expect(stats.lost == 1 && stats.duplicate == 0 && stats.received == datagrams.count - 1)
    }

    @Test func aRetransmissionStreamNeedsItsPayloadTypeAndOneSSRC() {
        let frames = Self.stream(frames: 5)
        let datagrams = frames.flatMap(\.datagrams)
        var link = Link()
        link.answer = { _ in false }
        link.send(datagrams, drop: [3])
        var good = link.rtx(of: datagrams[3])
        var foreign = good
        foreign[8] ^= 0xff  // another SSRC after the first RTX stream
        var short = good
        short.removeLast(short.count - 13)  // one byte of payload: no room for the original sequence number
        good[1] = good[1] & 0x80 | 98  // another payload type: not RTX, a foreign SSRC
        for (offset, datagram) in [good, link.rtx(of: datagrams[3]), foreign, short].enumerated() {
            link.arrive(datagram, at: ReceiveSessionTests.start + Int64(7 + offset) * Self.millisecond)
        }
        link.run()
        let stats = link.stats
        #expect(stats.recovered == 1 && stats.rtxReceived == 1)
        #expect(stats.rejected == [.foreignSSRC: 2, .badRetransmission: 1])
        #expect(ReceiveSessionTests.same(link.units, frames))
    }
}
