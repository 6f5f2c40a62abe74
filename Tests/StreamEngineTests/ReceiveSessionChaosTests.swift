@testable import StreamEngine
import Foundation
import MediaFormats
import Testing
import TestSupport
import UringIO

/// The receive session with loss recovery on a hostile network, seeded: losses, outages,
/// jitter that reorders, duplicates, retransmissions that come late or twice, and among the
/// stream's packets datagrams that are not its own (random bytes, other SSRCs, other payload
/// types, far sequence numbers and clocks, RTX too short to carry a number, RTCP garbage and
/// sender reports whose counts lie). Whatever comes, the session must not trap or spin, its
/// frames go out once each, in order, whole ones byte for byte as sent, and each frame of the
/// stream is counted once: complete, incomplete or missing.
@Suite struct ReceiveSessionChaosTests {
    typealias Link = LossRecoveryTests.Link
    static let millisecond = ReceiveSessionTests.millisecond

    /// One network: how the stream's packets fare, and how much that is not the stream comes.
    struct Network: Sendable, CustomTestStringConvertible {
        var seed: UInt64
        /// Chance that an original is lost.
        var loss = 0.0
        /// Each original's extra delay, uniform in 0...jitter (reorders when above the 1 ms spacing).
        var jitterMs = 0
        /// Chance that an original arrives twice (the copy up to 200 ms later).
        var duplicate = 0.0
        /// Everything sent in this span of the stream is lost (ms from its start).
        var outage: Range<Int>?
        /// Mean milliseconds between datagrams that are not the stream's (0: none).
        var garbageEveryMs = 0
        /// Retransmissions resent unchanged on the media SSRC instead of RFC 4588 RTX.
        var sameSSRC = false
        /// The retransmission's delay after the NACK (a round trip beside the one-way delay below).
        var rtxDelayMs = 20
        /// Sender reports for the stream's SSRC from the sender's address whose counts and clocks
        /// say anything (else such reports come from another address). Spoofed reports cannot be
        /// told from the sender's, so with them the stream is only checked to stay sound.
        var lyingReports = false

        var testDescription: String {
            "seed \(seed) loss \(loss) jitter \(jitterMs) ms dup \(duplicate) outage \(outage.map { "\($0)" } ?? "none") "
                + "garbage/\(garbageEveryMs) ms\(sameSSRC ? " same-SSRC" : "")\(lyingReports ? " lying SRs" : "") rtx +\(rtxDelayMs) ms"
        }
    }

    static let frameCount = 240
    /// 30 frames a second.
    static let frameInterval: Int64 = 33 * millisecond
    static let oneWayDelay: Int64 = 20 * millisecond

    static let networks: [Network] = [
        Network(seed: 1, garbageEveryMs: 5),
        Network(seed: 2, garbageEveryMs: 3, sameSSRC: true),
        Network(seed: 3, loss: 0.05, jitterMs: 30, duplicate: 0.03, garbageEveryMs: 10),
        Network(seed: 4, loss: 0.05, jitterMs: 30, duplicate: 0.03, garbageEveryMs: 10, sameSSRC: true),
        Network(seed: 5, loss: 0.2, jitterMs: 80, duplicate: 0.1, garbageEveryMs: 7, rtxDelayMs: 150),
        Network(seed: 6, loss: 0.2, jitterMs: 80, duplicate: 0.1, garbageEveryMs: 7, sameSSRC: true, rtxDelayMs: 150),
        Network(seed: 7, loss: 0.02, jitterMs: 5, outage: 2_000..<2_700, garbageEveryMs: 20),
        Network(seed: 8, loss: 0.02, jitterMs: 5, outage: 2_000..<2_700, garbageEveryMs: 20, sameSSRC: true),
        Network(seed: 9, loss: 0.5, jitterMs: 200, duplicate: 0.3, garbageEveryMs: 2, rtxDelayMs: 400),
        Network(seed: 10, loss: 0.5, jitterMs: 200, duplicate: 0.3, garbageEveryMs: 2, sameSSRC: true, rtxDelayMs: 400),
        Network(seed: 11, loss: 0.05, jitterMs: 30, duplicate: 0.03, garbageEveryMs: 10, lyingReports: true),
        Network(seed: 12, loss: 0.05, jitterMs: 30, garbageEveryMs: 10, sameSSRC: true, lyingReports: true),
    ]

