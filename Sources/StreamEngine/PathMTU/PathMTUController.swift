import MediaFormats
import UringIO

/// Path MTU for one flow, measured: owns the `PathMTUProber`, reads ICMP announcements from
/// the socket's error queue, feeds the receiver's probe confirmations and the flow's losses
/// to the prober, and resizes the flow's packetizer when the MTU in use changes.
///
/// It is also the producer the pacer drains: a due probe goes first, on a route of its own
/// (so it is never part of a media GSO send and its completion is told apart by its tag),
/// then the flow's media. Probes are paced like media and are not media at the receiver.
final class PathMTUController: DatagramProducer {
    /// Tags of probe sends have this bit set (media tags count packets from 0).
    static let probeTagBit: UInt64 = 1 << 63

    private let flow: MediaFlow
    private let socket: UDPSocket
    private let probeRoute: Int
    /// IP and UDP headers in front of each payload, and the SRTP tag after it.
    let overhead: Int
    private(set) var prober: PathMTUProber?
    // Read per datagram (`peekDatagram`), on the engine thread only: no dynamic exclusivity check.
    @exclusivity(unchecked) private var pendingProbe: PathMTUProber.Probe?
    /// Full-size packets lost and confirmed: the black-hole evidence.
    private var evidence = BlackHoleEvidence()
    /// Media loss rate (smoothed over ~200 ms of ticks), and the lost count it was last taken from.
    private var lossRate = 0.0
    private var lostSeen = 0
    private let configuredMTU: Int?
    /// Monotonic time the prober started.
    private let startedAt: Int64

    // Counters for the stats.
    /// Probe datagrams the kernel accepted.
    private(set) var probeDatagramsSent = 0
    /// Probe sends that failed.
    private(set) var probeSendFailures = 0
    /// ICMP (error queue) reports read, of any kind.
    private(set) var errorQueueReports = 0
    /// Milliseconds from the start until the last completed search found its size.
    private(set) var lastSearchMilliseconds: Double?

    /// Arms the socket's error watch (`UDPSocket.armErrorWatch`) again, false when it could
    /// not; nil: no watch, the error queue is drained at every tick. With a watch it is drained
    /// only after the watch fired (`errorQueueSignalled`), at the first tick, and while the
    /// watch cannot be armed.
    var armErrorWatch: (() -> Bool)?
    /// The error watch fired: something waits on the error queue.
    private var errorQueueMayHoldReports = true

    /// The socket's error watch fired: the next tick drains the error queue.
    func errorQueueSignalled() { errorQueueMayHoldReports = true }

    /// What the error queue holds: read when the watch fired (then watched again), or always
    /// without a watch.
    private func drainErrorQueue() -> [SocketErrorReport] {
        guard let armErrorWatch else { return socket.drainErrorQueue() }
        guard errorQueueMayHoldReports else { return [] }
        errorQueueMayHoldReports = false
        let reports = socket.drainErrorQueue()
        if reports.isEmpty { socket.takePendingError() }  // an error not queued would keep the watch firing
        if !armErrorWatch() { errorQueueMayHoldReports = true }
        return reports
    }

    /// Sets up MTU handling for `flow` on `socket` (connected). `fixedMTU` pins it (no probing);
    /// without feedback there is nothing to confirm probes with: the kernel's view and ICMP only.
    /// `trailer`: bytes added after each datagram the flow writes (the SRTP tag).
    init(flow: MediaFlow, socket: UDPSocket, probeRoute: Int, fixedMTU: Int?, feedback: Bool, trailer: Int = 0,
         configure: (inout PathMTUProberConfig) -> Void, now: Int64) {
        self.flow = flow
        self.socket = socket
        self.probeRoute = probeRoute
        self.overhead = socket.headerOverhead + trailer
        self.configuredMTU = fixedMTU
        self.startedAt = now
        guard fixedMTU == nil else { return }
        let kernel = socket.kernelPathMTU() ?? 1500
        let interface = socket.localInterfaceMTU() ?? kernel
        var config = PathMTUProberConfig(baseMTU: socket.family == .ipv6 ? 1280 : 1200, maxMTU: max(interface, kernel))
        config.probing = feedback
        configure(&config)
        let prober = PathMTUProber(config: config, kernelMTU: kernel)
        self.prober = prober
        flow.log.recordsLostPackets = true
    }

