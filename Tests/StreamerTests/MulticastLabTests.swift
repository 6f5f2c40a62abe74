import Foundation
import Glibc
import Testing
import TestSupport

/// A tools/mcastlab segment, torn down on deinit.
final class MulticastSegment {
    let name: String
    private let tool = packageRoot.appendingPathComponent("tools/mcastlab").path

    init(name: String, receivers: Int) throws {
        self.name = name
        let outcome = try run(tool, ["up", "--name", name, "--receivers", String(receivers)])
        guard outcome.status == 0 else { throw LabError("mcastlab up failed: \(outcome.stderr)") }
    }

    deinit { _ = try? run(tool, ["down", "--name", name]) }

    /// Starts `arguments` (an executable and its arguments) inside `host`.
    func spawn(_ host: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", "\(name)-\(host)"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs `arguments` inside `host` to completion.
    func exec(_ host: String, _ arguments: [String], timeout: Double = 60) throws -> Outcome {
        try run("/usr/sbin/ip", ["netns", "exec", "\(name)-\(host)"] + arguments, timeout: timeout)
    }

    /// The text of file `path` as `host` sees it (its own /proc/net).
    func read(_ host: String, _ path: String) throws -> String { try exec(host, ["/bin/cat", path]).stdout }

    /// Waits until UDP `port` is bound inside `host`, up to 10 s.
    func waitUntilBound(_ host: String, port: UInt16, ipv6: Bool) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if udpTableHasBinding(try read(host, ipv6 ? "/proc/net/udp6" : "/proc/net/udp"), port: port) { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw LabError("nothing bound UDP port \(port) in \(host) within 10 s")
    }
}

/// One multicast sender and several receivers on one bridged segment (tools/mcastlab): every
/// receiver of the group gets every frame, a source-specific receiver of another source gets
/// nothing, and a receiver that exits leaves the group.
@Suite(.enabled(if: isRoot && uringEnabled, "needs root (network namespaces) and io_uring (CI has them)"))
struct MulticastLabTests {
    /// The group as the kernel lists it in /proc/net/igmp (IPv4, hex in host order) or
    /// /proc/net/igmp6 (IPv6, 32 hex digits).
    func kernelGroupText(_ group: String, ipv6: Bool) -> String {
        if ipv6 {
            var address = in6_addr()
            _ = inet_pton(AF_INET6, group, &address)
            return withUnsafeBytes(of: address) { $0.map { String(format: "%02x", $0) }.joined() }
        }
        var address = in_addr()
        _ = inet_pton(AF_INET, group, &address)
        return String(format: "%08X", address.s_addr)
    }