    /// The stream through `network`, with what is not the stream among it or not: the session's
    /// link after the run, and the frames sent.
    static func run(_ network: Network, garbage: Bool) -> (link: Link, frames: [ReceiveSessionTests.Frame]) {
        let frames = ReceiveSessionTests.stream(frames: Self.frameCount, keyframeEvery: 30, seed: network.seed)
        var rng = SplitMix64(seed: network.seed &* 0x9E37_79B9)
        var strangeness = SplitMix64(seed: network.seed &+ 0x5151)
        var link = Link(rtxDelay: Int64(network.rtxDelayMs) * Self.millisecond)
        link.sameSSRC = network.sameSSRC
        let start = link.harness.now
        var lastSequence: UInt16 = 0
        var lastTimestamp: UInt32 = 0
        for (index, frame) in frames.enumerated() {
            for (position, datagram) in frame.datagrams.enumerated() {
                let header = try! RTPHeader.parse(datagram).header
                link.history[header.sequenceNumber] = datagram
                (lastSequence, lastTimestamp) = (header.sequenceNumber, header.timestamp)
                let sent = Int64(index) * Self.frameInterval + Int64(position) * Self.millisecond / 4
                if let outage = network.outage, outage.contains(Int(sent / Self.millisecond)) { continue }
                // The first packet arrives first, before anything else: the session locks onto
                // the stream with it.
                let first = index + position == 0
                if !first && Double.random(in: 0..<1, using: &rng) < network.loss { continue }
                let delay = Self.oneWayDelay + (first ? 0 : Int64.random(in: 0...Int64(network.jitterMs) * Self.millisecond, using: &rng))
                link.arrive(datagram, at: start + sent + delay)
                if Double.random(in: 0..<1, using: &rng) < network.duplicate {
                    link.arrive(datagram, at: start + sent + delay + Int64.random(in: 0...200 * Self.millisecond, using: &rng))
                }
            }
            // What is not the stream, from the first packet's arrival on (before it, the first
            // valid RTP packet of any source is the stream, as for any receiver without `from`).
            guard garbage && network.garbageEveryMs > 0 else { continue }
            var time = Int64(index) * Self.frameInterval
            while true {
                time += Int64.random(in: 1...2 * Int64(network.garbageEveryMs) * Self.millisecond, using: &strangeness)
                guard time < Int64(index + 1) * Self.frameInterval else { break }
                let (datagram, stranger) = Self.garbage(sequence: lastSequence, timestamp: lastTimestamp,
                                                        lyingReports: network.lyingReports, using: &strangeness)
                if stranger { link.source = ReceiveSessionTests.stranger }
                link.arrive(datagram, at: start + Self.oneWayDelay + time + Self.millisecond)
                link.source = ReceiveSessionTests.sender
            }
        }
        link.run()
        return (link, frames)
    }

    @Test(arguments: networks) func aHostileNetworkLeavesTheStreamCountedAndIntact(_ network: Network) {
        Self.check(network)
    }

