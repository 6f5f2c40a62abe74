internal import CLibURing
import Glibc

/// What the kernel says the path toward a destination is now (`RTM_GETROUTE`, then
/// `RTM_GETLINK` for its interface).
public struct NetworkPath: Sendable, Equatable {
    /// The outgoing interface's index.
    public var interfaceIndex: Int32
    /// Its name (`eth0`), when the kernel gave one.
    public var interfaceName: String?
    /// The next hop (a router), nil for a peer on the link itself.
    public var gateway: String?
    /// The source address the kernel picks for the destination.
    public var source: String?
    /// The route's configured MTU (`ip route ... mtu N`), nil without one.
    public var routeMTU: Int?
    /// The interface's MTU.
    public var linkMTU: Int?
    /// The interface is up and has a carrier.
    public var linkUp: Bool

    /// Makes a path.
    public init(interfaceIndex: Int32, interfaceName: String? = nil, gateway: String? = nil, source: String? = nil,
                routeMTU: Int? = nil, linkMTU: Int? = nil, linkUp: Bool = true) {
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.gateway = gateway
        self.source = source
        self.routeMTU = routeMTU
        self.linkMTU = linkMTU
        self.linkUp = linkUp
    }

    /// The largest IP packet our side of the path takes: the smaller of the route's and the
    /// interface's MTU (nil when neither is known).
    public var mtu: Int? {
        switch (routeMTU, linkMTU) {
        case let (route?, link?): return min(route, link)
        case let (route, link): return route ?? link
        }
    }

    /// The same next hop: same interface, same gateway (the source address may differ).
    public func sameHop(as other: NetworkPath) -> Bool {
        interfaceIndex == other.interfaceIndex && gateway == other.gateway
    }

    /// Builds a path from the kernel's answers; nil when the route cannot carry datagrams
    /// (unreachable, blackhole, prohibit; a dead next hop).
    public init?(route: RouteMessage, link: LinkMessage?) {
        guard route.isUsable, let index = route.outputInterface else { return nil }
        self.init(interfaceIndex: index, interfaceName: link?.name, gateway: route.gateway.flatMap(addressText),
                  source: route.preferredSource.flatMap(addressText), routeMTU: route.configuredMTU,
                  linkMTU: link?.mtu, linkUp: link?.isUp ?? true)
    }
}

/// An address's numeric text from its 4 or 16 bytes (nil for other lengths). `inet_ntop(3)`.
func addressText(_ bytes: [UInt8]) -> String? {
    guard bytes.count == 4 || bytes.count == 16 else { return nil }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    let ok = bytes.withUnsafeBytes { raw in
        inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, raw.baseAddress, &text, socklen_t(text.count)) != nil
    }
    return ok ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
}

/// Asks the kernel for the path toward a destination: `RTM_GETROUTE` and `RTM_GETLINK` on a
/// NETLINK_ROUTE socket of its own, each answered at once (a request and its response, no
/// waiting on the network; a receive timeout of a second guards against a kernel that never
/// answers). For rare use: at the start and when the route monitor reports a change.
public final class RouteQuery {
    private let fd: Int32
    private var sequence: UInt32 = 0
    private var buffer = [UInt8](repeating: 0, count: 32 * 1024)

