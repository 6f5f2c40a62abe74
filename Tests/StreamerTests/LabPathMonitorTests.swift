import Foundation
import Glibc
import Testing

/// The route monitor across the lab (issue 17): the sender's route to the receiver removed for
/// 3 s mid-stream. Reaction times are measured from the engine's own stamps
/// (`path.unviableAtUnix`, `path.viableAgainAtUnix`: when it acted on the kernel's notice)
/// against the times the test ran `ip route`, printed, and asserted only against loose physical
/// bounds (a loaded 2-core CI machine): the issue's targets are 50 ms and 100 ms.
@Suite(.serialized, .enabled(if: isRoot && uringEnabled, "needs root (network namespaces) and io_uring (CI has them)"))
struct LabPathMonitorTests {
    @Test(arguments: [false, true])
    func routeRemovedForThreeSeconds(ipv6: Bool) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let lab = try Lab(name: ipv6 ? "hpathr6" : "hpathrm", up: [])
        let destination = ipv6 ? "[fd77:2::2]:5004" : "10.77.2.2:5004"
        let family = ipv6 ? "-6" : "-4"
        let directory = try temporaryDirectory("path-monitor")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sendStats = directory.appendingPathComponent("send.json")
        let recvStats = directory.appendingPathComponent("recv.json")
        let output = directory.appendingPathComponent("x.hevc")
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", ipv6 ? "[::]:5004" : "5004", "--duration", "70", "--quiet", "--out", output.path,
            "--stats", recvStats.path, "--stats-every", "0.1",
        ])
        try lab.waitUntilBound("rcv", port: 5004, ipv6: ipv6)
        // Not --quiet: the path's lines on stderr are part of what is checked.
        let stderrPath = directory.appendingPathComponent("send.err")
        _ = FileManager.default.createFile(atPath: stderrPath.path, contents: nil)
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        sender.arguments = ["netns", "exec", "sl-\(lab.name)-snd", binary, "send", "--to", destination,
                            "--duration", "10", "--size", "320x240", "--bitrate", "2M",
                            "--stats", sendStats.path, "--stats-every", "0.1"]
        sender.standardError = try FileHandle(forWritingTo: stderrPath)
        sender.standardOutput = FileHandle.nullDevice
        sender.standardInput = FileHandle.nullDevice
        try sender.run()
        let senderStarted = Date()

        func senderStats(within seconds: Double, _ condition: ([String: Any]) -> Bool) -> [String: Any]? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let object = try? readJSON(sendStats), condition(object) { return object }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return nil
        }
        // Streaming, feedback flowing.
        try #require(senderStats(within: 10) { (intField($0, "frames.sent") ?? 0) >= 45 && (intField($0, "packets.confirmed") ?? 0) > 0 } != nil,
                     "the stream never started")
        let removing = Date().timeIntervalSince1970
        let removed = try lab.exec("snd", "/usr/sbin/ip", [family, "route", "del", "default"])
        let removedAfter = Date().timeIntervalSince1970
        try #require(removed.status == 0, "ip route del: \(removed.stderr)")
        let lost = senderStats(within: 5) { field($0, "path.viable") as? Bool == false }
        let lostRead = Date().timeIntervalSince1970
        let framesBeforeReturn = (try? readJSON(recvStats)).flatMap { intField($0, "frames.complete") } ?? 0
        Thread.sleep(forTimeInterval: max(0, removing + 3 - Date().timeIntervalSince1970))
        // The sender's last stats before the route returns: with the first ones without a route,
        // the frames the source made and the sender dropped in between.
        let stillLost = try? readJSON(sendStats)
        let adding = Date().timeIntervalSince1970
        let added = try lab.exec("snd", "/usr/sbin/ip", [family, "route", "add", "default", "via", ipv6 ? "fd77:1::1" : "10.77.1.1"])
        let addedAfter = Date().timeIntervalSince1970
        try #require(added.status == 0, "ip route add: \(added.stderr)")
        let exits = stopAfterSender(sender, seconds: 30, receiver: receiver, grace: 1)
        let senderRan = Date().timeIntervalSince(senderStarted) - 1  // less the grace
        #expect(exits.sender == 0 && exits.receiver == 0)
        let send = try readJSON(sendStats)
        let recv = try readJSON(recvStats)
        let lines = (try? String(contentsOf: stderrPath, encoding: .utf8)) ?? ""
        // Before the requirements, so that a failure says why: the path as the sender saw it
        // (its monitor's overruns and failures among it) and what it said on stderr.
        print((ipv6 ? "IPv6" : "IPv4") + " sender path \(field(send, "path") ?? "-"); errors \(field(send, "errors") ?? "-"); stderr: \(lines)")
        // And how the ends saw losses and repairs (a failed send's gap is NACKed and resent).
        print((ipv6 ? "IPv6" : "IPv4") + " sender nack \(field(send, "nack") ?? "-") rtx \(field(send, "rtx") ?? "-"); receiver packets \(field(recv, "packets") ?? "-") nack \(field(recv, "nack") ?? "-") rtx \(field(recv, "rtx") ?? "-") frames \(field(recv, "frames") ?? "-")")

        let unviableAt = try #require(field(send, "path.unviableAtUnix") as? Double)
        let viableAt = try #require(field(send, "path.viableAgainAtUnix") as? Double)
        let unviableMs = try #require(field(send, "path.unviableMs") as? Double)
        let resumeMs = try #require(field(send, "path.resumeMs") as? Double)
        let failed = intField(send, "packets.failed") ?? -1
        print((ipv6 ? "IPv6 " : "IPv4 ") + String(format: "route removed: path not viable %.1f ms after `ip route del` started (%.1f ms after it returned); route back: viable %.1f ms after `ip route add` started (%.1f ms after it returned), first keyframe on the wire %.1f ms after that; unviableMs %.1f (route gone %.0f-%.0f ms by the test's clock); packets.failed %d; frames.droppedUnviable %d; receiver: %d complete (%d before the route returned), %d keyframes",
                     (unviableAt - removing) * 1000, (unviableAt - removedAfter) * 1000,
                     (viableAt - adding) * 1000, (viableAt - addedAfter) * 1000, resumeMs, unviableMs,
                     (adding - removedAfter) * 1000, (addedAfter - removing) * 1000, failed,
                     intField(send, "frames.droppedUnviable") ?? -1,
                     intField(recv, "frames.complete") ?? -1, framesBeforeReturn, intField(recv, "frames.keyframes") ?? -1) + "; errors \(field(send, "errors") ?? "-")")

        #expect(lost != nil, "path.viable never went false")
        // Netlink, not the next send: the issue's target is 50 ms; a loaded CI machine gets 1 s.
        #expect(unviableAt - removing < 1.0)
        #expect(viableAt - adding < 1.0)
        #expect(viableAt >= adding && unviableAt >= removing)
        // The next frame after the route's return is a forced keyframe (30 fps: one every
        // 33 ms, plus encoding); the issue's target is 100 ms.
        #expect(resumeMs < 1000)
        // The route was gone for 3 s by the test's clock (the `ip` calls' own time aside).
        #expect(unviableMs >= (adding - removedAfter) * 1000 - 50 && unviableMs <= (addedAfter - removing) * 1000 + 1000)
        #expect(intField(send, "path.unviableEpisodes") == 1)
        #expect(intField(send, "path.changes") == 0)
        #expect(field(send, "path.viable") as? Bool == true)
        #expect(field(send, "path.interface") as? String == "sl-\(lab.name)-s")
        #expect(field(send, "path.gateway") as? String == (ipv6 ? "fd77:1::1" : "10.77.1.1"))
        #expect(field(send, "path.source") as? String == (ipv6 ? "fd77:1::2" : "10.77.1.2"))
        // No storm of send errors: nothing is sent while no route exists; at most what was
        // already submitted when the route went (one submission) fails.
        #expect(failed >= 0 && failed <= 64)
        // The source kept running without a route, and what it made was dropped and counted, not
        // queued: between the first stats without a route and the last before its return (~2.9 s;
        // 30 fps asked, fewer where x265 is starved), the source made frames at no less than half
        // its rate over the run, none was sent, and every one was dropped but a frame at each end
        // on its way from the encoder to the engine.
        let encoded = intField(send, "frames.encoded") ?? -1
        let dropped = intField(send, "frames.droppedUnviable") ?? 0
        #expect(dropped <= 150)
        let outage = try #require(lost), outageEnd = try #require(stillLost)
        #expect(field(outageEnd, "path.viable") as? Bool == false)
        func grew(_ key: String) -> Int { (intField(outageEnd, key) ?? 0) - (intField(outage, key) ?? 0) }
        // Its rate over the run: 300 frames asked (--duration 10 at 30 fps); a starved x265 makes
        // fewer in more time (seen: 237 in ~30 s at a fifth of a core).
        let encodedRate = Double(encoded) / senderRan
        print((ipv6 ? "IPv6" : "IPv4") + " without a route (\(adding - lostRead) s read apart): \(grew("frames.encoded")) frames encoded, \(grew("frames.droppedUnviable")) dropped, \(grew("frames.sent")) sent; \(encodedRate) fps over the run")
        #expect(Double(grew("frames.encoded")) >= encodedRate * (adding - lostRead) / 2)
        #expect(grew("frames.sent") == 0)
        #expect(grew("frames.droppedUnviable") >= grew("frames.encoded") - 2)
        // With congestion control on (the default here), frames that waited too long for the
        // path are dropped whole and counted in `cc.framesDropped`, which this sum lacked: on a
        // machine a quarter as fast it came 34 short of 300 (the cc counts were not printed then).
        let accounted = ["frames.sent", "frames.droppedUnviable", "frames.droppedUnconfirmed", "frames.droppedQueueFull",
                         "path.framesClamped", "cc.framesDropped"].compactMap { intField(send, $0) }.reduce(0, +)
        #expect(accounted == encoded, "frames \(field(send, "frames") ?? "-"), cc \(field(send, "cc") ?? "-")")
        #expect((intField(send, "frames.keyframes") ?? 0) >= 2)
        #expect(intField(send, "receiverGoneEvents") == 0)
        // The receiver got every frame sent whole, decoded from the keyframe after the outage on.
        // A packet whose send failed as the route went (its frame counts as sent) cannot be
        // repaired: the receiver sees its gap only when the stream resumes, 3 s later, past the
        // sender's retransmission history (rtx-time 0.5 s; the NACK is answered "too old"). It
        // breaks its frame and, as the packets lost before a frame may have begun it, the next.
        let complete = intField(recv, "frames.complete") ?? -1
        let sent = intField(send, "frames.sent") ?? -1
        #expect(complete <= sent && complete >= sent - 2 * failed)
        #expect(intField(recv, "packets.received") == intField(send, "packets.sent"))
        // A send that failed as the route went (counted in packets.failed, not sent) used a
        // sequence number: the receiver sees its gap as lost (seen: 1 failed, 1 lost). Nothing else.
        #expect((intField(recv, "packets.lost") ?? -1) <= failed)
        #expect((intField(recv, "frames.complete") ?? 0) - framesBeforeReturn >= 60)
        #expect((intField(recv, "frames.keyframes") ?? 0) >= 2)
        // The decoder decodes what the receiver says follows an intact chain: every complete
        // frame but those after a broken one until the next keyframe.
        let incomplete = intField(recv, "frames.incomplete") ?? -1
        let undecodableWhole = (intField(recv, "frames.undecodable") ?? -1) - incomplete
        if let probe = try probeDecodedFrames(output.path) {
            #expect(probe.frames == complete - undecodableWhole)
        }
        // A frame lost as the route went back (the keyframe forced at its return among them) is
        // mended within a second: the receiver's PLI forces a keyframe once 500 ms have passed
        // since the last forced one (deferred, not ignored), 30 frames at 30 fps; 45 allowed
        // for a loaded machine (the next regular keyframe would be 2 s, 60 frames, away).
        #expect(undecodableWhole <= 45)
        // One line when the path went, one when it came back.
        #expect(lines.components(separatedBy: "no route to \(destination)").count - 1 == 1, "stderr: \(lines)")
        #expect(lines.components(separatedBy: "a route is back (").count - 1 == 1, "stderr: \(lines)")
    }
    /// A stream across `lab` (recv in rcv, send in snd, both --quiet, stats every 20 ms).
    private func startStream(_ lab: Lab, seconds: Int, directory: URL) throws -> (sender: Process, receiver: Process) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", String(seconds + 60), "--quiet",
            "--stats", directory.appendingPathComponent("recv.json").path, "--stats-every", "0.1",
        ])
        try lab.waitUntilBound("rcv", port: 5004)
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--duration", String(seconds), "--size", "320x240", "--bitrate", "2M",
            "--quiet", "--stats", directory.appendingPathComponent("send.json").path, "--stats-every", "0.02",
        ])
        return (sender, receiver)
    }

    /// Waits until the stream runs (30 frames sent, feedback confirming them; with
    /// `confirmed1500`, the path MTU 1500 confirmed by a probe).
    private func waitUntilStreaming(_ directory: URL, confirmed1500: Bool = false) throws {
        try #require(senderStats(directory, within: 10) {
            (intField($0, "frames.sent") ?? 0) >= 30 && (intField($0, "packets.confirmed") ?? 0) > 0
                && (!confirmed1500 || (intField($0, "path.mtu") == 1500 && field($0, "path.mtuSource") as? String == "probe"))
        } != nil, confirmed1500 ? "the sender never confirmed 1500" : "the stream never started")
    }

    /// Waits for both ends to exit (status 0) and returns their final stats.
    private func finish(_ stream: (sender: Process, receiver: Process), _ directory: URL) throws
        -> (send: [String: Any], recv: [String: Any]) {
        let exits = stopAfterSender(stream.sender, seconds: 30, receiver: stream.receiver, grace: 1)
        #expect(exits.sender == 0 && exits.receiver == 0)
        return (try readJSON(directory.appendingPathComponent("send.json")),
                try readJSON(directory.appendingPathComponent("recv.json")))
    }

    /// The sender's stats once `condition` holds, polled every 10 ms for up to `seconds`.
    private func senderStats(_ directory: URL, within seconds: Double,
                             _ condition: ([String: Any]) -> Bool) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let object = try? readJSON(directory.appendingPathComponent("send.json")), condition(object) { return object }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return nil
    }

    /// The sender's own link MTU lowered to 1300 mid-stream: the flow is clamped before its
    /// next send (nothing fails as too large after the engine's reaction; at most a submission
    /// already on its way when the link changed could), every frame sent whole arrives.
    @Test func ownLinkMTULowered() throws {
        let lab = try Lab(name: "hpathmt", up: [])
        let directory = try temporaryDirectory("path-mtu-link")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stream = try startStream(lab, seconds: 8, directory: directory)
        try waitUntilStreaming(directory, confirmed1500: true)
        // Straight with ip (netlab set spends a few hundred ms in its own bookkeeping first);
        // only our end: the router's side of the link can stay larger.
        let lowering = Date()
        let lowered = try run("/usr/sbin/ip", ["-n", "sl-\(lab.name)-snd", "link", "set", "dev", "sl-\(lab.name)-s", "mtu", "1300"])
        try #require(lowered.status == 0, "ip link set mtu: \(lowered.stderr)")
        let clamped = senderStats(directory, within: 5) { intField($0, "path.mtu") == 1300 }
        let clampedAfter = Date().timeIntervalSince(lowering)
        let (send, recv) = try finish(stream, directory)
        let failedAtClamp = clamped.flatMap { intField($0, "packets.failed") } ?? -1
        let failed = intField(send, "packets.failed") ?? -1
        print(String(format: "own link MTU 1500 -> 1300: path.mtu 1300 in the stats %.0f ms after `ip link set mtu` started (stats every 20 ms, polled every 10 ms); packets.failed %d (%d when the clamp showed); framesClamped %d; receiver lost %d, %d complete of %d sent", clampedAfter * 1000, failed, failedAtClamp, intField(send, "path.framesClamped") ?? -1, intField(recv, "packets.lost") ?? -1, intField(recv, "frames.complete") ?? -1, intField(send, "frames.sent") ?? -1) + "; errors \(field(send, "errors") ?? "-")")
        try #require(clamped != nil, "the sender never clamped to the link's 1300")
        #expect(clampedAfter < 2)
        #expect(intField(send, "path.mtu") == 1300)
        #expect(field(send, "path.interface") as? String == "sl-\(lab.name)-s")
        // Too large fails locally (EMSGSIZE: DF over a 1300-byte link), only what was handed to
        // the ring before the engine clamped: at most its 64 send slots. Such a send's failure
        // can be counted after a publication that already shows the clamp (its completion reaped
        // later): a fresh-clone CI run read 0 failed when the clamp showed, 1 at the end (the
        // receiver's one loss). An engine that kept building datagrams for 1500 would fail a
        // frame's worth every frame for the rest of the run.
        #expect(failed >= failedAtClamp)
        #expect(failed >= 0 && failed <= 64)
        #expect(intField(send, "path.changes") == 0)
        #expect(intField(send, "path.unviableEpisodes") == 0)
        if failed == 0 {
            #expect(intField(recv, "packets.lost") == 0)
            #expect(intField(recv, "packets.received") == intField(send, "packets.sent"))
            #expect(intField(recv, "frames.complete") == intField(send, "frames.sent"))
        }
    }

    /// The route to the receiver moved to a second router whose egress has a 1300-byte MTU
    /// (built here beside the lab: snd -> rt2 -> rcv, the source address pinned so the receiver
    /// keeps hearing the same address): one path change, and the new path MTU found at once,
    /// not at the next 15 s re-probe.
    @Test func routeMovedToASmallerPath() throws {
        let lab = try Lab(name: "hpathmv", up: [])
        let second = "sl-\(lab.name)-rt2"
        func ip(_ arguments: [String]) throws {
            let outcome = try run("/usr/sbin/ip", arguments)
            try #require(outcome.status == 0, "ip \(arguments.joined(separator: " ")): \(outcome.stderr)")
        }
        _ = try? run("/usr/sbin/ip", ["netns", "del", second])
        try ip(["netns", "add", second])
        defer { _ = try? run("/usr/sbin/ip", ["netns", "del", second]) }
        let (snd, rcv) = ("sl-\(lab.name)-snd", "sl-\(lab.name)-rcv")
        try ip(["-n", second, "link", "set", "lo", "up"])
        try ip(["link", "add", "name", "sl-\(lab.name)-s2", "netns", snd, "type", "veth", "peer", "name", "sl-\(lab.name)-q1", "netns", second])
        try ip(["link", "add", "name", "sl-\(lab.name)-q2", "netns", second, "type", "veth", "peer", "name", "sl-\(lab.name)-r3", "netns", rcv])
        for (namespace, interface, address, mtu) in [(snd, "s2", "10.77.4.2/24", "1500"), (second, "q1", "10.77.4.1/24", "1500"),
                                                     (second, "q2", "10.77.5.1/24", "1300"), (rcv, "r3", "10.77.5.2/24", "1300")] {
            try ip(["-n", namespace, "addr", "add", address, "dev", "sl-\(lab.name)-\(interface)"])
            try ip(["-n", namespace, "link", "set", "sl-\(lab.name)-\(interface)", "mtu", mtu, "gso_max_segs", "1", "up"])
        }
        _ = try run("/usr/sbin/ip", ["netns", "exec", second, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        _ = try run("/usr/sbin/ip", ["netns", "exec", second, "sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"])
        try ip(["-n", second, "route", "add", "10.77.2.2/32", "via", "10.77.5.2"])
        try ip(["-n", second, "route", "add", "10.77.1.0/24", "via", "10.77.4.2"])
        let directory = try temporaryDirectory("path-move")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stream = try startStream(lab, seconds: 8, directory: directory)
        try waitUntilStreaming(directory, confirmed1500: true)
        let moving = Date()
        try ip(["-n", snd, "route", "add", "10.77.2.2/32", "via", "10.77.4.1", "dev", "sl-\(lab.name)-s2", "src", "10.77.1.2"])
        let changed = senderStats(directory, within: 5) { intField($0, "path.changes") == 1 }
        let changedAfter = Date().timeIntervalSince(moving)
        let found = senderStats(directory, within: 5) {
            intField($0, "path.mtu") == 1300 && field($0, "path.mtuSource") as? String == "probe"
        }
        let foundAfter = Date().timeIntervalSince(moving)
        let (send, recv) = try finish(stream, directory)
        print(String(format: "route moved to a 1300-byte path: path.changes 1 in the stats %.0f ms after `ip route add` started, path MTU 1300 confirmed by a probe %.0f ms after it (stats every 20 ms); ", changedAfter * 1000, foundAfter * 1000) + "path \(field(send, "path") ?? "-"); send lost \(intField(send, "packets.lost") ?? -1), recv lost \(intField(recv, "packets.lost") ?? -1), complete \(intField(recv, "frames.complete") ?? -1) of \(intField(send, "frames.sent") ?? -1) sent")
        #expect(changed != nil, "no path change seen")
        #expect(found != nil, "the new path MTU was not found")
        // The issue's target is 1 s; a loaded CI machine gets 3.
        #expect(foundAfter < 3)
        #expect(intField(send, "path.changes") == 1)
        #expect(intField(send, "path.mtu") == 1300)
        #expect(field(send, "path.interface") as? String == "sl-\(lab.name)-s2")
        #expect(field(send, "path.gateway") as? String == "10.77.4.1")
        #expect(field(send, "path.source") as? String == "10.77.1.2")
        #expect(intField(send, "path.unviableEpisodes") == 0)
        // Exact accounting: what the receiver misses is what the sender counts lost (at most
        // what was in flight above 1300 when the route moved).
        #expect(intField(recv, "packets.lost") == intField(send, "packets.lost"))
        #expect((intField(send, "packets.lost") ?? 99) <= 64)
        #expect(intField(recv, "rejected.foreignSource") == nil)
    }
    /// A second address added to the sender's interface and the first removed mid-stream (with
    /// promote_secondaries, so the route stays): the flow's sockets take the new source address
    /// on the same ports, the receiver follows the same SSRC there, and nothing is counted lost.
    @Test func sourceAddressReplaced() throws {
        let lab = try Lab(name: "hpathsa", up: [])
        let (snd, interface) = ("sl-\(lab.name)-snd", "sl-\(lab.name)-s")
        _ = try run("/usr/sbin/ip", ["netns", "exec", snd, "sysctl", "-q", "-w", "net.ipv4.conf.\(interface).promote_secondaries=1"])
        let directory = try temporaryDirectory("path-source")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stream = try startStream(lab, seconds: 7, directory: directory)
        try waitUntilStreaming(directory)
        let replacing = Date()
        let added = try run("/usr/sbin/ip", ["-n", snd, "addr", "add", "10.77.1.3/24", "dev", interface])
        let removed = try run("/usr/sbin/ip", ["-n", snd, "addr", "del", "10.77.1.2/24", "dev", interface])
        try #require(added.status == 0 && removed.status == 0, "ip addr: \(added.stderr) \(removed.stderr)")
        let rebound = senderStats(directory, within: 5) { intField($0, "path.rebinds") == 1 }
        let reboundAfter = Date().timeIntervalSince(replacing)
        let (send, recv) = try finish(stream, directory)
        print(String(format: "source address replaced: rebound in the stats %.0f ms after `ip addr add` started; ", reboundAfter * 1000) + "sender path \(field(send, "path") ?? "-"), packets \(field(send, "packets") ?? "-"); receiver source \(field(recv, "source") ?? "-"), sourceMoves \(intField(recv, "sourceMoves") ?? -1), lost \(intField(recv, "packets.lost") ?? -1), rejected \(field(recv, "rejected") ?? "-")")
        #expect(rebound != nil, "the flow never took the new source address")
        #expect(intField(send, "path.rebinds") == 1)
        #expect(field(send, "path.source") as? String == "10.77.1.3")
        #expect(intField(send, "path.changes") == 0 && intField(send, "path.unviableEpisodes") == 0)
        #expect((field(recv, "source") as? String)?.hasPrefix("10.77.1.3:") == true)
        #expect(intField(recv, "sourceMoves") == 1)
        // At most what the old socket still had under way when the new one sent first: such a
        // packet reaches the receiver after it followed the new address and is rejected as
        // foreign (seen once in a full run on a loaded machine: 1 packet), counted lost at both
        // ends alike, and its retransmission (on by default) completes the frame. Nothing else.
        let lost = try #require(intField(recv, "packets.lost"))
        let foreign = intField(recv, "rejected.foreignSource") ?? 0
        #expect(lost <= 2 && foreign <= 2 + lost, "lost \(lost), foreign \(foreign)")
        #expect(intField(send, "packets.lost") == lost)
        // (Such a packet may yet arrive after it was counted lost: then it is received as well.)
        #expect((intField(send, "packets.confirmed") ?? 0) >= (intField(send, "packets.sent") ?? 0) - lost)
        #expect((intField(recv, "packets.received") ?? 0) >= (intField(send, "packets.sent") ?? 0) - lost)
        // A send under way as the old address goes fails (counted in `packets.failed`, lost at
        // both ends); its frame may then go out incomplete (seen once in a full CI run: 1 failed,
        // 209 of 210 frames whole). Every other frame arrives whole.
        let failed = intField(send, "packets.failed") ?? 0
        #expect(failed <= 2)
        #expect((intField(recv, "frames.complete") ?? 0) >= (intField(send, "frames.sent") ?? 0) - failed)
        #expect(intField(send, "receiverGoneEvents") == 0)
    }
    /// The sender's link loses its carrier for 2 s (the router's end of the veth set down: the
    /// routes stay, nothing leaves): not viable once the kernel says so, viable again with the
    /// carrier. The kernel announces a carrier loss late: linkwatch handles it as a non-urgent
    /// event, batched up to a second (net/core/link_watch.c), and sends meanwhile fail (counted,
    /// one line); its return is announced at once.
    @Test func carrierLostForTwoSeconds() throws {
        let lab = try Lab(name: "hpathcl", up: [])
        let directory = try temporaryDirectory("path-carrier")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stream = try startStream(lab, seconds: 7, directory: directory)
        try waitUntilStreaming(directory)
        let routerEnd = ["-n", "sl-\(lab.name)-rtr", "link", "set", "dev", "sl-\(lab.name)-rs"]
        let downAt = Date().timeIntervalSince1970
        try #require(try run("/usr/sbin/ip", routerEnd + ["down"]).status == 0)
        let lost = senderStats(directory, within: 5) { field($0, "path.viable") as? Bool == false }
        Thread.sleep(forTimeInterval: max(0, downAt + 2 - Date().timeIntervalSince1970))
        let upAt = Date().timeIntervalSince1970
        try #require(try run("/usr/sbin/ip", routerEnd + ["up"]).status == 0)
        let (send, recv) = try finish(stream, directory)
        let unviableAt = field(send, "path.unviableAtUnix") as? Double ?? 0
        let viableAt = field(send, "path.viableAgainAtUnix") as? Double ?? 0
        print(String(format: "carrier lost: not viable %.1f ms after `ip link set down` started, viable %.1f ms after `ip link set up` started; ", (unviableAt - downAt) * 1000, (viableAt - upAt) * 1000) + "unviableMs \(field(send, "path.unviableMs") ?? "-"), failed \(intField(send, "packets.failed") ?? -1), droppedUnviable \(intField(send, "frames.droppedUnviable") ?? -1), errors \(field(send, "errors") ?? "-"), send lost \(intField(send, "packets.lost") ?? -1); receiver complete \(intField(recv, "frames.complete") ?? -1) of \(intField(send, "frames.sent") ?? -1) sent, lost \(intField(recv, "packets.lost") ?? -1)")
        #expect(lost != nil, "path.viable never went false")
        #expect(unviableAt - downAt < 2.0 && unviableAt >= downAt)  // linkwatch: up to 1 s, plus a loaded machine
        #expect(viableAt - upAt < 1.0 && viableAt >= upAt)
        #expect(intField(send, "path.unviableEpisodes") == 1)
        #expect(field(send, "path.viable") as? Bool == true)
        #expect((intField(send, "frames.droppedUnviable") ?? 0) >= 30)
        // Sends in linkwatch's delay fail (the device drops them); no storm: a second of 2 Mbit/s
        // is under 200 datagrams.
        #expect((intField(send, "packets.failed") ?? -1) <= 200)
        // What the receiver misses the sender counts lost; the sender may count a few more whose
        // feedback was lost on the dead link.
        #expect((intField(recv, "packets.lost") ?? -1) <= (intField(send, "packets.lost") ?? -1))
        #expect((intField(recv, "frames.keyframes") ?? 0) >= 2)
    }
}