    /// Five any-source receivers, one of the right source, one of a wrong source; 90 frames.
    func deliver(lab name: String, group: String, senderAddress: String, wrongSource: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let ipv6 = group.contains(":")
        let listen = ipv6 ? "[\(group)]:5004" : "\(group):5004"
        let segment = try MulticastSegment(name: name, receivers: 7)
        let directory = try temporaryDirectory("mcast")
        defer { try? FileManager.default.removeItem(at: directory) }
        func statsPath(_ host: String) -> String { directory.appendingPathComponent("\(host).json").path }
        let frames = 90
        var receivers: [String: Process] = [:]
        for index in 1...7 {
            let host = "r\(index)"
            var arguments = [binary, "recv", "--listen", listen, "--quiet", "--stats", statsPath(host)]
            switch index {
            case 6: arguments += ["--source", senderAddress, "--frames", String(frames)]
            case 7: arguments += ["--source", wrongSource, "--duration", "120"]
            default: arguments += ["--frames", String(frames)]
            }
            receivers[host] = try segment.spawn(host, arguments)
        }
        let joined = kernelGroupText(group, ipv6: ipv6)
        for host in receivers.keys.sorted() {
            try segment.waitUntilBound(host, port: 5004, ipv6: ipv6)
            #expect(try segment.read(host, ipv6 ? "/proc/net/igmp6" : "/proc/net/igmp").contains(joined), "\(host) joined")
        }
        let sender = try segment.spawn("snd", [binary, "send", "--to", "\(listen),ttl=1", "--frames", String(frames),
                                               "--size", "320x240", "--quiet", "--stats", statsPath("snd")])
        #expect(waitForExit(sender, seconds: 60) == 0)
        let sent = try readJSON(URL(fileURLWithPath: statsPath("snd")))
        let packets = try #require(intField(sent, "packets.sent"))
        #expect(intField(sent, "frames.sent") == frames)
        #expect(field(sent, "multicast") as? Bool == true)
        #expect(field(sent, "feedback.enabled") as? Bool == false)
        for index in 1...6 {
            let host = "r\(index)"
            #expect(waitForExit(receivers[host]!, seconds: 30) == 0, "\(host) got its frames")
            let stats = try readJSON(URL(fileURLWithPath: statsPath(host)))
            #expect(intField(stats, "frames.complete") == frames, "\(host)")
            #expect(intField(stats, "packets.received") == packets, "\(host)")
            #expect(intField(stats, "packets.lost") == 0, "\(host)")
            // Exited: its membership is gone from the host (the leave).
            #expect(try !segment.read(host, ipv6 ? "/proc/net/igmp6" : "/proc/net/igmp").contains(joined), "\(host) left")
        }
        // Every receiver that got the stream reported it to the sender's unicast RTCP address
        // (at its RFC 3550 interval, and the stream's end before the sender left), losing nothing.
        let reporting = try #require(sent["receivers"] as? [[String: Any]])
        #expect(reporting.count == 6, "\(reporting)")
        #expect(reporting.allSatisfy { ($0["cumulativeLost"] as? Int) == 0 && (($0["reports"] as? Int) ?? 0) >= 1 })
        #expect(intField(sent, "receiversSummary.evicted") == 0)
        // Sender reports go to the group's RTCP port every ~100 ms: each receiver answered some.
        #expect(reporting.allSatisfy { (($0["rttMs"] as? Double) ?? 0) > 0 }, "\(reporting)")
        let wrong = receivers["r7"]!
        wrong.terminate()
        _ = waitForExit(wrong, seconds: 30)
        let stats = try readJSON(URL(fileURLWithPath: statsPath("r7")))
        #expect(intField(stats, "packets.received") == 0, "a receiver of another source hears nothing")
    }

    @Test func ipv4EveryReceiverGetsEveryFrame() throws {
        try deliver(lab: "mcv4", group: "239.1.2.3", senderAddress: "10.78.0.1", wrongSource: "10.78.0.99")
    }

    @Test func ipv6EveryReceiverGetsEveryFrame() throws {
        try deliver(lab: "mcv6", group: "ff3e::1234", senderAddress: "fd78::1", wrongSource: "fd78::99")
    }

    /// A link-local IPv6 group (ff12::) sent out of and joined on a named interface, with the
    /// sender's own host not hearing it (`--multicast-loop off`): the other host gets every
    /// frame, a receiver of the group on the sending host none.
    @Test func linkLocalScopeOnNamedInterfaceWithoutLoop() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let segment = try MulticastSegment(name: "mcll", receivers: 1)
        let directory = try temporaryDirectory("mcast")
        defer { try? FileManager.default.removeItem(at: directory) }
        func statsPath(_ host: String) -> String { directory.appendingPathComponent("\(host).json").path }
        let listen = ["recv", "--listen", "[ff12::1234]:5004", "--iface", "eth0", "--quiet"]
        let remote = try segment.spawn("r1", [binary] + listen + ["--frames", "60", "--stats", statsPath("r1")])
        let local = try segment.spawn("snd", [binary] + listen + ["--duration", "120", "--stats", statsPath("snd-recv")])
        try segment.waitUntilBound("r1", port: 5004, ipv6: true)
        try segment.waitUntilBound("snd", port: 5004, ipv6: true)
        let sent = try segment.exec("snd", [binary, "send", "--to", "[ff12::1234]:5004", "--multicast-if", "eth0",
                                            "--multicast-loop", "off", "--frames", "60", "--size", "320x240", "--quiet"])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(remote, seconds: 30) == 0)
        #expect(intField(try readJSON(URL(fileURLWithPath: statsPath("r1"))), "frames.complete") == 60)
        local.terminate()
        _ = waitForExit(local, seconds: 30)
        #expect(intField(try readJSON(URL(fileURLWithPath: statsPath("snd-recv"))), "packets.received") == 0)
    }
}
