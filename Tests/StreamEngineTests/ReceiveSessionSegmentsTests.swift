import MediaFormats
@testable import StreamEngine
import Testing
import TestSupport
import UringIO

/// `ReceiveSession.handleSegments` (a receive completion's datagrams at once, a run of the
/// stream's next packets taken with its checks made once) against `handleDatagram` for each
/// datagram: on streams with loss, reordering, duplicates, foreign and malformed packets, a
/// sequence restart and a clock jump, grouped into completions as GRO groups them, both give
/// the same outputs in the same order and the same stats after every completion.
@Suite struct ReceiveSessionSegmentsTests {
    typealias Tests = ReceiveSessionTests

    /// One receive completion: datagrams of one source, TOS byte and arrival; all as long as the
    /// first but the last, which may be shorter (what GRO coalesces).
    struct Completion {
        var datagrams: [[UInt8]]
        var source: SocketAddress
        var tos: UInt8
        var step: Int64
    }

    /// The stream of `frames` frames as a receiver may see it: packets lost, duplicated, swapped,
    /// foreign (another SSRC, another payload type, another address), malformed (version 0, a
    /// padding byte, a header extension, empty), a sequence restart and an RTP clock jump partway,
    /// half the lost packets resent 3 to 40 packets later (unchanged on the media SSRC for odd
    /// seeds, as RFC 4588 retransmissions for even ones), and then cut into completions of up to
    /// `maxSegments` datagrams. With `lossOnly`, the only damage is one packet in 60 lost and
    /// every one of them resent so.
    static func completions(frames: Int, seed: UInt64, damage: Bool, lossOnly: Bool = false,
                            maxSegments: Int) -> [Completion] {
        var rng = SplitMix64(seed: seed)
        var packets = Tests.stream(frames: frames, seed: seed).flatMap(\.datagrams)
        if damage {
            // A restart of the sequence numbers from the middle on, and a later clock jump.
            for index in packets.count / 2..<packets.count where !lossOnly {
                let sequence = (UInt16(packets[index][2]) << 8 | UInt16(packets[index][3])) &+ 20_000
                packets[index][2] = UInt8(sequence >> 8)
                packets[index][3] = UInt8(truncatingIfNeeded: sequence)
            }
            for index in packets.count * 3 / 4..<packets.count where !lossOnly {
                packets[index][4] &+= 0x40  // + 2^30 ticks: far from the stream's clock
            }
            var damaged: [[UInt8]] = []
            // Resends drawn apart, so the other damage is what it was before they were added.
            var resendRNG = SplitMix64(seed: seed &+ 0x5EED)
            var resends: [(due: Int, datagram: [UInt8])] = []
            var rtxSequence: UInt16 = 500
            for (index, packet) in packets.enumerated() {
                while let first = resends.first, first.due <= index {
                    damaged.append(resends.removeFirst().datagram)
                }
                // Every kind of damage in turn at every tenth packet, and at random besides.
                let roll = lossOnly ? (index % 60 == 30 ? 0 : 99)
                                    : index % 10 == 5 ? index / 10 % 14 : Int.random(in: 0..<100, using: &rng)
                switch roll {
                case 0..<4:  // lost, and perhaps resent later
                    guard lossOnly || Bool.random(using: &resendRNG) else { continue }
                    var resent = packet
                    if seed % 2 == 0 {
                        rtxSequence &+= 1
                        resent = LossRecoveryTests.rtx(of: packet, sequence: rtxSequence)
                    }
                    resends.append((index + Int.random(in: 3...40, using: &resendRNG), resent))
                    resends.sort { $0.due < $1.due }
                    continue
                case 4..<6: damaged += [packet, packet]  // duplicated
                case 6..<8:  // swapped with the one before
                    let previous = damaged.popLast()
                    damaged.append(packet)
                    if let previous { damaged.append(previous) }
                case 8:
                    var foreign = packet
                    foreign[8] ^= 0xFF  // another SSRC
                    damaged += [foreign, packet]
                case 9:
                    var other = packet
                    other[1] = other[1] & 0x80 | 97  // another payload type
                    damaged += [other, packet]
                case 10:
                    var malformed = packet
                    malformed[0] = 0x00  // version 0
                    damaged += [malformed, packet]
                case 11:
                    var padded = packet
                    padded[0] |= 0x20  // padding: the last byte counts it
                    padded[padded.count - 1] = 1
                    damaged.append(padded)
                case 12:
                    var extended = packet
                    extended[0] |= 0x10  // a header extension of 0 words over the payload's first 4 bytes
                    extended[14] = 0
                    extended[15] = 0
                    damaged.append(extended)
                case 13: damaged += [[], packet]  // an empty datagram (a completion of its own)
                default: damaged.append(packet)
                }
            }
            packets = damaged + resends.map(\.datagram)
        }
        var completions: [Completion] = []
        var index = 0
        while index < packets.count {
            let limit = Int.random(in: 1...maxSegments, using: &rng)
            let size = packets[index].count
            var datagrams = [packets[index]]
            index += 1
            while datagrams.count < limit, index < packets.count, size > 0, datagrams.last!.count == size,
                  packets[index].count <= size, !packets[index].isEmpty {
                datagrams.append(packets[index])
                index += 1
            }
            let stranger = damage && !lossOnly && Int.random(in: 0..<40, using: &rng) == 0
            completions.append(Completion(
                datagrams: datagrams, source: stranger ? Tests.stranger : Tests.sender,
                tos: [0x00, 0x01, 0x02, 0xB8 | 0x01][Int.random(in: 0..<4, using: &rng)],
                step: Int64.random(in: 0...8, using: &rng) * Tests.millisecond))
        }
        return completions
    }

