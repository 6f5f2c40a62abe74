import Glibc

/// Configuration of packetization-layer path-MTU discovery (RFC 8899). Sizes are IP MTUs
/// (IP and UDP headers included); times are nanoseconds.
struct PathMTUProberConfig: Sendable, Equatable {
    /// The size assumed to work on any path (RFC 8899 BASE_PLPMTU): 1280 for IPv6, a
    /// configured minimum (1200) for IPv4. Media starts here until a probe confirms more.
    var baseMTU: Int
    /// The largest size worth probing: the local interface's MTU toward the peer.
    var maxMTU: Int
    /// A probe not confirmed within this time is taken as lost.
    var probeTimeout: Int64 = 150_000_000
    /// Lost probes of one size before that size counts as too big (RFC 8899 MAX_PROBES).
    var maxProbes = 3
    /// After a search ends, the next one starts this much later (finds a larger path again).
    var reprobeInterval: Int64 = 15_000_000_000
    /// Media datagrams above the base lost in a row (none above it confirmed meanwhile)
    /// that make the current size a black hole.
    var blackHoleLosses = 6
    /// Sends (wake-ups that put media on the wire) those losses must come from: a congested
    /// queue, or a receive buffer taking a GSO burst as one GRO buffer, drops one burst whole;
    /// a black hole takes every large packet of every send.
    var blackHoleSends = 2
    /// The largest size probed even when the interface allows more (loopback's 65536 buys
    /// nothing but larger loss units).
    var ceilingMTU = 9000
    /// Probe at all (false: the kernel's view and ICMP only, e.g. a receiver without feedback).
    var probing = true

    /// Makes a configuration.
    init(baseMTU: Int, maxMTU: Int) {
        self.baseMTU = baseMTU
        self.maxMTU = maxMTU
    }
}

/// Packetization-layer path-MTU discovery (RFC 8899 DPLPMTUD) as a pure state machine:
/// times are passed in, and it tells the caller which probe to send and what MTU to use.
///
/// A size is used only once the receiver confirmed a probe of it (before that: the base).
/// The search starts at the kernel's path MTU, tries the local interface MTU next, then
/// bisects between the largest confirmed size and the smallest failed one. ICMP
/// "fragmentation needed" lowers the MTU at once and becomes the next candidate. Media
/// above the base that stops getting through (a black hole) drops it back to the base and
/// starts a new search; after `reprobeInterval` a new search looks for a larger path.
struct PathMTUProber: Sendable {
    /// Where the MTU in use comes from.
    /// A probe to put on the wire now.
    struct Probe: Sendable, Equatable {
        /// Its id (echoed in the receiver's confirmation).
        var id: UInt32
        /// Its IP size.
        var size: Int
    }

    /// The configuration (`maxMTU` follows the interface: `interfaceMTUChanged`, `pathChanged`).
    private(set) var config: PathMTUProberConfig
    /// The MTU to packetize for now.
    private(set) var mtu: Int
    /// Where `mtu` comes from.
    private(set) var source: MTUSource = .kernel
    /// The kernel's path MTU when the prober started or the path last changed (the first candidate).
    private(set) var kernelMTU: Int

    private var confirmed: Int          // largest size known to work (the base until a probe says more)
    private var confirmedByProbe = false
    private var tooBig: Int             // smallest size known to fail (maxMTU + 1: none)
    private var searching = true
    private var disabled = false        // the peer never confirmed even the base: kernel view until the next search
    private var baseFailed = false      // this search's probes of the base got no answer
    private var minimumValidID: UInt32 = 1  // confirmations of probes older than the last path change are stale
    private var hint: Int?              // the next candidate (ICMP's MTU, the kernel's, the interface's)
    private var triedMax = false
    private var outstanding: (probe: Probe, sentAt: Int64, attempt: Int)?
    private var nextID: UInt32 = 1
    private var nextSearchAt: Int64 = 0
    private var largeLossStreak = 0
    private var largeLossSends = 0  // the sends the streak's losses came from
    private var smallConfirmedDuringStreak = false  // the path still carries small packets

