import Foundation
import Glibc
import Testing
import TestSupport

/// A source that stops delivering for a while: `streamer send --source -` reads y4m from a pipe
/// that this test stops writing to mid-stream.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"))
struct SourceStallTests {
    static let width = 320
    static let height = 240

    /// One y4m frame: a pattern that moves with `index` (so x265 has something to encode).
    static func frame(_ index: Int) -> Data {
        var bytes = [UInt8]("FRAME\n".utf8)
        let luma = width * height
        bytes.reserveCapacity(bytes.count + luma * 3 / 2)
        for y in 0..<height {
            for x in 0..<width { bytes.append(UInt8(truncatingIfNeeded: x + y + index * 4)) }
        }
        bytes.append(contentsOf: repeatElement(UInt8(128), count: luma / 2))
        return Data(bytes)
    }

    /// 60 frames, a pause of `pause` seconds, 60 more frames, end of input. The sender counts
    /// one stall of about the pause, says so once when it starts and once when it ends, never
    /// declares the receiver gone, and every frame reaches the receiver intact: the RTP
    /// timestamps continue from the frame index (no gap, so no missing frames and no
    /// `timestampJump` rejection even after a pause longer than the receiver's 10 s window).
    @Test(arguments: [3.0, 11.0])
    func stalledStdinSourceIsCountedOnceAndTheStreamRecovers(pause: Double) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("stall")
        defer { try? FileManager.default.removeItem(at: directory) }
        signal(SIGPIPE, SIG_IGN)  // a sender that dies must fail the write, not kill the tests
        let port = nextPortPair()
        let framesBefore = 60
        let framesAfter = 60
        let recvStats = directory.appendingPathComponent("recv.json")
        let sendStats = directory.appendingPathComponent("send.json")
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "\(framesBefore + framesAfter)",
                              "--duration", "\(Int(pause) + 30)", "--quiet", "--stats", recvStats.path]
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        try waitUntilBound(port: port)
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: binary)
        sender.arguments = ["send", "--to", "127.0.0.1:\(port)", "--source", "-", "--bitrate", "1M", "--quiet",
                            "--stats", sendStats.path]
        let input = Pipe()
        let senderErrors = Pipe()
        sender.standardInput = input
        sender.standardError = senderErrors
        try sender.run()

        let writer = input.fileHandleForWriting
        try writer.write(contentsOf: Data("YUV4MPEG2 W\(Self.width) H\(Self.height) F30:1 Ip A1:1 C420jpeg\n".utf8))
        for index in 0..<framesBefore { try writer.write(contentsOf: Self.frame(index)) }
        Thread.sleep(forTimeInterval: pause)
        let resumedAt = Date()
        for index in framesBefore..<(framesBefore + framesAfter) { try writer.write(contentsOf: Self.frame(index)) }
        // The pipe holds about one frame: writing took as long as sending at 30 fps did.
        let afterStall = Date().timeIntervalSince(resumedAt)
        try writer.close()

        #expect(waitForExit(sender, seconds: 20) == 0)
        #expect(waitForExit(receiver, seconds: 20) == 0)
        let messages = String(decoding: senderErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let lines = messages.split(separator: "\n")
        // Each stall is said once when it starts and once when it ends. The pause is one of
        // them; a loaded machine can add short ones of its own (a writer or encoder late by more
        // than the 0.5 s threshold), each said and counted the same way, never as long as the pause.
        let stalledLines = lines.filter { $0.contains("source stalled") }.count
        let resumedAfter = lines.filter { $0.contains("source resumed after") }.compactMap { line in
            line.split(separator: " ").dropFirst(5).first.flatMap { Double($0) }
        }
        #expect(stalledLines == resumedAfter.count && stalledLines >= 1, "stderr: \(messages)")
        #expect(resumedAfter.filter { $0 >= pause - 0.5 }.count == 1, "stderr: \(messages)")

        let send = try readJSON(sendStats)
        let recv = try readJSON(recvStats)
        #expect(intField(send, "source.stalls") == resumedAfter.count)
        #expect(field(send, "source.stalled") as? Bool == false)
        let stalledMs = try #require(intField(send, "source.stalledMs"))
        let others = Int(resumedAfter.filter { $0 < pause - 0.5 }.reduce(0, +) * 1000)
        #expect(stalledMs >= Int(pause * 1000) - 500 && stalledMs < Int(pause * 1000) + 3000 + others,
                "stalledMs \(stalledMs)")
        #expect(intField(send, "receiverGoneEvents") == 0)
        // No burst to catch up on the frames the stall missed: the 60 frames after it go at 30 fps.
        #expect(afterStall > 1.5, "60 frames went in \(afterStall) s after the stall")
        #expect(intField(send, "frames.sent") == framesBefore + framesAfter)
        #expect(intField(recv, "frames.complete") == intField(send, "frames.sent"))
        #expect(intField(recv, "frames.incomplete") == 0)
        #expect(intField(recv, "frames.missing") == 0)
        #expect(intField(recv, "frames.undecodable") == 0)
        #expect((field(recv, "rejected") as? [String: Int])?["timestampJump"] == nil, "recv: \(recv)")
        print("source stall of \(pause) s: sender \(field(send, "source") ?? "-"), 60 frames after it in \(afterStall) s, stderr \(lines.filter { $0.contains("source") })")
    }
}
