import Foundation
import Testing
import TestSupport

/// 32 receivers of one group in the lab (tools/mcastlab), 1 % random loss on four of their
/// links (nftables, counted): the sender's `receivers` entry of each shows exactly its own
/// loss, which is its link's drops, and the 28 others none — unless the host itself dropped a
/// copy on the way (the bridge floods 32 copies of every packet into the kernel's per-CPU
/// backlog; a machine too loaded to drain it drops there), which its own counters show.
/// tools/mcastlab segments GSO bursts before the bridge: nft counts datagrams, not bursts.
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root (network namespaces), nftables and io_uring (CI has them)"))
struct MulticastManyReceiversLabTests {
    static let receivers = 32
    static let lossy = 1...4

    /// Drops 1 % of the media arriving on UDP 5004, but never a packet that ends a frame (RTP
    /// marker bit, bit 72 of the transport header) nor one of the first 30 kB: the stream's
    /// first and last packets always arrive, so every drop lies between packets the receiver
    /// got and counts in its loss (RFC 3550 A.3: expected from the first to the highest).
    static let dropRule = """
        table inet mf {
          chain in {
            type filter hook input priority 0; policy accept;
            udp dport 5004 @th,72,1 0 quota over 30 kbytes numgen random mod 100 < 1 counter drop
          }
        }
        """

    func drops(_ segment: MulticastSegment, _ host: String) throws -> Int {
        let listing = try segment.exec(host, ["/usr/sbin/nft", "list", "chain", "inet", "mf", "in"]).stdout
        let match = try #require(listing.firstMatch(of: /counter packets (\d+)/), "no counter in \(listing)")
        return try #require(Int(match.1))
    }

