internal import CLibURing
import Glibc

/// `IP_MULTICAST_ALL` and `IPV6_MULTICAST_ALL` (linux/in.h, linux/in6.h; not every libc names them).
private let ipMulticastAll: Int32 = 49
private let ipv6MulticastAll: Int32 = 29

extension SocketAddress {
    /// True for 224.0.0.0/4 and ff00::/8.
    public var isMulticast: Bool {
        withSockAddr { pointer, _ in
            let raw = UnsafeRawPointer(pointer)
            if family == .ipv4 { return raw.load(fromByteOffset: 4, as: UInt8.self) & 0xF0 == 0xE0 }
            return raw.load(fromByteOffset: 8, as: UInt8.self) == 0xFF
        }
    }
}

extension SocketAddress {
    /// The IPv6 address with its scope (`sin6_scope_id`) set to interface `index`, as binding a
    /// link-scoped address (fe80::, ff02::, ff12::) needs; IPv4 addresses are returned as they are.
    public func scoped(to index: UInt32) -> SocketAddress {
        guard family == .ipv6 else { return self }
        var copy = self
        copy.setScope(index)
        return copy
    }
}

/// The index of network interface `name` (`if_nametoindex(3)`); throws ENODEV when there is none.
public func interfaceIndex(_ name: String) throws(SystemError) -> UInt32 {
    let index = if_nametoindex(name)
    guard index != 0 else { throw SystemError("no such interface", errno: ENODEV, context: name) }
    return index
}

extension UDPSocket {
    /// Sets how multicast datagrams leave: hop limit (`IP_MULTICAST_TTL` / `IPV6_MULTICAST_HOPS`),
    /// the interface (`IP_MULTICAST_IF` / `IPV6_MULTICAST_IF`, nil: the route's) and whether
    /// receivers on this host hear them (`IP_MULTICAST_LOOP` / `IPV6_MULTICAST_LOOP`).
    public func setMulticastSend(ttl: Int, interface: UInt32?, loop: Bool) throws(SystemError) {
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, Int32(ttl), name: "IPV6_MULTICAST_HOPS")
            try setOption(Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, loop ? 1 : 0, name: "IPV6_MULTICAST_LOOP")
            if let interface {
                try setOption(Int32(IPPROTO_IPV6), IPV6_MULTICAST_IF, Int32(interface), name: "IPV6_MULTICAST_IF")
            }
        } else {
            try setOption(Int32(IPPROTO_IP), IP_MULTICAST_TTL, Int32(ttl), name: "IP_MULTICAST_TTL")
            try setOption(Int32(IPPROTO_IP), IP_MULTICAST_LOOP, loop ? 1 : 0, name: "IP_MULTICAST_LOOP")
            if let interface {
                var request = ip_mreqn()
                request.imr_ifindex = Int32(interface)
                _ = try retryingEINTR("setsockopt", context: "IP_MULTICAST_IF") {
                    setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
                }
            }
        }
    }

    /// Lets several sockets on this host bind the same group and port (`SO_REUSEADDR`; call before
    /// `bind` to share a port others hold, after it to let others share this socket's); `false`
    /// takes that back for binds still to come (a socket bound keeps its port).
    public func allowSharedPort(_ allowed: Bool = true) throws(SystemError) {
        try setOption(SOL_SOCKET, SO_REUSEADDR, allowed ? 1 : 0, name: "SO_REUSEADDR")
    }

    /// Joins `group` (its port is ignored) on `interface` (0: the route's): any source, or with
    /// `source` only that one (`MCAST_JOIN_GROUP` / `MCAST_JOIN_SOURCE_GROUP`). Turns
    /// `IP_MULTICAST_ALL` off first, so the socket hears only the groups it joined itself.
    /// Closing the socket leaves.
    public func joinMulticast(group: SocketAddress, source: SocketAddress?, interface: UInt32) throws(SystemError) {
        let level = family == .ipv6 ? Int32(IPPROTO_IPV6) : Int32(IPPROTO_IP)
        if family == .ipv6 {
            try? setOption(level, ipv6MulticastAll, 0, name: "IPV6_MULTICAST_ALL")  // kernels before 4.20 lack it
        } else {
            try setOption(level, ipMulticastAll, 0, name: "IP_MULTICAST_ALL")
        }
        if let source {
            var request = group_source_req()
            request.gsr_interface = interface
            withUnsafeMutableBytes(of: &request.gsr_group) { _ = group.copy(to: $0.baseAddress!) }
            withUnsafeMutableBytes(of: &request.gsr_source) { _ = source.copy(to: $0.baseAddress!) }
            _ = try retryingEINTR("cannot join", context: "\(group.host) from \(source.host)") {
                setsockopt(fd, level, MCAST_JOIN_SOURCE_GROUP, &request, socklen_t(MemoryLayout<group_source_req>.size))
            }
        } else {
            var request = group_req()
            request.gr_interface = interface
            withUnsafeMutableBytes(of: &request.gr_group) { _ = group.copy(to: $0.baseAddress!) }
            _ = try retryingEINTR("cannot join", context: group.host) {
                setsockopt(fd, level, MCAST_JOIN_GROUP, &request, socklen_t(MemoryLayout<group_req>.size))
            }
        }
    }
}
