import Foundation
import Testing

/// Multicast options that do not fit: a one-line error and a non-zero exit, nothing sent.
@Suite struct MulticastCommandTests {
    @Test(arguments: [
        (["send", "--to", "127.0.0.1:5004,ttl=2"], "ttl= only for a multicast group"),
        (["send", "--to", "239.1.2.3:5004,ttl=0"], "ttl"),
        (["send", "--to", "239.1.2.3:5004,ttl=256"], "ttl"),
        (["send", "--to", "239.1.2.3:5004", "--cc", "on"], "--cc on"),
        (["send", "--to", "[ff3e::1234]:5004", "--max-unconfirmed", "100000"], "--max-unconfirmed"),
        (["send", "--to", "239.1.2.3:5004", "--multicast-loop", "maybe"], "--multicast-loop"),
        (["send", "--to", "239.1.2.3:5004", "--ssm-source", "somewhere"], "--ssm-source"),
        (["send", "--to", "239.1.2.3:5004", "--multicast-if", "no-such-if0"], "no-such-if0"),
        (["recv", "--listen", "5004", "--source", "10.0.0.1"], "only with a multicast --listen"),
        (["recv", "--listen", "239.1.2.3:5004", "--source", "not-an-address"], "--source"),
        (["recv", "--listen", "239.1.2.3:5004", "--source", "fd00::1"], "address family"),
        (["recv", "--listen", "239.1.2.3:5004", "--iface", "no-such-if0"], "no-such-if0"),
    ])
    func badMulticastArgumentsFailWithOneLine(arguments: [String], mentions: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(binary, arguments, timeout: 20)
        #expect(outcome.status != 0)
        #expect(outcome.stderrLines.count == 1, "stderr: \(outcome.stderr)")
        #expect(outcome.stderr.contains(mentions), "stderr: \(outcome.stderr)")
    }
}
