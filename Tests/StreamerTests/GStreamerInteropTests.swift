import Foundation
import Glibc
import Testing
import TestSupport

let gstLaunch = ["/usr/bin/gst-launch-1.0"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// GStreamer 1.22 on both ends of our stream (tools/setup installs it).
@Suite(.enabled(if: uringEnabled && gstLaunch != nil, "needs io_uring and GStreamer (tools/setup installs it)"))
struct GStreamerInteropTests {
    /// GStreamer's rtpbin receives our stream and sends RFC 3550 receiver reports (every 2-6 s)
    /// from its RTCP port to ours: they confirm packets (nothing counted lost on loopback), the
    /// default bound makes room for two of its report intervals instead of stalling between
    /// them, no path-MTU probe goes to it, and what it wrote decodes.
    @Test func gstreamerReceivesAndItsReportsConfirm() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let gst = try #require(gstLaunch)
        let directory = try temporaryDirectory("gst-recv")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let senderPort = nextPortPair()
        let output = directory.appendingPathComponent("gst.hevc")
        let caps = "application/x-rtp,media=video,clock-rate=90000,encoding-name=H265,payload=96"
        let receiver = Process()
        // Children of the test process inherit its blocked signals; gst-launch must see SIGINT
        // to end the stream (-e) and close its file, so they are unblocked before it starts.
        receiver.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        // RTCP leaves from the port it arrives on (bind-port), the symmetric RTCP our sender's
        // connected feedback socket accepts.
        receiver.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                              gst, "-e", "rtpbin", "name=rb",
                              "udpsrc", "port=\(port)", "caps=\(caps)", "!", "rb.recv_rtp_sink_0",
                              "rb.", "!", "rtph265depay", "!", "h265parse", "!", "video/x-h265,stream-format=byte-stream",
                              "!", "filesink", "location=\(output.path)",
                              "udpsrc", "port=\(port + 1)", "reuse=true", "!", "rb.recv_rtcp_sink_0",
                              "rb.send_rtcp_src_0", "!", "udpsink", "host=127.0.0.1", "port=\(senderPort + 1)",
                              "bind-port=\(port + 1)", "sync=false", "async=false"]
        receiver.standardOutput = FileHandle.nullDevice
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        defer { if receiver.isRunning { receiver.terminate() } }
        try waitUntilBound(port: port)
        let stats = directory.appendingPathComponent("send.json")
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--local-port", "\(senderPort)", "--duration", "12",
                                    "--size", "320x240", "--bitrate", "2M", "--quiet", "--stats", stats.path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        kill(receiver.processIdentifier, SIGINT)  // -e: end of stream, the file is complete
        #expect(waitForExit(receiver, seconds: 10) == 0)

        let send = try readJSON(stats)
        let packets = intField(send, "packets.sent") ?? 0
        let confirmed = intField(send, "packets.confirmed") ?? 0
        print("gstreamer: rtt \(field(send, "rttMs.smoothed") ?? "-") ms; sent \(packets), confirmed \(confirmed), unconfirmed \(intField(send, "packets.unconfirmed") ?? -1), reports \(intField(send, "feedback.reports") ?? 0), interval \(field(send, "feedback.intervalMs") ?? "-") ms, bound \(intField(send, "bytes.maxUnconfirmed") ?? 0)")
        #expect((intField(send, "feedback.reports") ?? 0) >= 2)
        // RFC 3550 6.3.1: rtpbin's 5 s minimum interval is randomized over [0.5, 1.5] and
        // divided by e - 3/2, so every gap between its reports lies in 2.05...6.16 s, and so
        // does the sender's smoothed measure of them. (A CI run saw 2.90 s.)
        let interval = field(send, "feedback.intervalMs") as? Double ?? 0
        #expect(interval > 2000 && interval < 6500, "rtpbin's report interval \(interval) ms")
        #expect(intField(send, "packets.lost") == 0)
        // All but what went out after its last report: that one came at most 6.16 s before
        // the end of the 12 s run, so at least ~45 % of the packets are confirmed.
        #expect(Double(confirmed) >= 0.4 * Double(packets), "confirmed \(confirmed) of \(packets)")
        #expect(intField(send, "frames.droppedUnconfirmed") == 0)
        #expect(intField(send, "frames.sent") == 360)
        #expect(intField(send, "path.probes.sent") == 0)
        #expect(field(send, "receiverGone") as? Bool == false)
        // Congestion control (on by default for the synthetic source) starts the encoder at 1M, the
        // controller's start; rtpbin's first receiver report shows it sends no per-packet reports,
        // so the controller is never obeyed and the target goes to --bitrate, once.
        #expect(field(send, "cc.active") as? Bool == false)
        #expect(intField(send, "cc.targetBitrateBps") == 2_000_000 && intField(send, "cc.rateChanges") == 1,
                "target \(intField(send, "cc.targetBitrateBps") ?? -1), changes \(intField(send, "cc.rateChanges") ?? -1)")
        #expect(intField(send, "cc.encoderTargetBps") == 2_000_000)
        if let probe = try probeDecodedFrames(output.path) {
            #expect(probe.frames >= 355, "GStreamer wrote \(probe.frames) decodable frames of 360")
            #expect(probe.stderr.isEmpty, "ffprobe: \(probe.stderr)")
        }
    }

    /// GStreamer encodes (x265enc) and sends RTP (rtph265pay); `streamer recv` rebuilds every
    /// frame complete, loses nothing, and what it writes decodes frame for frame.
    @Test func gstreamerSendsAndWeReceive() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let gst = try #require(gstLaunch)
        let directory = try temporaryDirectory("gst-send")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let receiver = try startReceiver(binary, port: port, frames: 90, seconds: 30, directory: directory, name: "recv")
        defer { if receiver.isRunning { receiver.terminate() } }
        let sent = try run(gst, gstreamerH265Sender(frames: 90, port: port))
        #expect(sent.status == 0, "gst-launch: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 0)
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        #expect(intField(recv, "frames.complete") == 90, "\(recv)")
        #expect(intField(recv, "frames.incomplete") == 0)
        #expect(intField(recv, "packets.lost") == 0)
        #expect((recv["rejected"] as? [String: Int])?.isEmpty ?? true, "\(recv["rejected"] ?? "-")")
        if let probe = try probeDecodedFrames(directory.appendingPathComponent("recv.hevc").path) {
            #expect(probe.frames == 90)
            #expect(probe.stderr.isEmpty, "ffprobe: \(probe.stderr)")
        }
    }
}

/// gst-launch arguments: `frames` of videotestsrc at 320x240, 30 fps, x265enc, rtph265pay (PT 96,
/// parameter sets in band), then the element in `between` (its name and properties, e.g. srtpenc),
/// to 127.0.0.1:`port`.
func gstreamerH265Sender(frames: Int, port: UInt16, between: [String] = []) -> [String] {
    ["-q", "videotestsrc", "num-buffers=\(frames)", "!", "video/x-raw,width=320,height=240,framerate=30/1",
     "!", "x265enc", "tune=zerolatency", "speed-preset=ultrafast", "key-int-max=30",
     "!", "h265parse", "config-interval=-1", "!", "rtph265pay", "pt=96", "config-interval=-1"]
        + (between.isEmpty ? [] : ["!"] + between)
        + ["!", "udpsink", "host=127.0.0.1", "port=\(port)", "sync=true"]
}
