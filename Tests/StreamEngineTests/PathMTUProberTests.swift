import Testing
import TestSupport
@testable import StreamEngine

/// The prober against a simulated path: probes up to `pathMTU` are confirmed one RTT later,
/// larger ones vanish (and draw an ICMP announcement when `icmp`).
struct SimulatedPath {
    var pathMTU: Int
    var icmp: Bool
    var rtt: Int64 = 5_000_000
    var now: Int64 = 0
    /// Share of probes the path drops whatever their size (congestion), from a fixed seed.
    var loss = 0.0
    var random = SplitMix64(seed: 1)
    private var inFlight: [(probe: PathMTUProber.Probe, arrives: Int64)] = []

    init(pathMTU: Int, icmp: Bool) {
        self.pathMTU = pathMTU
        self.icmp = icmp
    }

    /// Runs `prober` in 1 ms steps for `seconds`; returns when the search completed, if it did.
    mutating func run(_ prober: inout PathMTUProber, seconds: Double, stopWhenDone: Bool = true) -> Int64? {
        let end = now + Int64(seconds * 1e9)
        while now < end {
            now += 1_000_000
            for entry in inFlight where entry.arrives <= now {
                prober.probeConfirmed(id: entry.probe.id, size: entry.probe.size, now: now)
            }
            inFlight.removeAll { $0.arrives <= now }
            if let probe = prober.nextProbe(now: now) {
                if loss > 0 && random.nextUnit() < loss {
                    // dropped by a full queue: no answer, no ICMP
                } else if probe.size <= pathMTU {
                    inFlight.append((probe, now + rtt))
                } else if icmp {
                    prober.pathMTUAnnounced(pathMTU, now: now + rtt / 2)
                }
            }
            if stopWhenDone, let done = prober.searchCompletedAt { return done }
        }
        return prober.searchCompletedAt
    }
}

struct PathMTUProberTests {
    func makeProber(maxMTU: Int = 1500, kernelMTU: Int = 1500, base: Int = 1200) -> PathMTUProber {
        var config = PathMTUProberConfig(baseMTU: base, maxMTU: maxMTU)
        config.reprobeInterval = 2_000_000_000
        return PathMTUProber(config: config, kernelMTU: kernelMTU)
    }

    /// Media starts at the base until a probe confirms more.
    @Test func startsAtTheBaseUnconfirmed() {
        let prober = makeProber()
        #expect(prober.mtu == 1200)
        #expect(prober.source == .kernel)
    }

