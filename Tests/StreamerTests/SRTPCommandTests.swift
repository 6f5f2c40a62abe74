import Foundation
import Glibc
import Testing
import TestSupport

/// A fresh random 30-byte key and salt: its base64 text and its hex digits.
private func randomKey() -> (base64: String, hex: String) {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<30).map { _ in UInt8.random(in: 0...255, using: &generator) }
    return (Data(bytes).base64EncodedString(), bytes.map { String(format: "%02x", $0) }.joined())
}

/// Writes `text` to a new file in `directory` with `mode`.
private func writeFile(_ directory: URL, _ name: String, _ text: String, mode: mode_t) throws -> String {
    let path = directory.appendingPathComponent(name).path
    try text.write(toFile: path, atomically: false, encoding: .utf8)
    chmod(path, mode)
    return path
}

/// `streamer send` / `recv` with SRTP: keys from files only their owner reads, or from an SDP;
/// never a byte of a key in any output, stats or SDP permission slip.
@Suite struct SRTPCommandTests {
    /// Keys refused: on the command line, in a file others can read, of the wrong length, of an
    /// unknown suite. One line, exit 2, and the key's text nowhere in it.
    @Test func badKeysExitTwoWithOneLineWithoutTheKey() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("srtp-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = randomKey()
        let open = try writeFile(directory, "open.key", key.base64 + "\n", mode: 0o644)
        let short = try writeFile(directory, "short.key", String(key.base64.prefix(20)), mode: 0o600)
        let cases: [([String], String)] = [
            (["send", "--to", "127.0.0.1:5004", "--srtp-key", key.base64], "@FILE"),
            (["send", "--to", "127.0.0.1:5004", "--srtp-key", "@" + open], "chmod 600"),
            (["recv", "--listen", "5004", "--srtp-key", "@" + open], "chmod 600"),
            (["recv", "--listen", "5004", "--srtp-key", "@" + short], "SRTP key"),
            (["send", "--to", "127.0.0.1:5004", "--srtp", "--srtp-suite", "ROT13"], "--srtp-suite"),
            (["send", "--rtsp", "8554", "--srtp"], "--rtsp"),
            (["recv", "--listen", "5004", "--srtp"], "--srtp-key"),
            (["recv", "--listen", "5004", "--srtp-key", "@" + directory.appendingPathComponent("none").path], "cannot read"),
        ]
        for (arguments, mentions) in cases {
            let outcome = try run(binary, arguments)
            #expect(outcome.status == 2, "\(arguments): \(outcome.stderr)")
            #expect(outcome.stderrLines.count == 1 && outcome.stderr.contains(mentions), "\(arguments): \(outcome.stderr)")
            #expect(!outcome.stderr.contains(key.base64.prefix(16)) && !outcome.stderr.contains(key.hex.prefix(16)))
        }
    }

