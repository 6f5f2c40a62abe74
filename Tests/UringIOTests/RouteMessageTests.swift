import Glibc
import Testing
@testable import UringIO

/// rtnetlink messages parsed from bytes laid out as the kernel writes them (host byte order,
/// attributes padded to 4), and the requests the route query sends.
struct RouteMessageTests {
    private func native<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    private func attribute(_ type: UInt16, _ value: [UInt8]) -> [UInt8] {
        var bytes = native(UInt16(4 + value.count)) + native(type) + value
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    /// `ip route get 10.77.2.2` in the lab's sender: via 10.77.1.1 dev index 7, src 10.77.1.2,
    /// with the attributes the kernel adds (table, uid, cache info) around the ones used.
    private func routeAnswer(type routeType: UInt8 = 1, flags: UInt32 = 0, mtu: UInt32? = nil,
                             expires: Int32 = 0, sequence: UInt32 = 9) -> [UInt8] {
        var payload: [UInt8] = [2, 32, 0, 0, 254, 0, 0, routeType] + native(flags | 0x200)  // RTM_F_CLONED
        payload += attribute(15, native(UInt32(254)))        // RTA_TABLE
        payload += attribute(1, [10, 77, 2, 2])              // RTA_DST
        payload += attribute(4, native(Int32(7)))            // RTA_OIF
        payload += attribute(7, [10, 77, 1, 2])              // RTA_PREFSRC
        payload += attribute(5, [10, 77, 1, 1])              // RTA_GATEWAY
        payload += attribute(25, native(UInt32(0)))          // RTA_UID
        if let mtu { payload += attribute(8 | 0x8000, attribute(2, native(mtu))) }  // nested RTA_METRICS { RTAX_MTU }
        payload += attribute(12, native(UInt32(0)) + native(UInt32(0)) + native(expires) + [UInt8](repeating: 0, count: 20))
        return NetlinkMessage(type: RouteMessageType.newRoute, sequence: sequence, payload: payload).bytes
    }

    @Test func routeAnswerGivesInterfaceGatewaySource() throws {
        let messages = NetlinkMessage.parse(routeAnswer())
        try #require(messages.count == 1)
        #expect(messages[0].type == RouteMessageType.newRoute && messages[0].sequence == 9)
        let route = try #require(RouteMessage(payload: messages[0].payload))
        #expect(route.family == 2 && route.routeType == 1 && route.isUsable)
        #expect(route.outputInterface == 7)
        #expect(route.gateway == [10, 77, 1, 1] && route.preferredSource == [10, 77, 1, 2])
        #expect(route.mtu == nil && route.configuredMTU == nil)
        let link = LinkMessage(index: 7, flags: 0x1 | 0x40 | 0x10000, name: "sl-lab-s", mtu: 1500)
        let path = try #require(NetworkPath(route: route, link: link))
        #expect(path == NetworkPath(interfaceIndex: 7, interfaceName: "sl-lab-s", gateway: "10.77.1.1",
                                    source: "10.77.1.2", routeMTU: nil, linkMTU: 1500, linkUp: true))
        #expect(path.mtu == 1500)
    }

    /// A route's own MTU (`ip route ... mtu 1300`) caps the path; a learned one (an exception with
    /// an expiry, from ICMP) is not ours to clamp with.
    @Test func routeMTUConfiguredOrLearned() throws {
        let configured = try #require(RouteMessage(payload: NetlinkMessage.parse(routeAnswer(mtu: 1300))[0].payload))
        #expect(configured.mtu == 1300 && configured.configuredMTU == 1300)
        let path = try #require(NetworkPath(route: configured, link: LinkMessage(index: 7, flags: 1, mtu: 1500)))
        #expect(path.mtu == 1300)
        let learned = try #require(RouteMessage(payload: NetlinkMessage.parse(routeAnswer(mtu: 1280, expires: 599_000))[0].payload))
        #expect(learned.mtu == 1280 && learned.configuredMTU == nil)
    }

    /// Unreachable, blackhole and prohibit routes, and a dead or link-down next hop: no path.
    @Test(arguments: [(UInt8(7), UInt32(0)), (6, 0), (8, 0), (1, 1), (1, 16)])
    func unusableRoutesAreNoPath(routeType: UInt8, flags: UInt32) throws {
        let route = try #require(RouteMessage(payload: NetlinkMessage.parse(routeAnswer(type: routeType, flags: flags))[0].payload))
        #expect(!route.isUsable)
        #expect(NetworkPath(route: route, link: nil) == nil)
    }

    /// The kernel's answer when there is no route: NLMSG_ERROR with -ENETUNREACH and the request.
    @Test func errorAnswerCarriesTheErrno() {
        let request = RouteMessage.request(to: [10, 77, 2, 2], sequence: 3)
        let error = NetlinkMessage(type: NetlinkMessage.error, sequence: 3, payload: native(-ENETUNREACH) + request.bytes)
        let parsed = NetlinkMessage.parse(error.bytes)
        #expect(parsed.count == 1)
        #expect(parsed[0].errorCode == ENETUNREACH)
        #expect(NetlinkMessage(type: NetlinkMessage.error, payload: native(Int32(0))).errorCode == 0)
        #expect(NetlinkMessage(type: RouteMessageType.newRoute, payload: []).errorCode == nil)
    }

    /// Requests: header (length, type, NLM_F_REQUEST, sequence, port 0), rtmsg with the
    /// family and a full-length destination prefix, RTA_DST.
    @Test func getRouteRequestBytes() {
        let ipv4 = RouteMessage.request(to: [10, 77, 2, 2], sequence: 7).bytes
        #expect(ipv4 == native(UInt32(36)) + native(UInt16(26)) + native(UInt16(1)) + native(UInt32(7)) + native(UInt32(0))
                + [2, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] + native(UInt16(8)) + native(UInt16(1)) + [10, 77, 2, 2])
        let ipv6 = RouteMessage.request(to: [UInt8](repeating: 0, count: 15) + [1], sequence: 8).bytes
        #expect(ipv6.count == 16 + 12 + 20 && ipv6[16] == 10 && ipv6[17] == 128)
        let link = LinkMessage.request(index: 7, sequence: 9).bytes
        #expect(link.count == 32 && Array(link[4..<6]) == native(UInt16(18)) && Array(link[20..<24]) == native(Int32(7)))
    }

    @Test func linkAnswerGivesNameMTUAndFlags() throws {
        var payload: [UInt8] = [0, 0] + native(UInt16(1)) + native(Int32(7)) + native(UInt32(0x1 | 0x1000 | 0x40 | 0x10000))
            + native(UInt32(0))
        payload += attribute(3, Array("sl-lab-s".utf8) + [0])  // IFLA_IFNAME
        payload += attribute(4, native(UInt32(1300)))          // IFLA_MTU
        payload += attribute(16, [6])                          // IFLA_OPERSTATE (up)
        let message = NetlinkMessage(type: RouteMessageType.newLink, payload: payload)
        let link = try #require(LinkMessage(payload: NetlinkMessage.parse(message.bytes)[0].payload))
        #expect(link == LinkMessage(index: 7, flags: 0x1 | 0x1000 | 0x40 | 0x10000, name: "sl-lab-s", mtu: 1300))
        #expect(link.isUp)
        #expect(!LinkMessage(index: 7, flags: 0x1000).isUp)
        #expect(!LinkMessage(index: 7, flags: 0x1 | 0x1000).isUp, "no carrier (IFF_LOWER_UP clear)")
        #expect(!LinkMessage(index: 7, flags: 0x10000).isUp, "administratively down")
    }

    /// Several messages in one datagram are all read; a truncated or lying header ends the
    /// parse (what came before it stays); short payloads are no message.
    @Test func datagramsOfSeveralAndMalformed() {
        let two = routeAnswer(sequence: 1) + routeAnswer(sequence: 2)
        #expect(NetlinkMessage.parse(two).map(\.sequence) == [1, 2])
        #expect(NetlinkMessage.parse(Array(two.dropLast(3))).map(\.sequence) == [1])
        var lying = routeAnswer(sequence: 1)
        lying.replaceSubrange(0..<4, with: native(UInt32(9999)))
        #expect(NetlinkMessage.parse(lying).isEmpty)
        var tooShort = routeAnswer(sequence: 1)
        tooShort.replaceSubrange(0..<4, with: native(UInt32(8)))
        #expect(NetlinkMessage.parse(tooShort).isEmpty)
        #expect(NetlinkMessage.parse([]).isEmpty)
        #expect(RouteMessage(payload: [2, 32]) == nil && LinkMessage(payload: [0, 0, 1]) == nil)
        // An attribute longer than what is left ends the attributes, not the message.
        var payload: [UInt8] = [2, 32, 0, 0, 254, 0, 0, 1] + native(UInt32(0)) + attribute(4, native(Int32(3)))
        payload += native(UInt16(200)) + native(UInt16(5)) + [1, 2, 3, 4]
        let route = RouteMessage(payload: payload)
        #expect(route?.outputInterface == 3 && route?.gateway == nil)
    }

    @Test func changeNotifications() {
        for type in [RouteMessageType.newLink, RouteMessageType.deleteLink, RouteMessageType.newAddress,
                     RouteMessageType.deleteAddress, RouteMessageType.newRoute, RouteMessageType.deleteRoute] {
            #expect(RouteMessageType.changesPaths(type))
        }
        #expect(!RouteMessageType.changesPaths(RouteMessageType.getRoute))
        #expect(!RouteMessageType.changesPaths(NetlinkMessage.done))
    }

    /// The kernel itself: the route to 127.0.0.1 leaves by the loopback interface.
    @Test func loopbackRouteFromTheKernel() throws {
        let query = try RouteQuery()
        let path = try #require(try query.path(to: SocketAddress(ip: "127.0.0.1", port: 5004)!))
        #expect(path.interfaceName == "lo")
        #expect(path.gateway == nil)
        #expect(path.linkUp)
        #expect((path.linkMTU ?? 0) >= 1500)
    }
}