    /// With and without ICMP, every path MTU between the base and the interface is found exactly.
    @Test(arguments: [(1280, true), (1280, false), (1400, true), (1400, false), (1500, false), (1201, false),
                      (9000, false), (4000, true), (4000, false)])
    func findsThePathMTUExactly(pathMTU: Int, icmp: Bool) {
        var prober = makeProber(maxMTU: pathMTU > 1500 ? 9000 : 1500)
        var path = SimulatedPath(pathMTU: pathMTU, icmp: icmp)
        let done = path.run(&prober, seconds: 10)
        #expect(done != nil)
        #expect(prober.mtu == pathMTU)
        #expect(prober.source == .probe)
        // Bisection with three tries per failed size: well within 10 s.
        #expect((done ?? .max) < 5_000_000_000, "took \(Double(done ?? 0) / 1e9) s")
        if icmp && pathMTU < 1500 { #expect(prober.probesSent <= 3, "ICMP names the size: \(prober.probesSent) probes") }
    }

    /// A receiver that never confirms anything: the kernel's view is used (at most 1500).
    @Test func silentReceiverFallsBackToTheKernel() {
        var prober = makeProber(maxMTU: 9000, kernelMTU: 9000)
        var path = SimulatedPath(pathMTU: 0, icmp: false)
        _ = path.run(&prober, seconds: 3)
        #expect(prober.mtu == 1500)
        #expect(prober.source == .kernel)
        #expect(!prober.isSearching)
    }

    /// ICMP lowers the MTU at once; a probe then confirms the announced size.
    @Test func icmpLowersAndProbeConfirms() {
        var prober = makeProber()
        var path = SimulatedPath(pathMTU: 1500, icmp: true)
        _ = path.run(&prober, seconds: 1)
        #expect(prober.mtu == 1500)
        path.pathMTU = 1280
        let changed1 = prober.pathMTUAnnounced(1280, now: path.now)
        #expect(changed1)
        #expect(prober.mtu == 1280)
        #expect(prober.source == .kernel)
        _ = path.run(&prober, seconds: 1)
        #expect(prober.mtu == 1280)
        #expect(prober.source == .probe)
        // Repeated announcements of what is known change nothing.
        let changed2 = prober.pathMTUAnnounced(1280, now: path.now)
        #expect(!changed2)
        let changed3 = prober.pathMTUAnnounced(1400, now: path.now)
        #expect(!changed3)
    }

    /// Large media lost in a row while the receiver reports: back to the base, then the
    /// new (smaller) path is found by probing alone.
    @Test func blackHoleFallsBackAndResearches() {
        var prober = makeProber()
        var path = SimulatedPath(pathMTU: 1500, icmp: false)
        _ = path.run(&prober, seconds: 1)
        #expect(prober.mtu == 1500)
        path.pathMTU = 1280
        // Some losses interleaved with confirmations: not a black hole.
        let changed4 = prober.mediaAboveBase(lost: 4, lostSends: 1, confirmed: 0, receiverAlive: true, now: path.now)
        #expect(!changed4)
        let changed5 = prober.mediaAboveBase(lost: 5, lostSends: 1, confirmed: 3, receiverAlive: true, now: path.now)
        #expect(!changed5)
        let changed6 = prober.mediaAboveBase(lost: 6, lostSends: 1, confirmed: 0, smallConfirmed: 2, receiverAlive: false, now: path.now)
        #expect(!changed6)
        // A receiver that stopped confirms nothing small either: no black hole, whatever is lost.
        var silent = makeProber()
        var silentPath = SimulatedPath(pathMTU: 1500, icmp: false)
        _ = silentPath.run(&silent, seconds: 1)
        let changedSilent = silent.mediaAboveBase(lost: 20, lostSends: 4, confirmed: 0, receiverAlive: true, now: silentPath.now)
        #expect(!changedSilent)
        let changed7 = prober.mediaAboveBase(lost: 1, lostSends: 1, confirmed: 0, smallConfirmed: 1, receiverAlive: true, now: path.now)
        #expect(changed7)
        #expect(prober.mtu == 1200)
        #expect(prober.blackHoles == 1)
        let started = path.now
        let done = path.run(&prober, seconds: 10)
        #expect(prober.mtu == 1280)
        #expect(prober.source == .probe)
        #expect((done ?? .max) - started < 5_000_000_000)
    }

    /// One burst of large packets dropped whole while small ones get through (a congested queue,
    /// or a receive buffer that takes a GSO burst as one GRO buffer) is no black hole, however
    /// many packets it held; large losses from a second send with none confirmed between are.
    @Test func oneBurstDroppedWholeIsNoBlackHole() {
        var prober = makeProber()
        var path = SimulatedPath(pathMTU: 1500, icmp: false)
        _ = path.run(&prober, seconds: 1)
        #expect(prober.mtu == 1500)
        let burst = prober.mediaAboveBase(lost: 16, lostSends: 1, confirmed: 0, smallConfirmed: 4,
                                          receiverAlive: true, now: path.now)
        #expect(!burst)
        #expect(prober.mtu == 1500 && prober.blackHoles == 0)
        // A large packet confirmed after it: the streak is over, the next burst starts anew.
        _ = prober.mediaAboveBase(lost: 0, lostSends: 0, confirmed: 1, receiverAlive: true, now: path.now)
        let nextBurst = prober.mediaAboveBase(lost: 16, lostSends: 1, confirmed: 0, smallConfirmed: 4,
                                              receiverAlive: true, now: path.now)
        #expect(!nextBurst)
        #expect(prober.blackHoles == 0)
        // The next send's large packets lost too, nothing large confirmed between: a black hole.
        let secondSend = prober.mediaAboveBase(lost: 2, lostSends: 1, confirmed: 0, smallConfirmed: 1,
                                               receiverAlive: true, now: path.now)
        #expect(secondSend)
        #expect(prober.mtu == 1200 && prober.blackHoles == 1)
    }

    /// Large media lost with no small media to tell: a base-size probe asks whether the
    /// path still works, and its confirmation makes it a black hole.
    @Test func blackHoleIsConfirmedByABaseProbe() {
        var prober = makeProber()
        var path = SimulatedPath(pathMTU: 1500, icmp: false)
        _ = path.run(&prober, seconds: 1)
        path.pathMTU = 1280
        _ = prober.mediaAboveBase(lost: 10, lostSends: 1, confirmed: 0, receiverAlive: true, now: path.now)
        #expect(prober.mtu == 1500)
        let probe = prober.nextProbe(now: path.now)
        #expect(probe?.size == 1200)
        prober.probeConfirmed(id: probe?.id ?? 0, size: 1200, now: path.now + 1)
        _ = prober.mediaAboveBase(lost: 1, lostSends: 1, confirmed: 0, receiverAlive: true, now: path.now + 2)
        #expect(prober.mtu == 1200)
        #expect(prober.blackHoles == 1)
    }

    /// The search stops at the ceiling (9000) even on loopback's 65536.
    @Test func ceilingCapsTheSearch() {
        var prober = makeProber(maxMTU: 65_536, kernelMTU: 65_535)
        var path = SimulatedPath(pathMTU: 65_535, icmp: false)
        _ = path.run(&prober, seconds: 2)
        #expect(prober.mtu == 9000)
    }

    /// After the re-probe interval a larger path is found again.
    @Test func reprobingFindsALargerPath() {
        var prober = makeProber()
        var path = SimulatedPath(pathMTU: 1280, icmp: true)
        _ = path.run(&prober, seconds: 1)
        #expect(prober.mtu == 1280)
        path.pathMTU = 1500
        _ = path.run(&prober, seconds: 1.5, stopWhenDone: false)
        #expect(prober.mtu == 1280, "not before the interval")
        _ = path.run(&prober, seconds: 1.5, stopWhenDone: false)
        #expect(prober.mtu == 1500)
        #expect(prober.searches >= 2)
    }

    /// Without probing (no feedback), the kernel's view and ICMP decide; no probe is sent.
    @Test func withoutProbingOnlyTheKernelSpeaks() {
        var config = PathMTUProberConfig(baseMTU: 1200, maxMTU: 9000)
        config.probing = false
        var prober = PathMTUProber(config: config, kernelMTU: 9000)
        #expect(prober.mtu == 1500)
        let changed8 = prober.nextProbe(now: 1)
        #expect(changed8 == nil)
        let changed9 = prober.pathMTUAnnounced(1400, now: 2)
        #expect(changed9)
        #expect(prober.mtu == 1400)
        let changed10 = prober.nextProbe(now: 3)
        #expect(changed10 == nil)
    }

    /// A congested path dropping 30 % of all packets: with three attempts per size, some
    /// searches take congestion for a smaller MTU; told the loss rate, the prober gives each size
    /// enough attempts (6) that 40 searches with the same losses all find 1500.
    @Test func congestionIsNotTakenForASmallerMTU() {
        func searches(knowingTheLoss: Bool) -> [Int] {
            (1...40).map { seed in
                var prober = makeProber()
                if knowingTheLoss { prober.pathLossRate = 0.3 }
                var path = SimulatedPath(pathMTU: 1500, icmp: false)
                path.loss = 0.3
                path.random = SplitMix64(seed: UInt64(seed))
                _ = path.run(&prober, seconds: 30)
                return prober.mtu
            }
        }
        #expect(makeProber().attemptLimit == 3)
        var lossy = makeProber()
        lossy.pathLossRate = 0.3
        #expect(lossy.attemptLimit == 6)
        let blind = searches(knowingTheLoss: false)
        #expect(blind.contains { $0 < 1500 }, "three attempts per size: some searches should end low: \(blind)")
        let informed = searches(knowingTheLoss: true)
        #expect(informed.allSatisfy { $0 == 1500 }, "\(informed)")
    }
}