    /// The receiver cannot confirm probes (a third-party receiver that sends only receiver
    /// reports, or none): no probing, the kernel's view and ICMP from now on.
    func stopProbing() {
        guard var config = prober?.config, config.probing else { return }
        config.probing = false
        prober = PathMTUProber(config: config, kernelMTU: socket.kernelPathMTU() ?? 1500)
        pendingProbe = nil
        apply()
    }

    /// Our interface's MTU toward the peer, when the route monitor said (caps a configured MTU too).
    private var interfaceMTU: Int?

    /// The MTU the flow's datagrams are sized for.
    var mtu: Int { min(configuredMTU ?? prober?.mtu ?? 1500, interfaceMTU ?? .max) }

    /// The route monitor found the flow on another path (interface or next hop): the MTU is
    /// searched for again at once, from the base, as on a new path; the loss rate starts over.
    func pathChanged(interfaceMTU newInterfaceMTU: Int?, now: Int64) {
        interfaceMTU = newInterfaceMTU
        lossRate = 0
        lostSeen = flow.log.lost
        evidence.skip(&flow.log)
        guard var prober else { return apply() }
        let kernel = socket.kernelPathMTU() ?? 1500
        prober.pathChanged(kernelMTU: kernel, interfaceMTU: newInterfaceMTU ?? max(kernel, prober.config.maxMTU), now: now)
        pendingProbe = nil
        self.prober = prober
        apply()
    }

    /// The route monitor read our interface's MTU toward the peer: a smaller one than the MTU
    /// in use clamps the flow's packets from the next one on; a larger one is searched for.
    func interfaceMTUChanged(_ value: Int, now: Int64) {
        interfaceMTU = value
        if var prober {
            prober.interfaceMTUChanged(value, now: now)
            if let probe = pendingProbe, probe.size > value { pendingProbe = nil }
            self.prober = prober
        }
        apply()
    }

    /// The path is viable again: a probe that was out when it went is forgotten.
    func resumed() {
        prober?.forgetOutstanding()
        pendingProbe = nil
    }

    /// While the path is not viable nothing is sent and nothing can be learned from losses:
    /// the error queue is drained and the losses of the outage are passed over (they are no
    /// black-hole evidence), so the prober resumes where it was.
    func pause() {
        _ = drainErrorQueue()
        evidence.skip(&flow.log)
        lostSeen = flow.log.lost
    }

    /// Where `mtu` comes from.
    var source: MTUSource { configuredMTU != nil ? .configured : prober?.source ?? .kernel }

    /// Periodic work: ICMP from the error queue, black-hole evidence from the flow's log,
    /// the next probe. `receiverAlive`: feedback is arriving now. `receiverConfirmsProbes`:
    /// the receiver is one that confirms probes (it sends per-packet feedback); nil while that
    /// is not known yet, and no probe goes out until it is (a third-party receiver would take
    /// a probe for a packet of the stream: ffmpeg counts ~21,000 packets missed per probe).
    func tick(now: Int64, roundTripMilliseconds: Double?, receiverAlive: Bool, receiverConfirmsProbes: Bool?) {
        if receiverConfirmsProbes == false { stopProbing() }
        let reports = drainErrorQueue()  // drained even with a pinned MTU
        errorQueueReports += reports.count
        // The prober is worked on in place: `guard var prober` copied it out and back (304 bytes
        // twice a tick, also while the MTU is pinned; the test for nil still copies it once:
        // results/profile.md section 58).
        guard prober != nil else { return }
        tickProber(&prober!, reports: reports, now: now, roundTripMilliseconds: roundTripMilliseconds,
                   receiverAlive: receiverAlive, receiverConfirmsProbes: receiverConfirmsProbes)
        apply()
    }

