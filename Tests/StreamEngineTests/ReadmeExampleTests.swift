import Foundation
import MediaSources
import StreamEngine
import Testing
import UringIO

/// The README's library example, compiled and run here. `readmeExampleMatchesThisCode`
/// keeps the README's text and this code the same.
func readmeExample() throws -> (sent: Int, complete: Int) {
    // README example begin
    let receiver = try MediaReceiver(config: MediaReceiverConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!))
    let received = DispatchSemaphore(value: 0)
    Thread {
        try? receiver.run(frameLimit: 60) { unit in
            _ = unit.annexB  // the frame in Annex B form; unit.isComplete says whether every packet came
        }
        received.signal()
    }.start()

    var config = MediaSenderConfig(destination: receiver.localAddress)
    config.serviceClass = .video  // DSCP AF41
    config.ecn = .ect0
    config.paceBitsPerSecond = 6_000_000
    let sender = try MediaSender(config: config)
    let encoder = try X265Encoder(EncoderConfig(width: 640, height: 360, bitrateKbps: 2000))
    let pattern = SyntheticSource(width: 640, height: 360)
    for index in 0..<60 {
        if let unit = try encoder.encode(pattern.frame(at: index)) { sender.send(unit) }
    }
    sender.finish()
    try sender.run()  // drives the ring on this thread until everything is on the wire
    received.wait()
    print(sender.stats.packetsSent, "packets sent,", receiver.stats.framesComplete, "frames complete")
    // README example end
    return (sender.stats.packetsSent, receiver.stats.framesComplete)
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ReadmeExampleTests {
    @Test func readmeExampleRuns() throws {
        let result = try readmeExample()
        #expect(result.complete == 60)
        #expect(result.sent > 60)
    }

    @Test func readmeExampleMatchesThisCode() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        func trimmed(_ lines: some Sequence<Substring>) -> [String] {
            lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let sourceLines = source.split(separator: "\n", omittingEmptySubsequences: false)
        let begin = try #require(sourceLines.firstIndex { $0.contains("// README example begin") })
        let end = try #require(sourceLines.firstIndex { $0.contains("// README example end") })
        let code = trimmed(sourceLines[(begin + 1)..<end])
        let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let example = try #require(blocks.first { $0.contains("MediaSender(") })
        let readmeCode = trimmed(example.split(separator: "\n").filter { !$0.hasPrefix("import ") })
        #expect(readmeCode == code)
    }
}