    // Counters.
    /// Probes handed out to send.
    private(set) var probesSent = 0
    /// Probes the receiver confirmed.
    private(set) var probesConfirmed = 0
    /// Probes given up (timed out, failed to send, or answered by ICMP).
    private(set) var probesLost = 0
    /// Path-MTU announcements from ICMP (or local EMSGSIZE) taken into account.
    private(set) var icmpReports = 0
    /// Times the MTU in use stopped working and fell back to the base.
    private(set) var blackHoles = 0
    /// Searches started (the first one included).
    private(set) var searches = 1
    /// Monotonic time the current search found its size (nil while searching).
    private(set) var searchCompletedAt: Int64?
    /// The smoothed round-trip time, when known: probes wait for at least two of them (plus 50 ms).
    var roundTripTime: Int64?
    /// The media loss rate on the path now (0...1, from the sender's feedback). On a lossy path
    /// a probe size gets more attempts before it counts as too big: congestion drops probes too.
    var pathLossRate = 0.0

    /// Attempts per probe size: `maxProbes`, or on a path losing more than 10 % as many as make
    /// losing every one of them to congestion as unlikely as 1 in 1000 (at most 10; at 30 %
    /// loss, 6).
    var attemptLimit: Int {
        guard pathLossRate > 0.1 else { return config.maxProbes }
        let needed = Int((Glibc.log(0.001) / Glibc.log(min(pathLossRate, 0.5))).rounded(.up))
        return min(10, max(config.maxProbes, needed))
    }

    /// Starts discovery with the kernel's path MTU toward the peer (`IP_MTU`).
    init(config: PathMTUProberConfig, kernelMTU: Int) {
        var config = config
        config.maxMTU = min(config.maxMTU, max(config.ceilingMTU, config.baseMTU))
        self.config = config
        self.kernelMTU = min(kernelMTU, config.maxMTU)
        let base = min(config.baseMTU, self.kernelMTU)
        confirmed = base
        tooBig = config.maxMTU + 1
        hint = self.kernelMTU > base ? self.kernelMTU : nil
        disabled = !config.probing
        // Without probing there is nothing to confirm with: the kernel's view (at most 1500
        // until something confirms more) is all there is.
        mtu = disabled ? min(self.kernelMTU, max(1500, base)) : base
        if disabled { searching = false }
    }

    /// True while a search is running.
    var isSearching: Bool { searching }

    /// The probe to send now, if any. The prober counts it as sent.
    mutating func nextProbe(now: Int64) -> Probe? {
        guard config.probing else { return nil }
        if outstanding == nil && largeLossStreak >= config.blackHoleLosses && !smallConfirmedDuringStreak
            && mtu > min(config.baseMTU, kernelMTU) {
            // Large media is getting lost: does the path still carry the base size?
            return send(size: min(config.baseMTU, kernelMTU), attempt: attemptLimit, now: now)
        }
        if let pending = outstanding {
            let timeout = max(config.probeTimeout, (roundTripTime ?? 0) * 2 + 50_000_000)
            guard now - pending.sentAt >= timeout else { return nil }
            if pending.attempt < attemptLimit {
                return send(size: pending.probe.size, attempt: pending.attempt + 1, now: now)
            }
            probesLost += 1
            outstanding = nil
            // An unanswered base-size check after a confirmed search says the receiver is
            // silent, not that the base is too big.
            if !(confirmedByProbe && pending.probe.size <= min(config.baseMTU, kernelMTU)) {
                failed(size: pending.probe.size)
            }
        }
        if !searching {
            guard now >= nextSearchAt else { return nil }
            startSearch()
        }
        guard let size = nextCandidate() else {
            finishSearch(now: now)
            return nil
        }
        return send(size: size, attempt: 1, now: now)
    }

    /// The probe could not be sent (e.g. EMSGSIZE from the local stack): too big.
    mutating func probeSendFailed(id: UInt32) {
        guard let pending = outstanding, pending.probe.id == id else { return }
        outstanding = nil
        probesLost += 1
        failed(size: pending.probe.size)
    }