    /// More networks, drawn at random from their seeds: `STREAMER_CHAOS_SEEDS=N` (and
    /// `STREAMER_CHAOS_FIRST`, 1000 by default) runs N of them; not in the suite's own run.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["STREAMER_CHAOS_SEEDS"] != nil,
                   "STREAMER_CHAOS_SEEDS=N explores N random networks"))
    func randomNetworks() {
        let environment = ProcessInfo.processInfo.environment
        let count = UInt64(environment["STREAMER_CHAOS_SEEDS"] ?? "") ?? 0
        let first = UInt64(environment["STREAMER_CHAOS_FIRST"] ?? "") ?? 1000
        for seed in first..<first + count { Self.check(Self.randomNetwork(seed: seed)) }
    }

    /// A network drawn from `seed`: any loss, jitter, duplication, outage, garbage rate and
    /// answer delay of the ranges below.
    static func randomNetwork(seed: UInt64) -> Network {
        var rng = SplitMix64(seed: seed &* 7919)
        var network = Network(seed: seed)
        network.loss = [0, 0.01, 0.05, 0.2, 0.5, 0.8].randomElement(using: &rng)!
        network.jitterMs = [0, 5, 30, 80, 200, 600].randomElement(using: &rng)!
        network.duplicate = [0, 0.05, 0.3].randomElement(using: &rng)!
        if Bool.random(using: &rng) {
            let start = Int.random(in: 0...7_000, using: &rng)
            network.outage = start..<start + Int.random(in: 50...3_000, using: &rng)
        }
        network.garbageEveryMs = [1, 3, 10, 50].randomElement(using: &rng)!
        network.sameSSRC = Bool.random(using: &rng)
        network.rtxDelayMs = [1, 20, 150, 400, 1_200].randomElement(using: &rng)!
        network.lyingReports = Int.random(in: 0..<4, using: &rng) == 0
        return network
    }

    /// The stream through `network` with what is not the stream among it: checked sound, and,
    /// unless sender reports lie, the same for the stream as without the rest.
    static func check(_ network: Network) {
        let (link, frames) = Self.run(network, garbage: true)
        let stats = link.stats
        let units = link.units
        let sent = Dictionary(uniqueKeysWithValues: frames.map { ($0.unit.timestamp, $0.unit) })
        let name = Comment(rawValue: network.testDescription)
        // Out once each, in order, every frame one of the stream's; whole ones as sent.
        #expect(zip(units, units.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp }, name)
        #expect(units.allSatisfy { sent[$0.timestamp] != nil }, name)
        let corrupted = units.filter { $0.isComplete && $0.accessUnit != sent[$0.timestamp] }.map(\.timestamp)
        #expect(corrupted.isEmpty, name)
        // Each frame counted once: complete, incomplete (sent out) or missing (never came).
        #expect(stats.framesComplete == units.filter(\.isComplete).count, name)
        #expect(stats.framesIncomplete == units.filter { !$0.isComplete }.count, name)
        let lastOut = units.last.map { Int(($0.timestamp &- frames[0].unit.timestamp) / 3000) } ?? -1
        #expect(stats.framesComplete + stats.framesIncomplete + stats.framesMissing == lastOut + 1, name)
        #expect(stats.framesLate <= stats.framesIncomplete && stats.recovered <= Int(stats.lost), name)
        #expect(stats.received <= ReceiveSessionTests.packetCount(frames), name)
        #expect(stats.rejected[.foreignSource, default: 0] > 0, name)
        // The session never asked to be woken at once right after its timeout ran (a receive
        // loop would spin).
        #expect(link.deadlinesMetAgain == 0, name)
        guard !network.lyingReports else { return }
        // What is not the stream changes nothing for it: the same frames, as whole, the same
        // losses asked for and recovered, as on the same network without it.
        let (clean, _) = Self.run(network, garbage: false)
        #expect(units.map(\.timestamp) == clean.units.map(\.timestamp), name)
        #expect(units.map(\.isComplete) == clean.units.map(\.isComplete), name)
        let outcome = { (s: ReceiverStats) in [Int(s.lost), s.recovered, s.received, s.duplicate, s.late, s.framesMissing, s.framesLate,
                                                s.rtxReceived, s.rtxLate, s.rtxDuplicate, s.nackRequested] }
        #expect(outcome(stats) == outcome(clean.stats), name)
        // Nothing lost or reordered: nothing counted lost, every frame whole. (Reordered, an
        // original that comes after its ask while no RTX stream is known is taken for its
        // answer on the media SSRC, as a sender that resends there would send it.)
        if network.loss == 0 && network.outage == nil && network.jitterMs == 0 {
            #expect(units.count == frames.count && units.allSatisfy(\.isComplete) && stats.lost == 0, name)
        }
    }

    /// A datagram that is not the stream's (and whether it comes from another address): none
    /// can be taken for a packet of the stream, since nothing authenticates one (SRTP does).
    static func garbage(sequence: UInt16, timestamp: UInt32, lyingReports: Bool, using rng: inout SplitMix64) -> (datagram: [UInt8], stranger: Bool) {
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        func rtp(payloadType: UInt8, sequence: UInt16, timestamp: UInt32, ssrc: UInt32, payload: Int) -> [UInt8] {
            RTPHeader(marker: Bool.random(using: &rng), payloadType: payloadType, sequenceNumber: sequence,
                      timestamp: timestamp, ssrc: ssrc).bytes + bytes(payload)
        }
        let ssrc = ReceiveSessionTests.ssrc
        var foreign: UInt32 { UInt32.random(in: 1...UInt32.max, using: &rng) | 0x8000_0000 }  // never the stream's 0x5EED_0001
        let stranger = Int.random(in: 0..<4, using: &rng) == 0
        switch Int.random(in: 0..<9, using: &rng) {
        case 0:
            // Random bytes: RTP's version bits make most of them bad RTP (and none RTX).
            var datagram = bytes(Int.random(in: 0...64, using: &rng))
            if datagram.count > 1 && datagram[1] & 0x7F == 97 { datagram[1] ^= 1 }
            return (datagram, stranger)
        case 1:
            return (rtp(payloadType: 96, sequence: .random(in: 0...UInt16.max, using: &rng), timestamp: .random(in: 0...UInt32.max, using: &rng),
                        ssrc: foreign, payload: Int.random(in: 0...1400, using: &rng)), stranger)
        case 2:
            // The stream's SSRC with a payload type it does not use.
            return (rtp(payloadType: UInt8.random(in: 98...120, using: &rng), sequence: sequence &+ 1, timestamp: timestamp,
                        ssrc: ssrc, payload: Int.random(in: 0...200, using: &rng)), stranger)
        case 3:
            // Far from the stream's sequence numbers (1000 on, a few hundred), never two in a
            // row (two in a row would be a sender that restarted its sequence).
            return (rtp(payloadType: 96, sequence: 31_000 &+ 2 &* UInt16.random(in: 0...10_000, using: &rng), timestamp: timestamp,
                        ssrc: ssrc, payload: Int.random(in: 2...200, using: &rng)), stranger)
        case 4:
            // On a clock more than 10 s away, never two in a row (two in a row would be a
            // sender whose clock moved on).
            return (rtp(payloadType: 96, sequence: 1000 &+ 2 &* UInt16.random(in: 0...400, using: &rng),
                        timestamp: timestamp &+ UInt32.random(in: 1_000_000...2_000_000_000, using: &rng),
                        ssrc: ssrc, payload: Int.random(in: 2...200, using: &rng)), stranger)
        case 5:
            // RFC 4588 RTX too short to name a sequence number, or from another SSRC for a
            // packet of no gap (one that names a gap cannot be told from its answer unless
            // authenticated).
            if Bool.random(using: &rng) {
                return (rtp(payloadType: 97, sequence: .random(in: 0...UInt16.max, using: &rng), timestamp: timestamp,
                            ssrc: LossRecoveryTests.rtxSSRC, payload: Int.random(in: 0...1, using: &rng)), stranger)
            }
            var datagram = rtp(payloadType: 97, sequence: .random(in: 0...UInt16.max, using: &rng), timestamp: timestamp,
                               ssrc: foreign, payload: 300)
            datagram[12] = UInt8.random(in: 0x80...0xFF, using: &rng)  // an original number from 32768 on
            return (datagram, stranger)
        case 6:
            // RTCP-looking bytes (payload type 200...206) that do not parse.
            var datagram = bytes(Int.random(in: 4...80, using: &rng))
            datagram[0] = 0x80 | (datagram[0] & 0x1F)
            datagram[1] = UInt8.random(in: 200...206, using: &rng)
            return (datagram, stranger)
        case 7:
            // A sender report for the stream whose packet count and clocks say anything.
            let report = RTCPSenderReport(ssrc: ssrc, ntpTimestamp: .random(in: 0...UInt64.max, using: &rng),
                                          rtpTimestamp: .random(in: 0...UInt32.max, using: &rng),
                                          packetCount: .random(in: 0...UInt32.max, using: &rng),
                                          octetCount: .random(in: 0...UInt32.max, using: &rng))
            return (RTCPCompoundBuilder.build([.senderReport(report)]), stranger || !lyingReports)
        default:
            // The stream's packets cut short, inside the header.
            return (Array(rtp(payloadType: 96, sequence: sequence, timestamp: timestamp, ssrc: ssrc, payload: 0)
                .prefix(Int.random(in: 0...11, using: &rng))), stranger)
        }
    }
}
