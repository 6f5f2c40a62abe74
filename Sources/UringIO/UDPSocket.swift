internal import CLibURing
import Glibc

/// How the kernel treats the Don't Fragment bit and its cached path MTU (`IP_MTU_DISCOVER`).
public enum PathMTUDiscoveryMode: Sendable {
    /// `IP_PMTUDISC_DONT`: the kernel may fragment.
    case dont
    /// `IP_PMTUDISC_DO`: DF set; sends above the cached path MTU fail with EMSGSIZE.
    case `do`
    /// `IP_PMTUDISC_PROBE`: DF set, the cached path MTU ignored (for probing).
    case probe
}

/// A UDP socket (IPv4 or IPv6) and its options. Owns the file descriptor.
///
/// Blocking by default: io_uring then waits for send-buffer space itself (it polls
/// the socket), so a full socket buffer delays completions instead of failing them.
public final class UDPSocket {
    /// The file descriptor. Valid until the socket is deinitialized.
    public let fd: Int32
    /// The address family.
    public let family: SocketAddress.Family
    /// The address connected to, if any.
    public private(set) var connectedPeer: SocketAddress?
    /// False once a GSO send failed on this socket (EIO, EINVAL...): segments then go one by one.
    // Both read for every send slot (`UDPSendQueue.prepareSends`): unchecked, as the send
    // queue's own per-datagram state, for a socket is owned by one thread (not `Sendable`) and
    // no access to them stays open across a call (results/profile.md section 43).
    @exclusivity(unchecked) public var gsoEnabled: Bool
    /// The TOS byte / traffic class set with `setTrafficMark` (nil until then): a send with
    /// this mark needs no per-send cmsg.
    @exclusivity(unchecked) public private(set) var defaultTOS: UInt8?

