import Foundation
import Glibc
import Testing
import TestSupport


private let interopFFmpeg = "/usr/bin/ffmpeg"

/// ffmpeg and GStreamer on both ends of a multicast stream, in a tools/mcastlab segment.
@Suite(.enabled(if: isRoot && uringEnabled && FileManager.default.isExecutableFile(atPath: interopFFmpeg) && gstLaunch != nil,
                "needs root (network namespaces), io_uring, ffmpeg and GStreamer (CI has them)"))
struct MulticastInteropTests {
    /// ffmpeg (reading our SDP with `c=IN IP4 239.1.2.3/1`) and GStreamer (`udpsrc address=
    /// auto-multicast=true`) receive our group: ffmpeg decodes the 90 frames it is asked for
    /// (of 100 sent: it outputs a frame once later data pushes it through), GStreamer writes
    /// all 100 and they decode.
    @Test func ffmpegAndGStreamerReceiveOurGroup() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let ffmpeg = interopFFmpeg
        let gst = try #require(gstLaunch)
        let segment = try MulticastSegment(name: "mcint1", receivers: 2)
        let directory = try temporaryDirectory("mcast-interop")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sdp = directory.appendingPathComponent("x.sdp").path
        let to = ["--to", "239.1.2.3:5004", "--size", "320x240", "--quiet"]
        // The SDP first (the encoder's parameter sets are the same on every run with these options).
        let written = try segment.exec("snd", [binary, "send", "--frames", "1", "--sdp", sdp] + to)
        #expect(written.status == 0, "send: \(written.stderr)")
        #expect(try String(contentsOfFile: sdp, encoding: .utf8).contains("c=IN IP4 239.1.2.3/1\r\n"))
        let hashes = directory.appendingPathComponent("ffmpeg.md5").path
        let ffmpegReceiver = try segment.spawn("r1", [
            ffmpeg, "-v", "error", "-nostdin", "-protocol_whitelist", "file,udp,rtp", "-reorder_queue_size", "0",
            "-threads", "1", "-i", sdp, "-frames:v", "90", "-f", "framemd5", "-y", hashes])
        defer { if ffmpegReceiver.isRunning { ffmpegReceiver.terminate() } }
        let gstOutput = directory.appendingPathComponent("gst.hevc").path
        // gst-launch must see SIGINT to end the stream (-e): the test's blocked signals are unblocked.
        let gstReceiver = try segment.spawn("r2", [
            "/usr/bin/python3", "-c",
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
            gst, "-e", "udpsrc", "address=239.1.2.3", "port=5004", "auto-multicast=true",
            "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=H265,payload=96",
            "!", "rtph265depay", "!", "h265parse", "!", "video/x-h265,stream-format=byte-stream",
            "!", "filesink", "location=\(gstOutput)"])
        defer { if gstReceiver.isRunning { gstReceiver.terminate() } }
        try segment.waitUntilBound("r1", port: 5004, ipv6: false)
        try segment.waitUntilBound("r2", port: 5004, ipv6: false)
        let sent = try segment.exec("snd", [binary, "send", "--frames", "100"] + to)
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(ffmpegReceiver, seconds: 30) == 0)
        let decoded = try String(contentsOfFile: hashes, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(decoded.count == 90)
        Thread.sleep(forTimeInterval: 0.5)  // the last datagrams through GStreamer's pipeline
        kill(gstReceiver.processIdentifier, SIGINT)
        #expect(waitForExit(gstReceiver, seconds: 10) == 0)
        if let probe = try probeDecodedFrames(gstOutput) {
            #expect(probe.frames == 100, "GStreamer wrote \(probe.frames) decodable frames of 100")
            #expect(probe.stderr.isEmpty, "ffprobe: \(probe.stderr)")
        }
    }

    /// `streamer recv` joins groups that ffmpeg (`rtp://239.1.2.5:5004?ttl=1`) and GStreamer
    /// (`udpsink host=239.1.2.6 auto-multicast=true`) send to: every frame complete, none lost.
    @Test func weReceiveGroupsOfFFmpegAndGStreamer() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let ffmpeg = interopFFmpeg
        let gst = try #require(gstLaunch)
        let segment = try MulticastSegment(name: "mcint2", receivers: 2)
        let directory = try temporaryDirectory("mcast-interop")
        defer { try? FileManager.default.removeItem(at: directory) }
        func stats(_ host: String) -> String { directory.appendingPathComponent("\(host).json").path }
        let fromFFmpeg = try segment.spawn("r1", [binary, "recv", "--listen", "239.1.2.5:5004", "--frames", "90",
                                                  "--duration", "60", "--quiet", "--stats", stats("r1")])
        let fromGStreamer = try segment.spawn("r2", [binary, "recv", "--listen", "239.1.2.6:5004", "--frames", "90",
                                                     "--duration", "60", "--quiet", "--stats", stats("r2")])
        try segment.waitUntilBound("r1", port: 5004, ipv6: false)
        try segment.waitUntilBound("r2", port: 5004, ipv6: false)
        let ffmpegSent = try segment.exec("snd", [
            ffmpeg, "-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30",
            "-frames:v", "90", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error:keyint=30",
            "-f", "rtp", "rtp://239.1.2.5:5004?ttl=1"])
        #expect(ffmpegSent.status == 0, "ffmpeg: \(ffmpegSent.stderr)")
        var gstSender = gstreamerH265Sender(frames: 90, port: 5004)
        gstSender.removeLast(3)  // host=127.0.0.1 port= sync= of its udpsink
        let gstSent = try segment.exec("snd", [gst] + gstSender + ["host=239.1.2.6", "port=5004", "auto-multicast=true", "sync=true"])
        #expect(gstSent.status == 0, "gst-launch: \(gstSent.stderr)")
        for (host, receiver) in [("r1", fromFFmpeg), ("r2", fromGStreamer)] {
            #expect(waitForExit(receiver, seconds: 30) == 0, "\(host)")
            let received = try readJSON(URL(fileURLWithPath: stats(host)))
            #expect(intField(received, "frames.complete") == 90, "\(host)")
            #expect(intField(received, "frames.incomplete") == 0, "\(host)")
            #expect(intField(received, "packets.lost") == 0, "\(host)")
        }
    }
}