    /// `tick`'s work on the prober: the kernel's MTU reports, the black-hole evidence, the RTT and
    /// loss rate, the next probe.
    private func tickProber(_ prober: inout PathMTUProber, reports: [SocketErrorReport], now: Int64,
                            roundTripMilliseconds: Double?, receiverAlive: Bool, receiverConfirmsProbes: Bool?) {
        for report in reports {
            if let announced = report.pathMTU { prober.pathMTUAnnounced(announced, now: now) }
        }
        // Full-size media lost (none as large sent after it confirmed), against full-size media
        // confirmed: the black-hole evidence.
        let read = evidence.read(&flow.log, fullSize: flow.fullDatagramSize, maxSize: prober.mtu - overhead,
                                 baseSize: min(prober.config.baseMTU, prober.kernelMTU) - overhead)
        prober.mediaAboveBase(lost: read.lost, lostSends: read.lostSends, confirmed: read.confirmed,
                              smallConfirmed: read.smallConfirmed, receiverAlive: receiverAlive, now: now)
        prober.roundTripTime = roundTripMilliseconds.map { Int64($0 * 1e6) }
        let newlyLost = max(0, flow.log.lost - lostSeen)
        let newlyConfirmed = max(0, read.confirmed + read.smallConfirmed)
        lostSeen = flow.log.lost
        if newlyLost + newlyConfirmed > 0 {
            lossRate = lossRate * 0.9 + Double(newlyLost) / Double(newlyLost + newlyConfirmed) * 0.1
        }
        prober.pathLossRate = lossRate
        if pendingProbe == nil && receiverConfirmsProbes == true { pendingProbe = prober.nextProbe(now: now) }
        if let completed = prober.searchCompletedAt, !prober.isSearching {
            lastSearchMilliseconds = Double(completed - startedAt) / 1e6
        }
    }

    /// The receiver confirmed probes.
    func confirmed(_ entries: [RTCPPathMTUConfirmation.Entry], now: Int64) {
        guard var prober, !entries.isEmpty else { return }
        for entry in entries { prober.probeConfirmed(id: entry.probeID, size: Int(entry.size) + overhead, now: now) }
        self.prober = prober
        apply()
    }

    /// A send completion of a probe (tag with `probeTagBit`). Returns false for media.
    func handleSendReport(_ report: SendReport) -> Bool {
        guard report.tag & Self.probeTagBit != 0 else { return false }
        probeDatagramsSent += report.sentDatagrams
        if report.failedDatagrams > 0 {
            probeSendFailures += report.failedDatagrams
            prober?.probeSendFailed(id: UInt32(truncatingIfNeeded: report.tag))
        }
        return true
    }

    /// Sizes the flow's packets for the MTU in use (from its next packet on; see `MediaFlow`).
    private func apply() {
        let size = mtu - overhead
        if size != flow.maxDatagramSize { try? flow.setMaxDatagramSize(size) }
    }

    // MARK: - DatagramProducer

    func peekDatagram() -> PendingDatagram? {
        // Not viable: no probe either (the flow drops what waits, see MediaFlow).
        if let probe = pendingProbe, flow.pathViable {
            return PendingDatagram(route: probeRoute, size: probe.size - overhead,
                                   tag: Self.probeTagBit | UInt64(probe.id))
        }
        return flow.peekDatagram()
    }

    var pendingBytes: Int { (pendingProbe.map { $0.size - overhead } ?? 0) + flow.pendingBytes }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        guard let probe = pendingProbe else { return flow.writeDatagram(into: buffer) }
        PathMTUProbe(probeID: probe.id, size: probe.size - overhead, ssrc: flow.ssrc)
            .write(into: buffer, timestamp: flow.lastRTPTimestamp)
        pendingProbe = nil
    }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension PathMTUController: Sendable {}

extension PathMTUController {
    /// Copies the path fields into the sender's stats.
    func publish(into stats: inout SenderStats) {
        stats.pathMTU = mtu
        stats.mtuSource = source
        stats.probesSent = probeDatagramsSent
        stats.probesConfirmed = prober?.probesConfirmed ?? 0
        stats.probesLost = prober?.probesLost ?? 0
        stats.icmpMTUReports = prober?.icmpReports ?? 0
        stats.blackHoles = prober?.blackHoles ?? 0
        stats.mtuSearches = prober?.searches ?? 0
        stats.mtuFoundAfterMs = lastSearchMilliseconds
        stats.framesClamped = flow.framesClamped
    }
}