    /// Opens a UDP socket. `socket(2)`.
    public init(family: SocketAddress.Family) throws(SystemError) {
        let domain = family == .ipv6 ? AF_INET6 : AF_INET
        fd = try retryingEINTR("socket", context: "UDP") {
            socket(domain, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_UDP))
        }
        self.family = family
        self.gsoEnabled = UDPSocket.kernelSupportsGSO
    }

    deinit { close(fd) }

    /// Binds to a local address. `bind(2)`.
    public func bind(_ address: SocketAddress) throws(SystemError) {
        if family == .ipv6 { try? setOption(Int32(IPPROTO_IPV6), IPV6_V6ONLY, 0, name: "IPV6_V6ONLY") }
        _ = try retryingEINTR("cannot bind", context: address.description) {
            address.withSockAddr { Glibc.bind(fd, $0, $1) }
        }
    }

    /// Connects to a peer (sets the default destination, filters what is received,
    /// reports ICMP errors, enables `IP_MTU`). `connect(2)`.
    public func connect(_ address: SocketAddress) throws(SystemError) {
        _ = try retryingEINTR("cannot connect", context: address.description) {
            address.withSockAddr { Glibc.connect(fd, $0, $1) }
        }
        connectedPeer = address
    }

    /// Connects again to the same peer, so the kernel picks the source address anew (a connected
    /// socket keeps the one it picked at `connect`, even after that address is gone): dissolves
    /// the association (`connect(2)` with AF_UNSPEC), then connects. The local port stays only
    /// when it was bound explicitly (a port-0 bind is released by the dissolve).
    public func reconnect() throws(SystemError) {
        guard let peer = connectedPeer else { return }
        var unspecified = sockaddr()
        unspecified.sa_family = sa_family_t(AF_UNSPEC)
        _ = Glibc.connect(fd, &unspecified, socklen_t(MemoryLayout<sockaddr>.size))
        try connect(peer)
    }

    /// The address this socket is bound to. `getsockname(2)`.
    public func localAddress() throws(SystemError) -> SocketAddress { try socketAddress(of: fd, peer: false) }

    /// Sets an integer socket option. `setsockopt(2)`.
    public func setOption(_ level: Int32, _ option: Int32, _ value: Int32, name: String) throws(SystemError) {
        var value = value
        _ = try retryingEINTR("setsockopt", context: name) {
            setsockopt(fd, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Reads an integer socket option. `getsockopt(2)`.
    public func option(_ level: Int32, _ option: Int32, name: String) throws(SystemError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingEINTR("getsockopt", context: name) { getsockopt(fd, level, option, &value, &length) }
        return value
    }

    /// Sets the socket's default TOS / traffic class byte (datagrams sent without a cmsg use it).
    /// An IPv6 socket gets `IP_TOS` too, for IPv4-mapped destinations (which take `IP_TOS`).
    public func setTrafficMark(_ mark: TrafficMark) throws(SystemError) {
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_TCLASS, Int32(mark.tos), name: "IPV6_TCLASS")
            try? setOption(Int32(IPPROTO_IP), IP_TOS, Int32(mark.tos), name: "IP_TOS")
        } else {
            try setOption(Int32(IPPROTO_IP), IP_TOS, Int32(mark.tos), name: "IP_TOS")
        }
        defaultTOS = mark.tos
    }

    /// Asks for the TOS byte (IPv4) or traffic class (IPv6) of each received datagram.
    public func enableReceiveTrafficMark() throws(SystemError) {
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_RECVTCLASS, 1, name: "IPV6_RECVTCLASS")
            // IPv4-mapped senders on a dual-stack socket report IP_TOS.
            try? setOption(Int32(IPPROTO_IP), IP_RECVTOS, 1, name: "IP_RECVTOS")
        } else {
            try setOption(Int32(IPPROTO_IP), IP_RECVTOS, 1, name: "IP_RECVTOS")
        }
    }

    /// Asks for a kernel receive timestamp (`SO_TIMESTAMPNS`, CLOCK_REALTIME) per datagram.
    public func enableReceiveTimestamps() throws(SystemError) {
        try setOption(SOL_SOCKET, cu_so_timestampns, 1, name: "SO_TIMESTAMPNS")
    }

    /// Asks for the count of datagrams the kernel dropped for lack of receive-buffer space (`SO_RXQ_OVFL`).
    public func enableDropCounter() throws(SystemError) {
        try setOption(SOL_SOCKET, cu_so_rxq_ovfl, 1, name: "SO_RXQ_OVFL")
    }

    /// What the kernel has dropped at this socket so far (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`, the
    /// count `SO_RXQ_OVFL` reports), read now: the control message comes only with the next
    /// datagram queued, so drops after the last one would otherwise never be seen. The kernel
    /// counts buffers, not datagrams: a GSO send from this host reaches a GRO socket as one
    /// buffer of many datagrams and, dropped, counts one.
    public func kernelDropCount() throws(SystemError) -> UInt32 {
        var info = [UInt32](repeating: 0, count: Int(cu_sk_meminfo_vars))
        var length = socklen_t(info.count * MemoryLayout<UInt32>.size)
        _ = try retryingEINTR("getsockopt", context: "SO_MEMINFO") {
            info.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, cu_so_meminfo, $0.baseAddress, &length) }
        }
        guard Int(length) > Int(cu_sk_meminfo_drops) * MemoryLayout<UInt32>.size else {
            throw SystemError("getsockopt", errno: EINVAL, context: "SO_MEMINFO: \(length) bytes")
        }
        return info[Int(cu_sk_meminfo_drops)]
    }

    /// Lets the kernel coalesce received datagrams of one flow (`UDP_GRO`). The receive
    /// buffer must then hold 64 segments, or the kernel truncates.
    public func enableGRO() throws(SystemError) {
        try setOption(Int32(IPPROTO_UDP), cu_udp_gro, 1, name: "UDP_GRO")
    }

    /// Sets `SO_RCVBUF` (or `SO_RCVBUFFORCE` past the system limit when privileged).
    public func setReceiveBufferSize(_ bytes: Int) {
        if (try? setOption(SOL_SOCKET, SO_RCVBUFFORCE, Int32(clamping: bytes), name: "SO_RCVBUFFORCE")) == nil {
            try? setOption(SOL_SOCKET, SO_RCVBUF, Int32(clamping: bytes), name: "SO_RCVBUF")
        }
    }

    /// Sets `SO_SNDBUF` (or `SO_SNDBUFFORCE` past the system limit when privileged).
    public func setSendBufferSize(_ bytes: Int) {
        if (try? setOption(SOL_SOCKET, SO_SNDBUFFORCE, Int32(clamping: bytes), name: "SO_SNDBUFFORCE")) == nil {
            try? setOption(SOL_SOCKET, SO_SNDBUF, Int32(clamping: bytes), name: "SO_SNDBUF")
        }
    }

    /// Makes the socket non-blocking (for the plain-syscall paths).
    public func setNonBlocking(_ on: Bool) throws(SystemError) {
        let flags = try retryingEINTR("fcntl", context: "F_GETFL") { fcntl(fd, F_GETFL) }
        _ = try retryingEINTR("fcntl", context: "F_SETFL") {
            fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK)
        }
    }

    /// Sets how DF and the kernel's path MTU apply (`IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER`).
    public func setPathMTUDiscovery(_ mode: PathMTUDiscoveryMode) throws(SystemError) {
        let value: Int32
        switch mode {
        case .dont: value = IP_PMTUDISC_DONT
        case .do: value = IP_PMTUDISC_DO
        case .probe: value = IP_PMTUDISC_PROBE
        }
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER, value, name: "IPV6_MTU_DISCOVER")
        } else {
            try setOption(Int32(IPPROTO_IP), IP_MTU_DISCOVER, value, name: "IP_MTU_DISCOVER")
        }
    }

    /// The kernel's path MTU toward the connected peer (`IP_MTU`); nil when not connected.
    public func kernelPathMTU() -> Int? {
        guard connectedPeer != nil else { return nil }
        let value = family == .ipv6
            ? try? option(Int32(IPPROTO_IPV6), IPV6_MTU, name: "IPV6_MTU")
            : try? option(Int32(IPPROTO_IP), IP_MTU, name: "IP_MTU")
        return value.map(Int.init)
    }

    /// The bytes of IP and UDP headers in front of each payload on this socket.
    public var headerOverhead: Int { family == .ipv6 ? 48 : 28 }

    /// Whether this kernel accepts `UDP_SEGMENT` (probed once).
    public static let kernelSupportsGSO: Bool = {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, Int32(IPPROTO_UDP), cu_udp_segment, &value, &length) == 0
    }()
}

@available(*, unavailable, message: "a socket is owned by one engine thread")
extension UDPSocket: Sendable {}
