// rtnetlink messages (netlink(7), rtnetlink(7)) as pure values over byte arrays: the requests
// the route query sends and the answers and notifications it reads. No socket here, so every
// parse is testable on bytes. Netlink is in the host's byte order; numbers below are the
// kernel's ABI (<linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>), fixed forever.

/// One netlink message: its header's fields and its payload (after the 16-byte header).
public struct NetlinkMessage: Sendable, Equatable {
    /// `nlmsg_type`: `RouteMessageType` values, or `error` / `done`.
    public var type: UInt16
    /// `nlmsg_flags`.
    public var flags: UInt16
    /// `nlmsg_seq`.
    public var sequence: UInt32
    /// The payload, without padding.
    public var payload: [UInt8]

    /// `NLMSG_ERROR`: an acknowledgement or error (payload: a negative errno, then the request).
    public static let error: UInt16 = 2
    /// `NLMSG_DONE`: the end of a multipart answer.
    public static let done: UInt16 = 3
    /// `NLMSG_OVERRUN`.
    public static let overrun: UInt16 = 4
    /// `NLM_F_REQUEST`.
    public static let requestFlag: UInt16 = 1
    static let headerSize = 16

    /// Makes a message.
    public init(type: UInt16, flags: UInt16 = 0, sequence: UInt32 = 0, payload: [UInt8]) {
        self.type = type
        self.flags = flags
        self.sequence = sequence
        self.payload = payload
    }

    /// The messages of one netlink datagram, in order; parsing stops at the first truncated or
    /// malformed header (what came before it is returned).
    public static func parse(_ bytes: [UInt8]) -> [NetlinkMessage] {
        var messages: [NetlinkMessage] = []
        var offset = 0
        while bytes.count - offset >= headerSize {
            let length = Int(bytes.loadNative(UInt32.self, at: offset))
            guard length >= headerSize, length <= bytes.count - offset else { break }
            messages.append(NetlinkMessage(type: bytes.loadNative(UInt16.self, at: offset + 4),
                                           flags: bytes.loadNative(UInt16.self, at: offset + 6),
                                           sequence: bytes.loadNative(UInt32.self, at: offset + 8),
                                           payload: Array(bytes[(offset + headerSize)..<(offset + length)])))
            offset += align4(length)
        }
        return messages
    }

    /// The message as bytes (header and payload).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.appendNative(UInt32(Self.headerSize + payload.count))
        out.appendNative(type)
        out.appendNative(flags)
        out.appendNative(sequence)
        out.appendNative(UInt32(0))  // nlmsg_pid: the kernel fills in ours
        return out + payload
    }

    /// For `error`: the errno it carries (0 for an acknowledgement), positive; nil for other types.
    public var errorCode: Int32? {
        guard type == Self.error, payload.count >= 4 else { return nil }
        return -payload.loadNative(Int32.self, at: 0)
    }
}

/// The rtnetlink message types the route monitor and query use (`RTM_*`).
public enum RouteMessageType {
    /// `RTM_NEWLINK`, `RTM_DELLINK`, `RTM_GETLINK`.
    public static let newLink: UInt16 = 16, deleteLink: UInt16 = 17, getLink: UInt16 = 18
    /// `RTM_NEWADDR`, `RTM_DELADDR`.
    public static let newAddress: UInt16 = 20, deleteAddress: UInt16 = 21
    /// `RTM_NEWROUTE`, `RTM_DELROUTE`, `RTM_GETROUTE`.
    public static let newRoute: UInt16 = 24, deleteRoute: UInt16 = 25, getRoute: UInt16 = 26

    /// True for the notifications that can change a flow's path (links, addresses, routes).
    public static func changesPaths(_ type: UInt16) -> Bool {
        [newLink, deleteLink, newAddress, deleteAddress, newRoute, deleteRoute].contains(type)
    }
}

/// An `RTM_NEWROUTE` message (the kernel's answer to `RTM_GETROUTE`): `struct rtmsg` and the
/// attributes a path needs.
public struct RouteMessage: Sendable, Equatable {
    /// `rtm_family` (AF_INET 2, AF_INET6 10).
    public var family: UInt8
    /// `rtm_type`: 1 unicast, 2 local, 3 broadcast, 5 multicast; 6 blackhole, 7 unreachable,
    /// 8 prohibit, 9 throw (no path).
    public var routeType: UInt8
    /// `rtm_flags` (RTNH_F_DEAD 1, RTNH_F_LINKDOWN 16 among them).
    public var flags: UInt32
    /// `RTA_OIF`: the outgoing interface's index.
    public var outputInterface: Int32?
    /// `RTA_GATEWAY`: the next hop's address bytes (4 or 16); nil for a directly connected peer.
    public var gateway: [UInt8]?
    /// `RTA_PREFSRC`: the source address the kernel picks for the destination.
    public var preferredSource: [UInt8]?
    /// `RTAX_MTU` in `RTA_METRICS`: the route's MTU, configured or learned.
    public var mtu: Int?
    /// `rta_expires` of `RTA_CACHEINFO`: nonzero for a learned exception (a path MTU from ICMP).
    public var expires: Int32 = 0

    /// `RTN_*` types a datagram can leave by.
    public static let usableTypes: Set<UInt8> = [1, 2, 3, 5]
    /// `RTNH_F_DEAD | RTNH_F_LINKDOWN`: the next hop is not usable.
    public static let deadFlags: UInt32 = 1 | 16