    /// The receiver confirmed a probe of `size`. Returns true when the MTU in use changed.
    @discardableResult
    mutating func probeConfirmed(id: UInt32, size: Int, now: Int64) -> Bool {
        guard config.probing, id >= minimumValidID, size >= 68, size <= config.maxMTU else { return false }
        probesConfirmed += 1
        if let pending = outstanding, pending.probe.size <= size { outstanding = nil }
        if size >= tooBig { tooBig = min(size + 1, config.maxMTU + 1) }  // the "failure" was loss
        confirmedByProbe = true
        let before = mtu
        confirmed = max(confirmed, size)
        mtu = confirmed
        source = .probe
        if size > min(config.baseMTU, kernelMTU) {
            largeLossStreak = 0
            largeLossSends = 0
        } else if largeLossStreak > 0 {
            smallConfirmedDuringStreak = true
        }
        return mtu != before
    }

    /// The kernel announced a path MTU (ICMP "fragmentation needed" / "packet too big", or a
    /// local EMSGSIZE). Only ever lowers: a larger size must be confirmed by a probe.
    /// Returns true when the MTU in use changed.
    @discardableResult
    mutating func pathMTUAnnounced(_ announced: Int, now: Int64) -> Bool {
        let size = max(announced, min(config.baseMTU, kernelMTU))
        guard announced >= 68, size + 1 < tooBig || size < mtu else { return false }  // nothing new
        icmpReports += 1
        minimumValidID = nextID
        if let pending = outstanding, pending.probe.size > size {
            outstanding = nil
            probesLost += 1
        }
        tooBig = min(tooBig, size + 1)
        let before = mtu
        if confirmed > size { confirmed = min(confirmed, size); confirmedByProbe = false }
        if mtu > size {
            mtu = size
            source = .kernel
        }
        if !disabled {
            hint = size > confirmed ? size : nil
            if !searching { startSearch(keepBounds: true) }
        }
        return mtu != before
    }

    /// The flow's traffic now takes another path (interface or next hop): start over as on a
    /// new path (RFC 8899: back to the base, search at once), with the kernel's path MTU and the
    /// new interface's MTU. Confirmations of probes sent before are stale.
    mutating func pathChanged(kernelMTU: Int, interfaceMTU: Int, now: Int64) {
        config.maxMTU = min(max(interfaceMTU, config.baseMTU), max(config.ceilingMTU, config.baseMTU))
        self.kernelMTU = min(kernelMTU, config.maxMTU)
        let base = min(config.baseMTU, self.kernelMTU)
        minimumValidID = nextID
        outstanding = nil
        largeLossStreak = 0
        largeLossSends = 0
        smallConfirmedDuringStreak = false
        confirmed = base
        confirmedByProbe = false
        source = .kernel
        hint = self.kernelMTU > base ? self.kernelMTU : nil
        disabled = !config.probing
        mtu = disabled ? min(self.kernelMTU, max(1500, base)) : base
        if disabled {
            searching = false
        } else {
            startSearch()
        }
    }

    /// The path was not viable for a while (no route): a probe out when it went is no
    /// evidence of its size, so it is forgotten (and its late confirmation ignored).
    mutating func forgetOutstanding() {
        guard outstanding != nil else { return }
        outstanding = nil
        minimumValidID = nextID
    }

    /// Our own interface's MTU changed (`ip link set ... mtu N`): a smaller one caps the MTU
    /// in use at once (no probe needed: nothing larger can leave), a larger one is searched for.
    /// Returns true when the MTU in use changed.
    @discardableResult
    mutating func interfaceMTUChanged(_ interfaceMTU: Int, now: Int64) -> Bool {
        let ceiling = max(config.ceilingMTU, config.baseMTU)
        let newMax = min(max(interfaceMTU, 68), ceiling)
        guard newMax != config.maxMTU else { return false }
        let grew = newMax > config.maxMTU
        config.maxMTU = newMax
        kernelMTU = min(kernelMTU, newMax)
        tooBig = min(tooBig, newMax + 1)
        if grew {
            tooBig = newMax + 1
            if !disabled && !searching { startSearch(keepBounds: true) }
            triedMax = false
            return false
        }
        let before = mtu
        if let pending = outstanding, pending.probe.size > newMax { outstanding = nil }
        confirmed = min(confirmed, newMax)
        if mtu > newMax {
            mtu = newMax
            if source == .probe && !confirmedByProbe { source = .kernel }
        }
        return mtu != before
    }

