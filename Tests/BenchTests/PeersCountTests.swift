import Foundation
import Testing

/// `bench-floor count`, the floor receiver, and its `--engine-loop` form (the engine's receive
/// loop counting and nothing else), each fed by `bench-floor send` over loopback: both count
/// every datagram, byte and RTP sequence number sent, GSO runs split back into datagrams.
@Suite struct PeersCountTests {
    /// The `bench-floor` executable beside the bench binary the tests run.
    static func floorBinary() -> URL? {
        BenchSmokeTests.benchBinary().map { $0.deletingLastPathComponent().appendingPathComponent("bench-floor") }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0.path) ? $0 : nil }
    }

    /// 30 frames of RTP datagrams in the floor sender's record format (per frame a UInt32 byte
    /// count, a UInt32 datagram count, the UInt16 sizes, the datagrams): each frame 3 – 7
    /// datagrams of 1,200 bytes (one GSO run) and a short last one; sequence numbers from
    /// 65,500, so the count crosses their wrap. Returns the datagrams and bytes written.
    static func writeRecords(to path: String) throws -> (packets: Int, bytes: Int) {
        var out = [UInt8](), sequence: UInt16 = 65_500, packets = 0, bytes = 0
        func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        func big<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        for frame in 0..<30 {
            let sizes = Array(repeating: 1200, count: 3 + frame % 5) + [300 + frame]
            var body = [UInt8]()
            for (index, size) in sizes.enumerated() {
                let marker: UInt8 = index == sizes.count - 1 ? 0x80 : 0
                var datagram = [0x80, marker | 96] + big(sequence) + big(UInt32(frame * 3000)) + [0x50, 0x45, 0x45, 0x52]
                datagram += (datagram.count..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ frame) }
                body += datagram
                sequence &+= 1
            }
            out += little(UInt32(body.count)) + little(UInt32(sizes.count)) + sizes.flatMap { little(UInt16($0)) } + body
            packets += sizes.count
            bytes += body.count
        }
        try Data(out).write(to: URL(fileURLWithPath: path))
        return (packets, bytes)
    }

    @Test(arguments: [[String](), ["--engine-loop", "8"]])
    func countsEveryDatagramTheFloorSenderSent(_ mode: [String]) throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("peers-count-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let records = directory.appendingPathComponent("t.rtp").path
        let (packets, bytes) = try Self.writeRecords(to: records)
        // Above the kernel's ephemeral ports (32768 – 60999) and the 20000 – 59999 that
        // nextPortPair (Tests/StreamerTests/CommandLineTests.swift) hands the tests running beside
        // this one in the same process.
        let port = Int.random(in: 61_000..<65_000)

        let counterOutput = directory.appendingPathComponent("count")
        _ = FileManager.default.createFile(atPath: counterOutput.path, contents: nil)
        let counter = Process()
        counter.executableURL = binary
        counter.arguments = ["count", "\(port)", "\(packets)"] + mode
        counter.standardOutput = try FileHandle(forWritingTo: counterOutput)
        try counter.run()
        defer { if counter.isRunning { counter.terminate() } }
        // It says "ready" once its socket is bound (and, with the engine loop, the ring made).
        let deadline = Date().addingTimeInterval(20)
        var ready = false
        while !ready && counter.isRunning && Date() < deadline {
            ready = ((try? String(contentsOf: counterOutput, encoding: .utf8)) ?? "").hasPrefix("ready")
            if !ready { Thread.sleep(forTimeInterval: 0.02) }
        }
        try #require(ready, "the counter never said ready")
        let sender = try BenchRun.output(binary, ["send", records, "\(port)", "240"])
        #expect(sender.status == 0, "floor sender: \(sender.stderr)")
        counter.waitUntilExit()
        #expect(counter.terminationStatus == 0)
        let lines = try String(contentsOf: counterOutput, encoding: .utf8).split(separator: "\n")
        let fields = Dictionary(uniqueKeysWithValues: (lines.last ?? "").split(separator: " ").compactMap { field in
            let parts = field.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        })
        #expect(fields["packets"] == "\(packets)", "\(lines)")
        #expect(fields["bytes"] == "\(bytes)", "\(lines)")
        #expect(fields["span"] == "\(packets)", "\(lines)")
        // From the first wake-up with datagrams to the last (how many there were is the scheduler's).
        let duration = try #require(fields["duration"].flatMap(Int64.init), "\(lines)")
        #expect(duration >= 0, "\(lines)")
    }

    @Test(arguments: [["1"], ["1", "2", "--engine-loop"], ["1", "2", "--engine-loop", "0"], ["1", "2", "--loop", "8"],
                      ["70000", "2"], ["1", "-2"]])
    func badArgumentsAreAUsageError(_ arguments: [String]) throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let run = try BenchRun.output(binary, ["count"] + arguments)
        #expect(run.status == 2)
        #expect(run.stderr == "usage: bench-floor count PORT EXPECTED [--engine-loop BUFFERS]\n", "\(run.stderr)")
        #expect(run.stdout.isEmpty, "\(run.stdout)")
    }

    @Test(arguments: [["send", "f"], ["send", "f", "70000", "240"], ["send", "f", "5000", "-1"], [], ["peers-count", "1", "2"]])
    func badFloorArgumentsAreAUsageError(_ arguments: [String]) throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let run = try BenchRun.output(binary, arguments)
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("usage: bench-floor "), "\(run.stderr)")
        #expect(!run.stderr.dropLast().contains("\n"), "one line: \(run.stderr)")
    }

    /// A floor sender that cannot open its records says so in one line and exits 1.
    @Test func aMissingRecordsFileIsOneLine() throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let run = try BenchRun.output(binary, ["send", "/nonexistent/records.rtp", "5000", "240"])
        #expect(run.status == 1)
        #expect(run.stderr == "bench-floor send: cannot open /nonexistent/records.rtp: No such file or directory\n", "\(run.stderr)")
    }

    /// The floor links no Foundation, so a floor process pays the Swift runtime's start-up and
    /// not Foundation's (results/profile.md section 36): no `libFoundation*.so` dependency and
    /// no mangled Foundation name in its bytes, while liburing, which it links, is there.
    @Test func theFloorLinksNoFoundation() throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let bytes = try Data(contentsOf: binary)
        #expect(bytes.range(of: Data("liburing.so".utf8)) != nil)
        for name in ["libFoundation", "10Foundation", "20FoundationEssentials", "FoundationInternationalization"] {
            #expect(bytes.range(of: Data(name.utf8)) == nil, "\(name)")
        }
    }
}