    /// True when datagrams can leave by this route (a usable type, the next hop alive).
    public var isUsable: Bool { Self.usableTypes.contains(routeType) && flags & Self.deadFlags == 0 }

    /// The route's configured MTU (`ip route ... mtu N`); nil when none or when the value is a
    /// learned path MTU (that is ICMP's news, which the path-MTU prober reads itself).
    public var configuredMTU: Int? { expires == 0 ? mtu : nil }

    /// Makes a message.
    public init(family: UInt8, routeType: UInt8, flags: UInt32 = 0) {
        self.family = family
        self.routeType = routeType
        self.flags = flags
    }

    /// Parses the payload of an `RTM_NEWROUTE` message; nil when it is too short.
    public init?(payload: [UInt8]) {
        guard payload.count >= 12 else { return nil }
        family = payload[0]
        routeType = payload[7]
        flags = payload.loadNative(UInt32.self, at: 8)
        for (type, value) in routeAttributes(payload, from: 12) {
            switch type {
            case 4 where value.count >= 4: outputInterface = value.loadNative(Int32.self, at: 0)
            case 5: gateway = value
            case 7: preferredSource = value
            case 8:
                for (metric, metricValue) in routeAttributes(value, from: 0) where metric == 2 && metricValue.count >= 4 {
                    mtu = Int(metricValue.loadNative(UInt32.self, at: 0))
                }
            case 12 where value.count >= 12: expires = value.loadNative(Int32.self, at: 8)
            default: break
            }
        }
    }

    /// The `RTM_GETROUTE` request for the route to `destination` (4 or 16 address bytes).
    public static func request(to destination: [UInt8], sequence: UInt32) -> NetlinkMessage {
        var payload = [UInt8](repeating: 0, count: 12)
        payload[0] = destination.count == 16 ? 10 : 2  // rtm_family
        payload[1] = UInt8(destination.count * 8)      // rtm_dst_len
        payload += routeAttribute(type: 1, destination)  // RTA_DST
        return NetlinkMessage(type: RouteMessageType.getRoute, flags: NetlinkMessage.requestFlag,
                              sequence: sequence, payload: payload)
    }
}

/// An `RTM_NEWLINK` message: `struct ifinfomsg` and the attributes a path needs.
public struct LinkMessage: Sendable, Equatable {
    /// `ifi_index`.
    public var index: Int32
    /// `ifi_flags` (IFF_UP 1, IFF_RUNNING 0x40, IFF_LOWER_UP 0x10000).
    public var flags: UInt32
    /// `IFLA_IFNAME`.
    public var name: String?
    /// `IFLA_MTU`.
    public var mtu: Int?

    /// `IFF_UP` and `IFF_LOWER_UP`: the interface is up and has a carrier (a veth whose peer is
    /// down, a cable pulled: routes stay, but nothing leaves).
    public var isUp: Bool { flags & 1 != 0 && flags & 0x10000 != 0 }

    /// Makes a message.
    public init(index: Int32, flags: UInt32, name: String? = nil, mtu: Int? = nil) {
        self.index = index
        self.flags = flags
        self.name = name
        self.mtu = mtu
    }

    /// Parses the payload of an `RTM_NEWLINK` message; nil when it is too short.
    public init?(payload: [UInt8]) {
        guard payload.count >= 16 else { return nil }
        index = payload.loadNative(Int32.self, at: 4)
        flags = payload.loadNative(UInt32.self, at: 8)
        for (type, value) in routeAttributes(payload, from: 16) {
            switch type {
            case 3: name = String(decoding: value.prefix { $0 != 0 }, as: UTF8.self)
            case 4 where value.count >= 4: mtu = Int(value.loadNative(UInt32.self, at: 0))
            default: break
            }
        }
    }

    /// The `RTM_GETLINK` request for the interface with index `index`.
    public static func request(index: Int32, sequence: UInt32) -> NetlinkMessage {
        var payload = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: index) { payload.replaceSubrange(4..<8, with: $0) }
        return NetlinkMessage(type: RouteMessageType.getLink, flags: NetlinkMessage.requestFlag,
                              sequence: sequence, payload: payload)
    }
}

/// The attributes (`struct rtattr`: length, type, value, padded to 4) of `bytes` from `offset`;
/// stops at the first malformed one.
func routeAttributes(_ bytes: [UInt8], from offset: Int) -> [(type: UInt16, value: [UInt8])] {
    var attributes: [(type: UInt16, value: [UInt8])] = []
    var offset = offset
    while bytes.count - offset >= 4 {
        let length = Int(bytes.loadNative(UInt16.self, at: offset))
        guard length >= 4, length <= bytes.count - offset else { break }
        // The top two bits of the type are NLA_F_NESTED / NLA_F_NET_BYTEORDER.
        attributes.append((bytes.loadNative(UInt16.self, at: offset + 2) & 0x3fff, Array(bytes[(offset + 4)..<(offset + length)])))
        offset += align4(length)
    }
    return attributes
}

/// One attribute as bytes, padded to 4.
func routeAttribute(type: UInt16, _ value: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    out.appendNative(UInt16(4 + value.count))
    out.appendNative(type)
    out += value
    out += [UInt8](repeating: 0, count: align4(out.count) - out.count)
    return out
}

@inline(__always)
func align4(_ length: Int) -> Int { (length + 3) & ~3 }

extension Array where Element == UInt8 {
    /// A host-order integer at `offset` (the caller checked the bounds).
    func loadNative<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }

    /// Appends a host-order integer.
    mutating func appendNative<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value) { append(contentsOf: $0) }
    }
}