    /// What a session put out, as comparable values.
    enum Event: Equatable {
        case unit(DepacketizedAccessUnit)
        case transmit(ReceiveSession.Transmit)
    }

    static func drain(_ session: inout ReceiveSession, into events: inout [Event]) {
        while let output = session.pollOutput() {
            switch output {
            case .accessUnit(let unit): events.append(.unit(unit))
            case .transmit(let transmit):
                events.append(.transmit(transmit))
                session.recordFeedbackSend(succeeded: true)
            }
        }
    }

    /// Feeds `completions` to two sessions of `config`, one datagram by one and one completion at a
    /// time, expecting the same after each completion; returns the second's final stats, its
    /// events and how many packets it took in runs (nil after recording a difference).
    static func compare(_ completions: [Completion], config: MediaReceiverConfig) -> (ReceiverStats, [Event], Int)? {
        var single = ReceiveSession(config: config, ssrc: 0xFEED, cname: "test")
        var grouped = ReceiveSession(config: config, ssrc: 0xFEED, cname: "test")
        var now = Tests.start
        var singleEvents: [Event] = []
        var groupedEvents: [Event] = []
        for (number, completion) in completions.enumerated() {
            now += completion.step
            for datagram in completion.datagrams {
                datagram.withUnsafeBytes {
                    single.handleDatagram($0, source: { completion.source }, tos: completion.tos, arrival: now, now: now,
                                          completion: number)
                }
                drain(&single, into: &singleEvents)
            }
            let segments = completion.datagrams.flatMap { $0 }
            segments.withUnsafeBytes {
                grouped.handleSegments($0, segmentSize: max(1, completion.datagrams[0].count), source: { completion.source },
                                       tos: completion.tos, arrival: now, now: now, completion: number)
            }
            drain(&grouped, into: &groupedEvents)
            if let deadline = single.nextDeadline, now >= deadline {
                single.handleTimeout(now: now)
                drain(&single, into: &singleEvents)
            }
            if let deadline = grouped.nextDeadline, now >= deadline {
                grouped.handleTimeout(now: now)
                drain(&grouped, into: &groupedEvents)
            }
            guard single.stats == grouped.stats, singleEvents == groupedEvents, single.nackTokens == grouped.nackTokens else {
                Issue.record("completion \(number) of \(completions.count): stats, outputs or NACK budget differ")
                return nil
            }
        }
        single.finish(now: now + Tests.millisecond)
        grouped.finish(now: now + Tests.millisecond)
        drain(&single, into: &singleEvents)
        drain(&grouped, into: &groupedEvents)
        guard single.stats == grouped.stats, singleEvents == groupedEvents, single.nackTokens == grouped.nackTokens else {
            Issue.record("at the end: stats, outputs or NACK budget differ")
            return nil
        }
        return (grouped.stats, groupedEvents, grouped.runPackets)
    }

    static func config(feedback: Bool, retransmission: Bool = false, rtcpMux: Bool = false) -> MediaReceiverConfig {
        var config = MediaReceiverConfig(listen: SocketAddress(ip: "0.0.0.0", port: 5004)!)
        config.feedback = feedback
        config.retransmission = retransmission
        config.rtcpMux = rtcpMux
        return config
    }

