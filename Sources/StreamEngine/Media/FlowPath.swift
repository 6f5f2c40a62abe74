import UringIO

/// One flow's path as the route monitor reports it, as a pure state machine: each lookup
/// (`NetworkPath`, or nil for no usable route) in, the transitions the flow acts on out.
struct FlowPathState: Sendable {
    /// What a lookup changed.
    enum Transition: Sendable, Equatable {
        /// No usable route (or the interface is down): stop sending media.
        case unviable
        /// A route is back after `unviable`.
        case viable
        /// The route now leaves by another interface or next hop than the last known one.
        case changed
        /// Our interface's MTU toward the peer is now this (first known, or changed).
        case interfaceMTU(Int)
        /// The kernel now picks another source address for the destination (the old one
        /// removed, or a new one preferred).
        case sourceChanged(String)
    }

    /// A usable route exists.
    private(set) var viable = true
    /// The last usable path seen (kept while not viable: the next one is compared with it).
    private(set) var path: NetworkPath?
    /// Times the route went to another interface or next hop.
    private(set) var changes = 0
    /// Times the path stopped being viable.
    private(set) var unviableEpisodes = 0
    /// Monotonic time the path stopped being viable (nil while it is).
    private(set) var unviableSince: Int64?
    /// Nanoseconds without a viable path in the episodes that ended.
    private var unviableEnded: Int64 = 0
    /// Monotonic time the path last stopped being viable, and last became viable again (nil: never).
    private(set) var lastUnviableAt: Int64?
    private(set) var lastViableAt: Int64?

    /// Takes a lookup made at `now`.
    mutating func update(_ lookup: NetworkPath?, now: Int64) -> [Transition] {
        guard let lookup, lookup.linkUp else {
            guard viable else { return [] }
            viable = false
            unviableSince = now
            unviableEpisodes += 1
            lastUnviableAt = now
            return [.unviable]
        }
        var transitions: [Transition] = []
        if !viable {
            viable = true
            unviableEnded += now - (unviableSince ?? now)
            unviableSince = nil
            lastViableAt = now
            transitions.append(.viable)
        }
        if let known = path, !known.sameHop(as: lookup) {
            changes += 1
            transitions.append(.changed)
        }
        if let mtu = lookup.mtu, mtu != path?.mtu { transitions.append(.interfaceMTU(mtu)) }
        if let source = lookup.source, let known = path?.source, source != known { transitions.append(.sourceChanged(source)) }
        path = lookup
        return transitions
    }

    /// Nanoseconds without a viable path so far, including an episode under way.
    func unviableTime(now: Int64) -> Int64 {
        unviableEnded + (unviableSince.map { now - $0 } ?? 0)
    }
}

extension SenderFlow {
    /// Asks the kernel for the flow's path now (at the start, and each time the route monitor
    /// heard of a change) and acts on what changed: no route stops the media (frames dropped
    /// and counted, the sockets and counters kept), a route back resumes it at a keyframe,
    /// another interface or next hop is a new path (the path MTU searched for again at once,
    /// the RTT estimates started over), a smaller interface MTU clamps the next packet.
    /// A query that fails leaves the state as it was.
    func refreshPath(_ query: RouteQuery) {
        let lookup: NetworkPath?
        do { lookup = try query.path(to: destination) } catch { return }
        let now = monotonicNanoseconds()
        flow.now = now
        let previousMTU = pathState.path?.mtu
        for transition in pathState.update(lookup, now: now) {
            switch transition {
            case .unviable:
                flow.pathViable = false
            case .viable:
                flow.pathViable = true
                pathMTU.resumed()
                rtcp.pathResumed(now: now)
                requestKeyframe()
            case .changed:
                pathMTU.pathChanged(interfaceMTU: lookup?.mtu, now: now)
                rtcp.restartPathEstimates()
            case .sourceChanged(let source):
                rebind(to: source)
            case .interfaceMTU(let mtu):
                // The first reading only clamps (the prober started from the interface's MTU).
                if previousMTU != nil || mtu < pathMTU.mtu { pathMTU.interfaceMTUChanged(mtu, now: now) }
            }
        }
        local.pathInterface = pathState.path?.interfaceName
        local.pathSource = pathState.path?.source
        local.pathGateway = pathState.path?.gateway
    }

    /// The kernel picks another source address toward the receiver: the flow's sockets (still
    /// sending from the old one, which a connected socket keeps) are connected again to take
    /// it, on the same ports; the receiver follows the same SSRC there (`ReceiveSession`).
    private func rebind(to source: String) {
        guard (try? socket.localAddress())?.host != source else { return }
        do throws(SystemError) {
            try socket.reconnect()
            if let rtcpSocket { try rtcpSocket.reconnect() }
            local.pathRebinds += 1
        } catch {
            local.errors[.rebind(error), default: 0] += 1
        }
    }

    /// Copies the path's state into the stats.
    func publishPath(now: Int64) {
        local.pathViable = pathState.viable
        local.pathUnviableMs = Double(pathState.unviableTime(now: now) / 1_000) / 1_000
        local.pathUnviableEpisodes = pathState.unviableEpisodes
        local.pathChanges = pathState.changes
        local.pathUnviableAt = pathState.lastUnviableAt.map { Double(realtimeFromMonotonic($0)) / 1e9 }
        local.pathViableAgainAt = pathState.lastViableAt.map { Double(realtimeFromMonotonic($0)) / 1e9 }
        local.pathResumeMs = flow.lastResumeDelay.map { Double($0 / 1_000) / 1_000 }
        local.framesDroppedUnviable = flow.framesDroppedUnviable
        local.pathMonitorOverruns = pathMonitor?.overruns ?? 0
        local.pathMonitorFailures = pathMonitor?.failures ?? 0
    }
}

/// A monotonic reading as CLOCK_REALTIME nanoseconds (the two clocks' offset now).
func realtimeFromMonotonic(_ monotonic: Int64) -> Int64 {
    realtimeNanoseconds() - monotonicNanoseconds() + monotonic
}
