import Foundation
import Glibc
import MediaFormats
import SecureRTP
import StreamEngine
import Synchronization
import Testing
import TestSupport
import UringIO

let ffmpegPath = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// A started process with its stderr collected.
final class RunningProcess: @unchecked Sendable {  // @unchecked: Process is used from the test's thread only
    let process = Process()
    private let errorPipe = Pipe()

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = errorPipe
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Waits for exit up to `seconds` (then terminates it); returns the status and stderr.
    func finish(within seconds: Double) -> (status: Int32, stderr: String) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let text = String(decoding: errorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, text)
    }
}

/// A free UDP port on loopback (bound, read, released).
func freeUDPPort() throws -> UInt16 {
    let socket = try UDPSocket(family: .ipv4)
    try socket.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
    return try socket.localAddress().port
}


/// ffmpeg's per-frame MD5s of decoding `input` (one line per decoded frame).
func decodedFrameHashes(_ arguments: [String], ffmpeg: String) throws -> [String] {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("framemd5-\(UUID().uuidString).txt")
    defer { try? FileManager.default.removeItem(at: output) }
    let run = try RunningProcess(ffmpeg, ["-v", "error", "-nostdin"] + arguments + ["-f", "framemd5", "-y", output.path])
    let result = run.finish(within: 60)
    #expect(result.status == 0, "ffmpeg: \(result.stderr)")
    #expect(result.stderr.isEmpty, "ffmpeg reported: \(result.stderr)")
    let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    // framemd5 lines: stream, dts, pts, duration, size, hash. Keep size and hash: the picture.
    return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
        line.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
    }
}

@Suite(.enabled(if: uringAvailable && ffmpegPath != nil, "needs io_uring and ffmpeg (tools/setup installs it)"))
struct FFmpegInteropTests {
    /// ffmpeg opens our SDP and decodes every frame we send, picture for picture the same as
    /// decoding the encoder's own output.
    @Test func ffmpegDecodesOurStream() throws {
        let ffmpeg = try #require(ffmpegPath)
        // A live RTP stream has no end: ffmpeg outputs a frame once later data pushes it through
        // its pipeline, so 10 more frames are sent than are compared.
        let frameCount = 90
        let units = try encodeSynthetic(count: frameCount + 10, width: 320, height: 240, bitrateKbps: 800)
        let run = try sendToFFmpegReadingSDP(units, frameCount: frameCount, ffmpeg: ffmpeg,
                                             // rtcp_to_source: ffmpeg's receiver reports go where the sender's reports come from.
                                             options: ["-sdp_flags", "rtcp_to_source"])
        guard let (sender, overRTP, direct) = run else { return }
        #expect(sender.stats.framesSent == units.count)
        // ffmpeg 5.1's RTP input builds receiver reports but cannot send them (its RTP handle is
        // read-only: `-v trace` shows "result from ffurl_write: -5"), so none arrive; the sender
        // notices and runs without the bound instead of starving the stream.
        #expect(sender.stats.feedbackReports == 0)
        #expect(sender.stats.packetsConfirmed == 0)
        // Nothing is known lost either: every packet is one no receiver will confirm.
        #expect(sender.stats.feedbackAbsent)
        #expect(sender.stats.packetsLost == 0 && sender.stats.packetsUnconfirmed == 0)
        // ffmpeg exits once it has its frames, while the 10 extra ones may still be on their
        // way: a send into its closed port then fails (ECONNREFUSED), and that packet is
        // abandoned too, never sent.
        #expect(sender.stats.packetsAbandoned == sender.stats.packetsSent + sender.stats.packetsFailed, "\(sender.stats)")
        #expect(direct.count == frameCount)
        #expect(overRTP.count == frameCount)
        #expect(overRTP == direct)
    }

    /// ffmpeg sends RTP H.265 (its own packetizer); `MediaReceiver` rebuilds a stream that
    /// ffmpeg decodes to the same number of frames, with no decode error.
    @Test func ourReceiverTakesFFmpegsStream() throws {
        let ffmpeg = try #require(ffmpegPath)
        let frameCount = 50
        let (stats, frames) = try receiveFromFFmpeg(frameCount: frameCount, ffmpeg: ffmpeg,
                                                    config: MediaReceiverConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!))
        #expect(stats.framesComplete == frameCount)
        #expect(stats.framesIncomplete == 0)
        #expect(stats.lost == 0)
        #expect(frames.count == frameCount)
    }
}

