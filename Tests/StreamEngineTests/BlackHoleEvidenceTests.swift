import Testing
import TestSupport
@testable import StreamEngine

/// A live stream's packets through a path that drops some of them, as the sender's log and
/// its path-MTU prober see them: confirmations come one RTT after the send, losses are
/// declared by age (200 ms, `SenderFeedback.lossTimeout`'s least), the prober reads the
/// evidence every 5 ms as `PathMTUController.tick` does. Probes are answered as media is.
struct LoggedStream {
    /// IP and UDP headers, and the 2 bytes RTX leaves free in a full packet.
    static let overhead = 28
    static let reserve = 2
    var prober: PathMTUProber
    var log = SentPacketLog(capacity: 1 << 14)
    var evidence = BlackHoleEvidence()
    /// Packets larger than this (IP size) vanish without ICMP.
    var pathMTU = 1500
    /// Share of all packets (media and probes) dropped at random.
    var loss = 0.0
    var random: SplitMix64
    var now: Int64 = 0
    var sequence: Int64 = 0
    private var arrivals: [(sequence: Int64, at: Int64)] = []
    private var probeAnswers: [(probe: PathMTUProber.Probe, at: Int64)] = []
    let rtt: Int64 = 5_000_000

    init(seed: UInt64) {
        var config = PathMTUProberConfig(baseMTU: 1200, maxMTU: 1500)
        config.reprobeInterval = 3_600_000_000_000
        prober = PathMTUProber(config: config, kernelMTU: 1500)
        random = SplitMix64(seed: seed)
        log.recordsLostPackets = true
    }

    private mutating func dropped(ipSize: Int) -> Bool {
        ipSize > pathMTU || (loss > 0 && random.nextUnit() < loss)
    }

    /// Runs the stream for `seconds`: a frame every 33 ms of 0 to 3 full packets and a short one,
    /// and now and then none for 100-250 ms (frames held back by congestion control, a source
    /// that slows down): ticks then declare losses with nothing sent since to confirm.
    mutating func run(seconds: Double) {
        let end = now + Int64(seconds * 1e9)
        var nextFrame = now
        while now < end {
            now += 1_000_000
            for arrival in arrivals where arrival.at <= now { log.confirm(arrival.sequence) }
            arrivals.removeAll { $0.at <= now }
            for answer in probeAnswers where answer.at <= now {
                prober.probeConfirmed(id: answer.probe.id, size: answer.probe.size, now: now)
            }
            probeAnswers.removeAll { $0.at <= now }
            if now >= nextFrame {
                nextFrame += random.nextUnit() < 0.15 ? 100_000_000 + Int64(random.next() % 150_000_000) : 33_000_000
                let full = prober.mtu - Self.overhead - Self.reserve
                let sizes = Array(repeating: full, count: Int(random.next() % 4)) + [100 + Int(random.next() % 900)]
                for bytes in sizes {
                    log.recordSent(sequence: sequence, bytes: bytes, at: now)
                    if !dropped(ipSize: bytes + Self.overhead) { arrivals.append((sequence, now + rtt)) }
                    sequence += 1
                }
            }
            guard now % 5_000_000 == 0 else { continue }
            log.expireUnconfirmed(sentBefore: now - 200_000_000)
            let read = evidence.read(&log, fullSize: prober.mtu - Self.overhead - Self.reserve,
                                     maxSize: prober.mtu - Self.overhead, baseSize: 1200 - Self.overhead)
            prober.mediaAboveBase(lost: read.lost, lostSends: read.lostSends, confirmed: read.confirmed,
                                  smallConfirmed: read.smallConfirmed, receiverAlive: true, now: now)
            if let probe = prober.nextProbe(now: now), !dropped(ipSize: probe.size) {
                probeAnswers.append((probe, now + rtt))
            }
        }
    }
}

