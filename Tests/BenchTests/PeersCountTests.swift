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
        var sequence: UInt16 = 65_500
        let frames = (0..<30).map { frame in
            let sizes = Array(repeating: 1200, count: 3 + frame % 5) + [300 + frame]
            return sizes.enumerated().map { index, size in
                let marker: UInt8 = index == sizes.count - 1 ? 0x80 : 0
                var datagram = [0x80, marker | 96] + big(sequence) + big(UInt32(frame * 3000)) + [0x50, 0x45, 0x45, 0x52]
                datagram += (datagram.count..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ frame) }
                sequence &+= 1
                return datagram
            }
        }
        try writeRecordFile(frames, to: path)
        return (frames.joined().count, frames.joined().reduce(0) { $0 + $1.count })
    }

    static func big<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    /// Writes each frame's datagrams as the floor sender's records.
    static func writeRecordFile(_ frames: [[[UInt8]]], to path: String) throws {
        func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        var out = [UInt8]()
        for datagrams in frames {
            out += little(UInt32(datagrams.reduce(0) { $0 + $1.count })) + little(UInt32(datagrams.count))
            out += datagrams.flatMap { little(UInt16($0.count)) } + datagrams.joined()
        }
        try Data(out).write(to: URL(fileURLWithPath: path))
    }

    /// Runs `bench-floor count` with `options` on a free port, feeds it `records` with
    /// `bench-floor send` at 240 frames per second, and returns the fields of its last line.
    static func count(records: String, expecting packets: Int, options: [String], in directory: URL) throws -> [String: String] {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        // Above the kernel's ephemeral ports (32768 – 60999) and the 20000 – 59999 that
        // nextPortPair (Tests/StreamerTests/CommandLineTests.swift) hands the tests running beside
        // this one in the same process.
        let port = Int.random(in: 61_000..<65_000)
        let counterOutput = directory.appendingPathComponent("count")
        _ = FileManager.default.createFile(atPath: counterOutput.path, contents: nil)
        let counter = Process()
        counter.executableURL = binary
        counter.arguments = ["count", "\(port)", "\(packets)"] + options
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
        return Dictionary(uniqueKeysWithValues: (lines.last ?? "").split(separator: " ").compactMap { field in
            let parts = field.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        })
    }

    /// Runs `body` with a new temporary directory, removed when `body` returns.
    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("peers-count-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    @Test(arguments: [[String](), ["--engine-loop", "8"]])
    func countsEveryDatagramTheFloorSenderSent(_ mode: [String]) throws {
        try Self.withDirectory { directory in
            let records = directory.appendingPathComponent("t.rtp").path
            let (packets, bytes) = try Self.writeRecords(to: records)
            let fields = try Self.count(records: records, expecting: packets, options: mode, in: directory)
            #expect(fields["packets"] == "\(packets)", "\(fields)")
            #expect(fields["bytes"] == "\(bytes)", "\(fields)")
            #expect(fields["span"] == "\(packets)", "\(fields)")
            // From the first wake-up with datagrams to the last (how many there were is the scheduler's).
            let duration = try #require(fields["duration"].flatMap(Int64.init), "\(fields)")
            #expect(duration >= 0, "\(fields)")
            #expect(fields["frames"] == nil, "only with --rebuild: \(fields)")
        }
    }

    /// `--rebuild` rebuilds RFC 7798 frames: 20 frames, each an aggregation packet of two NAL
    /// units, one NAL unit in a packet of its own, and a NAL unit of 3,000 – 3,019 bytes in
    /// fragments of at most 1,000 (its header rebuilt from the fragments'), ended by the marker
    /// bit; and one packet of RTP version 0 (skipped, counted malformed). Every frame and every
    /// Annex B byte (a 4-byte start code before each NAL unit) is counted, with and without the
    /// engine's receive loop.
    @Test(arguments: [["--rebuild"], ["--engine-loop", "8", "--rebuild"]])
    func rebuildsEveryFrame(_ mode: [String]) throws {
        var sequence: UInt16 = 65_530, annexBBytes = 0
        func packet(_ payload: [UInt8], frame: Int, marker: Bool = false, version: UInt8 = 2) -> [UInt8] {
            defer { sequence &+= 1 }
            return [version << 6, (marker ? 0x80 : 0) | 96] + Self.big(sequence) + Self.big(UInt32(frame * 3000))
                + [1, 2, 3, 4] + payload
        }
        func nalUnit(type: UInt8, size: Int, frame: Int) -> [UInt8] {
            annexBBytes += 4 + size
            return [type << 1, 1] + (2..<size).map { UInt8(truncatingIfNeeded: $0 &+ frame) }
        }
        let frames = (0..<20).map { frame in
            let parameters = [nalUnit(type: 32, size: 24, frame: frame), nalUnit(type: 33, size: 40, frame: frame)]
            var datagrams = [packet([48 << 1, 1] + parameters.flatMap { Self.big(UInt16($0.count)) + $0 }, frame: frame)]
            if frame == 3 { datagrams.append(packet([2, 1, 9, 9], frame: frame, version: 0)) }
            datagrams.append(packet(nalUnit(type: 39, size: 20, frame: frame), frame: frame))
            let slice = nalUnit(type: 1, size: 3000 + frame, frame: frame)
            let body = Array(slice[2...])
            for start in stride(from: 0, to: body.count, by: 1000) {
                let first: UInt8 = start == 0 ? 0x80 : 0, last: UInt8 = start + 1000 >= body.count ? 0x40 : 0
                let fragment = [49 << 1 | (slice[0] & 0x81), slice[1], first | last | 1] + body[start..<min(start + 1000, body.count)]
                datagrams.append(packet(fragment, frame: frame, marker: last != 0))
            }
            return datagrams
        }
        try Self.withDirectory { directory in
            let records = directory.appendingPathComponent("h.rtp").path
            try Self.writeRecordFile(frames, to: records)
            let packets = frames.joined().count
            let fields = try Self.count(records: records, expecting: packets, options: mode, in: directory)
            #expect(fields["packets"] == "\(packets)", "\(fields)")
            #expect(fields["frames"] == "20", "\(fields)")
            #expect(fields["frameBytes"] == "\(annexBBytes)", "\(fields)")
            #expect(fields["malformed"] == "1", "\(fields)")
        }
    }

    @Test(arguments: [["1"], ["1", "2", "--engine-loop"], ["1", "2", "--engine-loop", "0"], ["1", "2", "--loop", "8"],
                      ["70000", "2"], ["1", "-2"], ["1", "2", "--rebuild", "--rebuild"],
                      ["1", "2", "--engine-loop", "8", "--engine-loop", "8"]])
    func badArgumentsAreAUsageError(_ arguments: [String]) throws {
        let binary = try #require(Self.floorBinary(), "bench-floor not found; run swift build --product bench-floor")
        let run = try BenchRun.output(binary, ["count"] + arguments)
        #expect(run.status == 2)
        #expect(run.stderr == "usage: bench-floor count PORT EXPECTED [--engine-loop BUFFERS] [--rebuild]\n", "\(run.stderr)")
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