    /// Media feedback since the last call (`BlackHoleEvidence`): full-size datagrams (sized for
    /// the MTU in use, above the base) declared lost with none as large sent after them
    /// confirmed (and the sends they were lost from, each counted once across calls), full-size
    /// datagrams confirmed, and smaller ones confirmed. Enough
    /// large losses in a row from more than one send with no large one confirmed, while small
    /// packets (media or a base-size probe) still get through and the receiver reports
    /// (`receiverAlive`), is a black hole: back to the base and search again. A receiver
    /// that stopped altogether confirms nothing small, so it is no black hole.
    /// Returns true when the MTU in use changed.
    @discardableResult
    mutating func mediaAboveBase(lost: Int, lostSends: Int, confirmed confirmedCount: Int, smallConfirmed: Int = 0,
                                        receiverAlive: Bool, now: Int64) -> Bool {
        if confirmedCount > 0 {
            // The losses passed with it were sent after what was confirmed (`BlackHoleEvidence`):
            // the streak before them is over, they begin the next.
            largeLossStreak = 0
            largeLossSends = 0
            smallConfirmedDuringStreak = false
        }
        largeLossStreak += lost
        largeLossSends += lostSends
        if largeLossStreak > 0 && smallConfirmed > 0 { smallConfirmedDuringStreak = true }
        guard !disabled, receiverAlive, largeLossStreak >= config.blackHoleLosses, largeLossSends >= config.blackHoleSends,
              smallConfirmedDuringStreak, mtu > min(config.baseMTU, kernelMTU) else { return false }
        largeLossStreak = 0
        largeLossSends = 0
        smallConfirmedDuringStreak = false
        blackHoles += 1
        minimumValidID = nextID
        tooBig = min(tooBig, mtu)
        confirmed = min(config.baseMTU, kernelMTU)
        confirmedByProbe = false
        mtu = confirmed
        source = .kernel
        outstanding = nil
        startSearch(keepBounds: true)
        return true
    }

    // MARK: - Search

    private mutating func startSearch(keepBounds: Bool = false) {
        searching = true
        searchCompletedAt = nil
        searches += 1
        baseFailed = false
        if !keepBounds {
            tooBig = config.maxMTU + 1
            triedMax = false
        }
    }

    private mutating func finishSearch(now: Int64) {
        searching = false
        searchCompletedAt = now
        nextSearchAt = now + config.reprobeInterval
        hint = nil
        if !confirmedByProbe {
            // Not even the base was confirmed: a receiver that does not answer probes.
            // Fall back to the kernel's view and try again at the next interval.
            disabled = true
            mtu = min(kernelMTU, tooBig - 1, max(1500, confirmed))
            if mtu < confirmed { mtu = confirmed }
            source = .kernel
        }
    }

    private mutating func failed(size: Int) {
        if !confirmedByProbe && size <= confirmed {
            baseFailed = true  // even the base got no answer: the search ends (see finishSearch)
        } else {
            tooBig = min(tooBig, size)
        }
    }

    private mutating func nextCandidate() -> Int? {
        if disabled && !confirmedByProbe {
            // A new attempt after a peer that did not answer: the base first.
            disabled = false
            return confirmed
        }
        if let candidate = hint {
            hint = nil
            if candidate > confirmed && candidate < tooBig { return candidate }
        }
        if !confirmedByProbe { return baseFailed ? nil : confirmed }  // the base: does the peer answer at all?
        if !triedMax && tooBig == config.maxMTU + 1 && config.maxMTU > confirmed {
            triedMax = true
            return config.maxMTU
        }
        guard tooBig - confirmed > 1 else { return nil }
        return (confirmed + tooBig) / 2
    }

    private mutating func send(size: Int, attempt: Int, now: Int64) -> Probe {
        let probe = Probe(id: nextID, size: size)
        nextID &+= 1
        outstanding = (probe, now, attempt)
        probesSent += 1
        return probe
    }
}