    /// `send --srtp-key @FILE --sdp` to `recv --srtp-key @FILE`, then to `recv --sdp FILE`:
    /// every frame arrives and decodes, the feedback authenticates, the SDP says RTP/SAVP with
    /// the key and is readable by its owner only, and the key is in no output or stats file.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"), arguments: ["--srtp-key", "--sdp"])
    func sendAndReceiveWithSRTP(receiverKeyOption: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("srtp-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = randomKey()
        let keyFile = try writeFile(directory, "stream.key", key.base64 + "\n", mode: 0o600)
        let port = Int(nextPortPair())
        let receiverSDP = try writeFile(directory, "in.sdp", """
            v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=video \(port) RTP/SAVP 96\r
            a=rtpmap:96 H265/90000\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(key.base64)\r\n
            """, mode: 0o600)
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "45", "--out", path("x.hevc"),
                              "--stats", path("recv.json"), "--stats-every", "0.05",
                              receiverKeyOption, receiverKeyOption == "--sdp" ? receiverSDP : "@" + keyFile]
        let receiverErrors = Pipe()
        receiver.standardError = receiverErrors
        receiver.standardOutput = receiverErrors
        try receiver.run()
        try waitUntilBound(port: UInt16(port))
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", "45", "--size", "320x240",
                                    "--srtp-key", "@" + keyFile, "--stats", path("send.json"), "--sdp", path("out.sdp")])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 0)
        let receiverOutput = String(decoding: receiverErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)

        func object(_ name: String) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path(name)))) as? [String: Any])
        }
        let send = try object("send.json")
        let recv = try object("recv.json")
        let sendSRTP = try #require(send["srtp"] as? [String: Any])
        let recvSRTP = try #require(recv["srtp"] as? [String: Any])
        let packetsSent = (send["packets"] as? [String: Any])?["sent"] as? Int
        #expect((recv["frames"] as? [String: Any])?["complete"] as? Int == 45)
        #expect((recv["packets"] as? [String: Any])?["received"] as? Int == packetsSent)
        #expect((send["packets"] as? [String: Any])?["confirmed"] as? Int == packetsSent)
        #expect(sendSRTP["suite"] as? String == "AES_CM_128_HMAC_SHA1_80")
        #expect((sendSRTP["protected"] as? [String: Any])?["rtp"] as? Int == packetsSent)
        #expect((recvSRTP["unprotected"] as? [String: Any])?["rtp"] as? Int == packetsSent)
        for reason in ["authFailed", "replayed", "malformed", "tooManySources", "failed", "sourcesReplaced"] {
            #expect(sendSRTP[reason] as? Int == 0 && recvSRTP[reason] as? Int == 0, "\(reason)")
        }
        let sdp = try String(contentsOfFile: path("out.sdp"), encoding: .utf8)
        #expect(sdp.contains("RTP/SAVPF 96 97") && sdp.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(key.base64)"))
        var status = stat()
        #expect(stat(path("out.sdp"), &status) == 0 && status.st_mode & 0o777 == 0o600)
        if let probe = try probeDecodedFrames(path("x.hevc")) { #expect(probe.frames == 45) }
        // The key, in base64 or hex, in nothing the programs wrote but the SDP.
        let written = [sent.stdout, sent.stderr, receiverOutput,
                       try String(contentsOfFile: path("send.json"), encoding: .utf8),
                       try String(contentsOfFile: path("recv.json"), encoding: .utf8)]
        for text in written {
            #expect(!text.contains(key.base64.prefix(12)) && !text.lowercased().contains(key.hex.prefix(12)))
        }
    }
}