    /// Packets the host dropped on the way to `host` outside nftables and its socket: the
    /// bridge port's and the receiver's device drops and its IP layer's discards.
    func hostDrops(_ segment: MulticastSegment, _ host: String) throws -> Int {
        func number(_ text: String) -> Int { Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
        let port = number(try segment.read("br", "/sys/class/net/p-\(host)/statistics/tx_dropped"))
        let device = number(try segment.read(host, "/sys/class/net/eth0/statistics/rx_dropped"))
        let snmp = try segment.read(host, "/proc/net/snmp").split(separator: "\n").filter { $0.hasPrefix("Ip:") }
        var discards = 0
        if snmp.count == 2, let column = snmp[0].split(separator: " ").firstIndex(of: "InDiscards") {
            discards = Int(snmp[1].split(separator: " ")[column]) ?? 0
        }
        return port + device + discards
    }

    /// The kernel's per-CPU backlog drops, all CPUs (the second column of softnet_stat, hex).
    static func backlogDrops() -> Int {
        // (procFileText: one line per CPU, past one page on a machine with many CPUs.)
        return procFileText("/proc/net/softnet_stat").split(separator: "\n").reduce(0) { sum, line in
            let columns = line.split(separator: " ")
            return sum + (columns.count > 1 ? Int(columns[1], radix: 16) ?? 0 : 0)
        }
    }

    @Test func eachReceiversReportShowsItsOwnLinksDrops() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let segment = try MulticastSegment(name: "mf32", receivers: Self.receivers)
        let directory = try temporaryDirectory("mcast32")
        defer { try? FileManager.default.removeItem(at: directory) }
        func statsPath(_ host: String) -> String { directory.appendingPathComponent("\(host).json").path }
        let ruleFile = directory.appendingPathComponent("drop.nft")
        try Self.dropRule.write(to: ruleFile, atomically: true, encoding: .utf8)
        for index in Self.lossy {
            let loaded = try segment.exec("r\(index)", ["/usr/sbin/nft", "-f", ruleFile.path])
            try #require(loaded.status == 0, "nft: \(loaded.stderr)")
        }
        let group = "239.1.2.4"
        var receivers: [Process] = []
        for index in 1...Self.receivers {
            receivers.append(try segment.spawn("r\(index)", [binary, "recv", "--listen", "\(group):5004", "--quiet",
                                                             "--duration", "300", "--stats", statsPath("r\(index)")]))
        }
        defer { for receiver in receivers where receiver.isRunning { receiver.terminate() } }
        // 32 receivers start on a loaded machine: wait (generously) for each to bind and join.
        let joined = MulticastLabTests().kernelGroupText(group, ipv6: false)
        for index in 1...Self.receivers {
            try segment.waitUntilBound("r\(index)", port: 5004, ipv6: false)
            let deadline = Date().addingTimeInterval(20)
            while !(try segment.read("r\(index)", "/proc/net/igmp")).contains(joined) && Date() < deadline {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        // ~2,500 packets in 15 s at ~1.5 Mbit/s: about 20 drops on each lossy link. The sender
        // stays until every receiver reported the stream's last packet (or 2 s more).
        let backlogBefore = Self.backlogDrops()
        let sender = try segment.spawn("snd", [binary, "send", "--to", "\(group):5004,ttl=1", "--frames", "450",
                                               "--size", "640x360", "--bitrate", "1.5M", "--quiet",
                                               "--stats", statsPath("snd")])
        #expect(waitForExit(sender, seconds: 120) == 0)
        for receiver in receivers { receiver.terminate() }
        for (index, receiver) in receivers.enumerated() {
            #expect(waitForExit(receiver, seconds: 30) == 0, "r\(index + 1) exits on SIGTERM")
        }

        let sent = try readJSON(URL(fileURLWithPath: statsPath("snd")))
        let packets = try #require(intField(sent, "packets.sent"))
        #expect(packets > 1_500, "a stream long enough for 1 % to show: \(packets) packets")
        #expect(intField(sent, "receiversSummary.count") == Self.receivers)
        #expect(intField(sent, "receiversSummary.evicted") == 0)
        let entries = try #require(sent["receivers"] as? [[String: Any]])
        var byHost: [String: [String: Any]] = [:]
        for entry in entries {
            guard let address = entry["address"] as? String, let host = address.split(separator: ":").first else { continue }
            byHost[String(host)] = entry
        }
        let highest = Set(entries.compactMap { $0["highestSequence"] as? Int })
        #expect(highest.count == 1, "every receiver's last report covers the stream's end: \(highest)")
        let backlog = Self.backlogDrops() - backlogBefore
        var totalDrops = 0
        var hostLosses = 0
        var hostDropTotal = 0
        for index in 1...Self.receivers {
            let host = "r\(index)"
            let dropped = Self.lossy.contains(index) ? try drops(segment, host) : 0
            totalDrops += dropped
            let stats = try readJSON(URL(fileURLWithPath: statsPath(host)))
            let lost = try #require(intField(stats, "packets.lost"), "\(host): \(stats)")
            // Its link's drops exactly, plus what the host dropped on the way (counted by the
            // kernel: the backlog is shared, so it bounds the sum over all receivers).
            let ownDrops = try hostDrops(segment, host)
            #expect(lost >= dropped && lost <= dropped + ownDrops + backlog,
                    "\(host): lost \(lost), link drops \(dropped), host drops \(ownDrops), backlog drops \(backlog), socket drops \(intField(stats, "kernelDrops") ?? -1)")
            hostLosses += lost - dropped
            // 33 members at ~1.5 Mbit/s: ~0.4 s (0.5-1.5 x that over e - 3/2), far from RFC 3550's 5 s.
            let interval = field(stats, "rtcp.interval") as? Double ?? 0
            #expect(interval > 0.05 && interval < 2, "\(host): rtcp.interval \(interval)")
            #expect(intField(stats, "packets.received") == packets - lost, "\(host)")
            #expect(intField(stats, "rtcp.members") == Self.receivers + 1, "\(host): the sender's RSI group size + 1")
            let entry = try #require(byHost["10.78.0.\(10 + index)"], "\(host) is in the sender's receivers")
            #expect(entry["cumulativeLost"] as? Int == lost, "\(host): \(entry)")
            hostDropTotal += ownDrops
        }
        #expect(hostLosses <= hostDropTotal + backlog, "losses beyond the links' drops: \(hostLosses)")
        if hostLosses > 0 { print("mcast32: the host dropped \(hostLosses) copies (backlog \(backlog), devices \(hostDropTotal))") }
        #expect(totalDrops >= 20, "four 1 % links over \(packets) packets dropped \(totalDrops)")
    }
}
