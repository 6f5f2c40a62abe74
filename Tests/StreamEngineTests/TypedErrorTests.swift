import Glibc
import StreamEngine
import Testing
import UringIO

/// The typed errors read as the strings they replaced: the stats JSON keys and the
/// one-line messages stay the same.
@Suite struct TypedErrorTests {
    @Test func sendFailuresReadAsTheirStatsKeys() {
        #expect(SendFailure.send(Errno(ECONNREFUSED)).description == "Connection refused")
        let connect = SystemError("cannot connect", errno: ENETUNREACH, context: "192.0.2.1:5004")
        #expect(SendFailure.redirect(connect).description
            == "redirect: cannot connect 192.0.2.1:5004: Network is unreachable (no route to that address)")
    }

    @Test func configurationErrorsReadAsBefore() {
        #expect(ConfigurationError("flows", "0 flows (1 to 255)").description == "flows 0 flows (1 to 255): Invalid argument")
        #expect(ConfigurationError("send slot", "datagram of 70000 bytes", code: Errno(EMSGSIZE)).description
            == "send slot datagram of 70000 bytes: Message too long (datagram larger than the path allows)")
    }

    @Test func noFlowsIsAConfigurationError() {
        #expect(throws: ConfigurationError("flows", "0 flows (1 to 255)")) { try MediaSender(flows: []) }
    }

    @Test(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
    func anMTUTooSmallToPacketizeIsAConfigurationError() throws {
        var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: 9)!)
        config.mtu = .fixed(40)
        let sender = try MediaSender(config: config)
        #expect(throws: ConfigurationError("packetizer", "MTU 40 is too small")) { try sender.run() }
    }
}