/// SRTP with GStreamer's srtpenc (gstreamer1.0-plugins-bad, libsrtp2 too).
@Suite(.enabled(if: uringEnabled && gstLaunch != nil, "needs io_uring and gst-launch-1.0 (tools/setup installs it)"))
struct SRTPGStreamerTests {
    /// What each test starts from: the built streamer, gst-launch, a fresh directory (the
    /// caller removes it) and a random key, in base64 in a file there only we may read.
    private func setUp(_ name: String) throws
        -> (binary: String, gst: String, directory: URL, key: (base64: String, hex: String), keyFile: String) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let gst = try #require(gstLaunch)
        let directory = try temporaryDirectory(name)
        let key = randomKey()
        let keyFile = try writeFile(directory, "stream.key", key.base64, mode: 0o600)
        return (binary, gst, directory, key, keyFile)
    }

    /// GStreamer encodes, packetizes and protects (srtpenc, the key as 60 hex digits);
    /// `streamer recv --srtp-key` with the same key in base64 rebuilds every frame.
    @Test func gstreamerSendsSRTPAndWeReceive() throws {
        let (binary, gst, directory, key, keyFile) = try setUp("gst-srtp")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let receiver = try startReceiver(binary, port: port, frames: 60, seconds: 30, directory: directory, name: "recv",
                                         extra: ["--srtp-key", "@" + keyFile])
        defer { if receiver.isRunning { receiver.terminate() } }
        let sent = try run(gst, gstreamerH265Sender(frames: 60, port: port, between: ["srtpenc", "key=\(key.hex)"]))
        #expect(sent.status == 0, "gst-launch: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 0)
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        #expect(intField(recv, "frames.complete") == 60, "\(recv)")
        #expect(intField(recv, "packets.lost") == 0)
        #expect(intField(recv, "srtp.unprotected.rtp") == intField(recv, "packets.received"))
        #expect(intField(recv, "srtp.authFailed") == 0 && intField(recv, "srtp.replayed") == 0)
        if let probe = try probeDecodedFrames(directory.appendingPathComponent("recv.hevc").path) {
            #expect(probe.frames == 60)
        }
    }

    /// `streamer send --srtp-key` to GStreamer's srtpdec (the key as 60 hex digits in its caps,
    /// with the stream's SSRC: srtpdec needs it before the first packet, and ours is random, so
    /// the test catches the stream on a socket of its own first and hands it on unchanged).
    /// GStreamer authenticates, decrypts and depacketizes it: ffprobe decodes what it wrote.
    @Test func gstreamerReceivesOurSRTP() throws {
        let (binary, gst, directory, key, keyFile) = try setUp("gst-srtp-recv")
        defer { try? FileManager.default.removeItem(at: directory) }
        let catchPort = nextPortPair()
        let catcher = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(catcher) }
        var address = loopbackIPv4(port: catchPort)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(catcher, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0)
        // The whole stream, however long the sender takes to start (x265 opens first; a loaded
        // machine): read until the sender has exited and a read then finds nothing (loopback
        // delivers within the send, so everything it sent is queued by then); RTCP (types
        // 192-223) left out. A sender still running after two minutes is stopped.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(catcher, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: binary)
        sender.arguments = ["send", "--to", "127.0.0.1:\(catchPort)", "--frames", "60", "--size", "320x240",
                            "--srtp-key", "@" + keyFile, "--no-feedback", "--quiet"]
        try sender.run()
        let deadline = Date().addingTimeInterval(120)
        var packets: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let exited = !sender.isRunning
            let length = buffer.withUnsafeMutableBytes { recv(catcher, $0.baseAddress, $0.count, 0) }
            if length > 0 {
                if !(192...223).contains(buffer[1]) { packets.append(Array(buffer[0..<length])) }
            } else if exited || Date() > deadline {
                break
            }
        }
        if sender.isRunning { sender.terminate() }
        #expect(waitForExit(sender, seconds: 10) == 0)
        try #require(packets.count > 100)
        let ssrc = UInt32(packets[0][8]) << 24 | UInt32(packets[0][9]) << 16 | UInt32(packets[0][10]) << 8 | UInt32(packets[0][11])
        let caps = "application/x-srtp,media=video,clock-rate=90000,encoding-name=H265,payload=96,ssrc=(uint)\(ssrc),"
            + "srtp-key=(buffer)\(key.hex),srtp-cipher=aes-128-icm,srtp-auth=hmac-sha1-80,"
            + "srtcp-cipher=aes-128-icm,srtcp-auth=hmac-sha1-80"
        let gstPort = nextPortPair()
        let output = directory.appendingPathComponent("gst.hevc").path
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: gst)
        // identity ends the stream (EOS) at its 50th access unit, so gst-launch exits by itself.
        receiver.arguments = ["-q", "udpsrc", "port=\(gstPort)", "caps=\(caps)", "!", "srtpdec", "!", "rtph265depay",
                              "!", "h265parse", "!", "video/x-h265,stream-format=byte-stream,alignment=au",
                              "!", "identity", "eos-after=50", "!", "filesink", "location=\(output)"]
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        defer { if receiver.isRunning { receiver.terminate() } }
        try waitUntilBound(port: gstPort)
        var destination = loopbackIPv4(port: gstPort)
        for packet in packets {
            _ = packet.withUnsafeBytes { bytes in
                withUnsafePointer(to: &destination) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(catcher, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            usleep(500)  // a stream's pace, not a burst into gst's socket buffer
        }
        #expect(waitForExit(receiver, seconds: 20) == 0)
        if let probe = try probeDecodedFrames(output) {
            // identity passes the access units before the one it ends on (49 seen here).
            #expect((48...50).contains(probe.frames), "GStreamer wrote \(probe.frames) decodable frames")
        }
    }
}