/// Sends `units` (10 more than `frameCount`: a live stream has no end, and ffmpeg outputs a
/// frame once later data pushes it through) through a `MediaSender` (MTU 1280, 8 Mbit/s, no
/// bound; `srtp` on when given) to ffmpeg reading our SDP of the stream (with `srtp`: RTP/SAVP
/// and a=crypto); the sender finishes once ffmpeg has exited. Returns the sender, ffmpeg's
/// frame hashes of what it received and of decoding the units directly; nil (recorded) when
/// ffmpeg did not start.
func sendToFFmpegReadingSDP(_ units: [AccessUnit], frameCount: Int, ffmpeg: String, options: [String] = [],
                            srtp: SRTPMasterKey? = nil) throws
    -> (sender: MediaSender, overRTP: [String], direct: [String])?
{
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("interop-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let original = directory.appendingPathComponent("original.hevc")
    try Data(units.flatMap(\.annexB)).write(to: original)

    let port = try freeUDPPort()
    let sdp = SDPSessionDescription.hevc(
        parameterSets: units[0].parameterSets, sessionID: 1, sessionVersion: 1, sessionName: "interop",
        originAddress: "127.0.0.1", connectionAddress: "127.0.0.1", port: port, frameRate: (30, 1),
        crypto: srtp.map { SDPCrypto(suite: $0.suite.rawValue, inlineKey: $0.inlineBase64) })
    let sdpFile = directory.appendingPathComponent("stream.sdp")
    try sdp.text.write(to: sdpFile, atomically: true, encoding: .utf8)

    let output = directory.appendingPathComponent("framemd5.txt")
    let receiver = try RunningProcess(ffmpeg, [
        "-v", "error", "-nostdin", "-protocol_whitelist", "file,udp,rtp,srtp", "-reorder_queue_size", "0",
    ] + options + [
        "-threads", "1", "-i", sdpFile.path, "-frames:v", "\(frameCount)", "-f", "framemd5", "-y", output.path,
    ])
    do { try waitUntilBound(port: port) } catch {
        let result = receiver.finish(within: 0)
        Issue.record("ffmpeg did not open port \(port): status \(result.status), \(result.stderr)")
        return nil
    }
    var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: port)!)
    config.mtu = .fixed(1280)
    config.paceBitsPerSecond = 8_000_000
    config.maxQueuedFrames = units.count
    config.noFeedbackTimeout = .zero  // ffmpeg sends no RTCP: no bound from the start
    config.srtp = srtp
    let sender = try MediaSender(config: config)
    for unit in units { sender.send(unit) }
    // The stream's end (its RTCP BYE) waits until ffmpeg has its frames: ffmpeg ends its input
    // at a BYE (libavformat/rtsp.c), and its RTCP socket is read beside the media one, so on a
    // starved machine a BYE sent after the last packet overtook media still queued for it (seen
    // under load: 39 – 65 of 90 frames, the last one cut short, status 0).
    let running = DispatchSemaphore(value: 0)
    let failure = Mutex<(any Error)?>(nil)
    Thread {
        do { try sender.run() } catch { failure.withLock { $0 = error } }
        running.signal()
    }.start()
    let result = receiver.finish(within: 30)
    sender.finish()
    running.wait()
    if let error = failure.withLock({ $0 }) { throw error }
    #expect(result.status == 0, "ffmpeg: \(result.stderr)")
    #expect(result.stderr.isEmpty, "ffmpeg reported errors: \(result.stderr)")
    let overRTP = ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n")
        .filter { !$0.hasPrefix("#") }
        .map { $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",") }
    let direct = try decodedFrameHashes(["-i", original.path, "-frames:v", "\(frameCount)"], ffmpeg: ffmpeg)
    return (sender, overRTP, direct)
}

/// ffmpeg encodes `frameCount` frames of its test source with libx265 and sends them as RTP
/// (`output`: its RTP output options, `protocol` the URL's scheme) to a `MediaReceiver` with
/// `config` (its address's port 0: any free one). Returns the receiver's stats and ffmpeg's
/// frame hashes of decoding the complete frames it rebuilt.
func receiveFromFFmpeg(frameCount: Int, ffmpeg: String, config: MediaReceiverConfig, output: [String] = [],
                       protocol scheme: String = "rtp") throws -> (stats: ReceiverStats, frames: [String]) {
    let receiver = try MediaReceiver(config: config)
    let written = Mutex<[UInt8]>([])
    let done = DispatchSemaphore(value: 0)
    Thread {
        try? receiver.run(frameLimit: frameCount) { unit in
            if unit.isComplete { written.withLock { $0 += unit.annexB } }
        }
        done.signal()
    }.start()
    let sending = try RunningProcess(ffmpeg, [
        "-v", "error", "-nostdin", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-frames:v", "\(frameCount)",
        "-c:v", "libx265", "-x265-params", "log-level=none", "-f", "rtp",
    ] + output + ["\(scheme)://127.0.0.1:\(receiver.localAddress.port)"])
    let sent = sending.finish(within: 60)
    #expect(sent.status == 0, "ffmpeg: \(sent.stderr)")
    if done.wait(timeout: .now() + 10) == .timedOut { receiver.stop(); done.wait() }
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("from-ffmpeg-\(UUID().uuidString).hevc")
    defer { try? FileManager.default.removeItem(at: file) }
    try Data(written.withLock { $0 }).write(to: file)
    return (receiver.stats, try decodedFrameHashes(["-i", file.path], ffmpeg: ffmpeg))
}