struct BlackHoleEvidenceTests {
    /// Random loss on a path that carries full-size packets is no black hole, however lossy:
    /// losses are declared 200 ms after their send, long after full-size packets sent later
    /// were confirmed. (Before, a tick with losses and none of the packets sent then confirmed
    /// counted them in a row: at 10 % loss the MTU fell back to the base about once a minute.)
    @Test(arguments: [0.1, 0.2, 0.3])
    func randomLossIsNoBlackHole(loss: Double) {
        for seed in UInt64(1)...4 {
            var stream = LoggedStream(seed: seed)
            stream.run(seconds: 1)
            #expect(stream.prober.mtu == 1500)
            stream.loss = loss
            stream.run(seconds: 60)
            #expect(stream.prober.blackHoles == 0, "loss \(loss), seed \(seed): \(stream.prober.blackHoles) black holes")
            #expect(stream.prober.mtu == 1500)
        }
    }

    /// A black hole loses every full-size packet while the short ones get through: found
    /// within a second of the change even under 10 % random loss, and the smaller path then
    /// found by probing.
    @Test func aBlackHoleIsFoundUnderRandomLoss() {
        for seed in UInt64(1)...4 {
            var stream = LoggedStream(seed: seed)
            stream.run(seconds: 1)
            stream.loss = 0.1
            stream.run(seconds: 2)
            #expect(stream.prober.blackHoles == 0)
            stream.pathMTU = 1400
            stream.run(seconds: 1)
            #expect(stream.prober.blackHoles == 1, "seed \(seed)")
            stream.run(seconds: 10)
            #expect(stream.prober.mtu <= 1400 && stream.prober.mtu >= 1390, "seed \(seed): \(stream.prober.mtu)")
        }
    }

    /// Losses count once and only if nothing as large sent after them was confirmed; sends
    /// count once over reads; smaller packets confirmed are counted apart.
    @Test func lossesCountOnlyWithoutALaterFullConfirmation() {
        var log = SentPacketLog(capacity: 64)
        log.recordsLostPackets = true
        var evidence = BlackHoleEvidence()
        _ = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        for sequence in 0..<4 { log.recordSent(sequence: Int64(sequence), bytes: 1400, at: 10) }
        log.recordSent(sequence: 4, bytes: 300, at: 10)
        for sequence in 5..<8 { log.recordSent(sequence: Int64(sequence), bytes: 1400, at: 20) }
        log.recordSent(sequence: 8, bytes: 1402, at: 30)  // at most the largest: counts
        log.recordSent(sequence: 9, bytes: 1472, at: 30)  // sized for a larger MTU before: not
        log.recordSent(sequence: 10, bytes: 1100, at: 30)  // at the base: not
        log.confirm(4)
        log.confirm(6)  // sent at 20: the losses sent at 10 say nothing of the path
        log.expireUnconfirmed(sentBefore: 15)
        var read = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        #expect(read == BlackHoleEvidence.Reading(lost: 0, lostSends: 0, confirmed: 1, smallConfirmed: 1))
        log.expireUnconfirmed(sentBefore: 25)  // 5 and 7, sent with 6: the path carried their size
        read = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        #expect(read == BlackHoleEvidence.Reading(lost: 0, lostSends: 0, confirmed: 0, smallConfirmed: 0))
        for sequence in 11..<14 { log.recordSent(sequence: Int64(sequence), bytes: 1400, at: 40) }
        log.expireUnconfirmed(sentBefore: 35)
        read = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        #expect(read == BlackHoleEvidence.Reading(lost: 1, lostSends: 1, confirmed: 0, smallConfirmed: 0))
        log.expireUnconfirmed(sentBefore: 38)
        log.confirm(12)  // sent after 8: its loss says nothing either, but it was read already
        log.expireUnconfirmed(sentBefore: 45)
        read = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        #expect(read == BlackHoleEvidence.Reading(lost: 0, lostSends: 0, confirmed: 1, smallConfirmed: 0))
        log.confirm(10)  // declared lost for its age (at 35), confirmed late: small
        read = evidence.read(&log, fullSize: 1400, maxSize: 1402, baseSize: 1172)
        #expect(read == BlackHoleEvidence.Reading(lost: 0, lostSends: 0, confirmed: 0, smallConfirmed: 1))
    }
}