    /// Opens the socket. `socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)`, `bind(2)`.
    public init() throws(SystemError) {
        let rc = cu_netlink_route_socket(0)
        guard rc >= 0 else { throw SystemError("socket", errno: -rc, context: "NETLINK_ROUTE") }
        fd = rc
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// The path toward `destination` now; nil when the kernel has no usable route to it
    /// (ENETUNREACH, EHOSTUNREACH, an unreachable or blackhole route, a dead next hop).
    /// Throws when the kernel could not be asked.
    public func path(to destination: SocketAddress) throws(SystemError) -> NetworkPath? {
        let addressBytes = destination.withSockAddr { pointer, _ -> [UInt8] in
            let raw = UnsafeRawPointer(pointer)
            return destination.family == .ipv6 ? Array(UnsafeRawBufferPointer(start: raw + 8, count: 16))
                                               : Array(UnsafeRawBufferPointer(start: raw + 4, count: 4))
        }
        let answer = try ask(RouteMessage.request(to: addressBytes, sequence: nextSequence()))
        guard let answer, answer.type == RouteMessageType.newRoute, let route = RouteMessage(payload: answer.payload),
              route.isUsable, let index = route.outputInterface else { return nil }
        let link = try ask(LinkMessage.request(index: index, sequence: nextSequence()))
            .flatMap { $0.type == RouteMessageType.newLink ? LinkMessage(payload: $0.payload) : nil }
        return NetworkPath(route: route, link: link)
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    /// Sends `request` and returns the answer with its sequence number; nil when the kernel
    /// answered with an error (no route, no such link).
    private func ask(_ request: NetlinkMessage) throws(SystemError) -> NetlinkMessage? {
        let bytes = request.bytes
        _ = try retryingEINTR("send", context: "RTM_GET") { bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
        while true {
            let count = try retryingEINTR("recv", context: "NETLINK_ROUTE") {
                buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            }
            for message in NetlinkMessage.parse(Array(buffer.prefix(count))) where message.sequence == request.sequence {
                if message.type == NetlinkMessage.error { return nil }
                return message
            }
        }
    }
}

@available(*, unavailable, message: "owned by one engine thread")
extension RouteQuery: Sendable {}

/// Hears the kernel announce link, address and route changes (IPv4 and IPv6) on a
/// NETLINK_ROUTE socket subscribed to those groups, read through the owner's ring (one
/// `IORING_OP_RECV` at a time, tagged `CompletionTag.routeKind`): no thread of its own.
/// It only says that something changed; what the path is now is `RouteQuery`'s to ask.
///
/// It cannot stop listening silently: a receive that could not be queued, or that failed,
/// is queued again by `poll` (at the owner's next turn; after a failure, `retryDelay` later),
/// and since what the kernel said meanwhile was not heard, the paths are looked up again
/// then. A notice is not the end of a change either: IPv4 announces a removed route before it
/// takes it out of the table (`fib_table_delete` in net/ipv4/fib_trie.c sends RTM_DELROUTE,
/// then removes the alias), so a lookup made at once on the notice may still find it. Each
/// notice, and each overrun (ENOBUFS: notices lost), is therefore followed by lookups
/// `settleDelays` later.
public final class RouteMonitor {
    private let fd: Int32
    private let ring: Ring
    private let buffer: UnsafeMutableRawBufferPointer
    // What `poll` reads at every wake-up of the engine: `@exclusivity(unchecked)` as the send
    // queue's state (owned by the engine thread; see UDPSendQueue).
    /// True while a receive is queued.
    @exclusivity(unchecked) public private(set) var armed = false
    /// Notifications of link, address or route changes read.
    public private(set) var notifications = 0
    /// Times the kernel dropped notifications (ENOBUFS: more came than the socket held).
    public private(set) var overruns = 0
    /// Times the monitor could not listen: a receive failed (other than by interruption or
    /// overrun) or could not be queued. Each one is retried by `poll`.
    public private(set) var failures = 0
    /// The last failure's error (nil: none).
    public private(set) var failure: Errno?
    /// Monotonic times at which the paths are due to be looked up again (`poll`).
    @exclusivity(unchecked) private var lookupsDue: [Int64] = []
    /// No receive is queued before this monotonic time (after a failure).
    @exclusivity(unchecked) private var retryAt: Int64 = 0

    /// After a notice or an overrun, the paths are looked up again this long after it
    /// (nanoseconds): the kernel may announce a change before it is in place.
    public static let settleDelays: [Int64] = [20_000_000, 200_000_000]
    /// After a failed receive, the next one is queued this long after it (nanoseconds): a
    /// socket that fails at once is not spun on.
    public static let retryDelay: Int64 = 1_000_000_000

    /// Opens the socket, subscribed to the path groups. Not armed yet.
    public init(ring: Ring) throws(SystemError) {
        let rc = cu_netlink_route_socket(cu_rtmgrp_path_changes)
        guard rc >= 0 else { throw SystemError("socket", errno: -rc, context: "NETLINK_ROUTE monitor") }
        fd = rc
        self.ring = ring
        buffer = .allocate(byteCount: 64 * 1024, alignment: 8)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// Queues the receive (submitted with the ring's next submit), unless one is queued.
    public func arm() throws(SystemError) {
        guard !armed else { return }
        let sqe = try ring.nextEntry()
        io_uring_prep_recv(sqe, fd, buffer.baseAddress, buffer.count, 0)
        io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.routeKind, payload: 0).userData)
        armed = true
    }

    /// Handles a completion tagged `routeKind` (read at `now`, monotonic): returns true when
    /// paths may have changed (a link, address or route notification, or notifications lost),
    /// and queues the next receive.
    public func handle(_ completion: Completion, now: Int64 = monotonicNanoseconds()) -> Bool {
        armed = false
        guard completion.result >= 0 else { return failed(Errno(-completion.result), now: now) }
        let bytes = Array(UnsafeRawBufferPointer(rebasing: buffer.prefix(Int(completion.result))))
        rearm(now: now)
        return take(bytes, now: now)
    }

    /// Takes a datagram of notifications read at `now`: true when one of them changes paths.
    func take(_ bytes: [UInt8], now: Int64) -> Bool {
        let changes = NetlinkMessage.parse(bytes).filter { RouteMessageType.changesPaths($0.type) }.count
        notifications += changes
        if changes > 0 { settle(now: now) }
        return changes > 0
    }

    /// A receive that completed with `code`.
    private func failed(_ code: Errno, now: Int64) -> Bool {
        switch code.rawValue {
        case ENOBUFS:
            overruns += 1
            rearm(now: now)
            settle(now: now)
            return true  // what was lost may have been a change: ask again
        case EINTR, EAGAIN:
            rearm(now: now)
            return false
        default:
            // Not queued again at once (a socket that fails at once would spin): `poll` does,
            // `retryDelay` later.
            failures += 1
            failure = code
            retryAt = now + Self.retryDelay
            return false
        }
    }

    /// Queues the next receive; one that cannot be queued (a full submission queue) is a
    /// failure that `poll` retries at the owner's next turn.
    private func rearm(now: Int64) {
        do { try arm() } catch {
            failures += 1
            failure = error.code
        }
    }

    /// The paths are looked up again `settleDelays` after `now`.
    private func settle(now: Int64) {
        lookupsDue = Self.settleDelays.map { now + $0 }
    }

    /// When `poll` has work next (monotonic nanoseconds): the next settle lookup, or the retry
    /// of a receive that failed; nil when neither is pending. An owner that sleeps while idle
    /// wakes by then, so a change is looked up when it has settled, not at the next wake-up.
    public var nextPollDue: Int64? {
        let lookup = lookupsDue.min()
        guard !armed else { return lookup }
        return min(lookup ?? retryAt, retryAt)
    }

    /// Called at each turn of the owner's loop (at monotonic `now`): queues the receive again
    /// if none is queued (no sooner than `retryDelay` after a failed one), and returns true
    /// when the paths should be looked up now: a settle lookup is due, or the monitor was not
    /// listening and may have missed notices.
    public func poll(now: Int64 = monotonicNanoseconds()) -> Bool {
        var lookUp = false
        if !armed && now >= retryAt {
            rearm(now: now)
            if armed {
                settle(now: now)
                lookUp = true
            }
        }
        if let next = lookupsDue.first, next <= now {
            lookupsDue.removeAll { $0 <= now }
            lookUp = true
        }
        return lookUp
    }
}

@available(*, unavailable, message: "owned by one engine thread")
extension RouteMonitor: Sendable {}