    @Test("an intact stream: every frame out whole, every packet after the first (or the start hold) taken in runs",
          arguments: [(false, false), (true, false), (true, true)])
    func intactStream(feedback: Bool, retransmission: Bool) throws {
        let frames = Tests.stream(frames: 40, seed: 7)
        let completions = Self.completions(frames: 40, seed: 7, damage: false, maxSegments: 64)
        let config = Self.config(feedback: feedback, retransmission: retransmission)
        let (stats, events, runPackets) = try #require(Self.compare(completions, config: config))
        let units = events.compactMap { if case .unit(let unit) = $0 { unit } else { nil } }
        #expect(Tests.same(units, frames))
        #expect(stats.received == Tests.packetCount(frames))
        #expect(stats.bytesReceived == Tests.byteCount(frames))
        #expect(stats.lost == 0 && stats.framesComplete == 40)
        // Every packet but the first, which locks the stream, and with a playout buffer those of
        // its start hold (`PlayoutBuffer.startHold`: through the completion after which the
        // timeout ends it); completions of many datagrams.
        var notInRuns = 1
        if retransmission {
            notInRuns = 0
            var now: Int64 = 0
            for (index, completion) in completions.enumerated() {
                now += completion.step
                notInRuns += completion.datagrams.count
                if now - completions[0].step >= PlayoutBuffer.startHold && index > 0 { break }
            }
        }
        #expect(runPackets == Tests.packetCount(frames) - notInRuns)
        #expect(completions.count < Tests.packetCount(frames) / 2)
        #expect(stats.ecn.reduce(0, +) == stats.received)
        // Without feedback nothing is sent; with it, reports (and their per-packet feedback).
        #expect(events.contains { if case .transmit = $0 { true } else { false } } == feedback)
    }

    @Test("a damaged stream: the same outputs and stats after every completion",
          arguments: [(false, false, false), (true, false, false), (true, false, true), (true, true, false)])
    func damagedStream(feedback: Bool, retransmission: Bool, rtcpMux: Bool) throws {
        for seed: UInt64 in 1...6 {
            let completions = Self.completions(frames: 80, seed: seed, damage: true, maxSegments: 24)
            let config = Self.config(feedback: feedback, retransmission: retransmission, rtcpMux: rtcpMux)
            let (stats, _, runPackets) = try #require(Self.compare(completions, config: config))
            // The damage is there to be seen, and runs were taken through it (with loss recovery
            // only while nothing is missing: fewer).
            #expect(stats.lost > 0 && stats.duplicate > 0 && stats.rejected[.foreignSSRC, default: 0] > 0)
            #expect(stats.rejected[.rtp(.badVersion), default: 0] > 0 && stats.timestampRestarts >= 1)
            #expect(stats.rejected[.rtp(.tooShort), default: 0] > 0)  // the empty datagrams
            #expect(stats.framesComplete > 0 && stats.framesIncomplete > 0)
            #expect(runPackets > (retransmission ? 0 : stats.received / 4))
            // With loss recovery the resent packets filled gaps, on the media SSRC (odd seeds) or as RTX (even).
            #expect(retransmission ? stats.recovered > 0 && stats.rtxReceived > 0 : stats.recovered == 0)
        }
    }

    @Test("losses resent and recovered: every frame out whole, runs taken between the gaps")
    func recoveredLosses() throws {
        for seed: UInt64 in 1...4 {
            let frames = Tests.stream(frames: 120, seed: seed)
            let completions = Self.completions(frames: 120, seed: seed, damage: true, lossOnly: true, maxSegments: 24)
            let config = Self.config(feedback: true, retransmission: true)
            let (stats, events, runPackets) = try #require(Self.compare(completions, config: config))
            let units = events.compactMap { if case .unit(let unit) = $0 { unit } else { nil } }
            // One packet in 60 lost, each resent within 40 packets: well within the playout latency
            // (at least 50 ms), so every one is recovered and every frame comes out whole.
            let losses = (Tests.packetCount(frames) + 29) / 60
            #expect(losses >= 4)
            #expect(stats.recovered == losses && stats.rtxReceived == losses && stats.lost == losses)
            #expect(Tests.same(units, frames))
            #expect(units.allSatisfy { $0.isComplete && $0.followsIntactChain })
            // Runs resume once a gap is filled: most packets between the gaps come in runs.
            #expect(runPackets > stats.received / 4)
        }
    }
}
