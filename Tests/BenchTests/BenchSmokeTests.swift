import Foundation
import Testing

/// Runs the built `bench --quick` and checks, from its bench.json, that every path
/// (the media path `stream` and the paced rounds included) delivered every datagram
/// intact. Never asserts on speed or pacing accuracy.
@Suite struct BenchSmokeTests {
    /// The bench binary beside the test bundle (`.build/<config>/bench`), or `BENCH_BINARY`.
    static func benchBinary() -> URL? {
        var candidates: [URL] = []
        if let override = ProcessInfo.processInfo.environment["BENCH_BINARY"] {
            candidates.append(URL(fileURLWithPath: override))
        }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("bench"))
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/bench"))
        candidates.append(root.appendingPathComponent(".build/release/bench"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    static var uringAvailable: Bool {
        (try? String(contentsOfFile: "/proc/sys/kernel/io_uring_disabled", encoding: .utf8))
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "0" } ?? true
    }

    @Test(.enabled(if: uringAvailable, "io_uring is disabled here"))
    func quickRunDeliversEverythingIntact() throws {
        let binary = try #require(Self.benchBinary(), "bench binary not found; run swift build --product bench")
        let (status, json) = try BenchRun.report(binary, ["--quick"], file: "bench.json")
        let runs = try #require(json["runs"] as? [[String: Any]])
        #expect(!runs.isEmpty)
        let paths = Set(runs.compactMap { $0["path"] as? String })
        #expect(paths.isSuperset(of: ["sendto", "sendmmsg", "uring", "uring-gso", "uring-gso-zc", "uring-linked",
                                      "stream"]))
        let stream = runs.filter { $0["path"] as? String == "stream" }
        #expect(!stream.isEmpty, "no stream run")
        for run in stream {
            // Compared with raw uring-gso at the same size, in the same rounds.
            #expect(run["ratioToUringGSO"] as? Double != nil, "stream without a ratio to uring-gso")
            #expect(run["datagramSize"] as? Int == 1472)
        }
        for run in runs {
            let name = "\(run["path"] ?? "?") -> \((run["receiver"] as? [String: Any])?["path"] ?? "?")"
            let sent = run["sent"] as? Int
            let delivered = run["delivered"] as? Int
            #expect(sent != nil && sent! > 0, "\(name): nothing sent")
            #expect(sent == delivered, "\(name): sent \(sent ?? -1), delivered \(delivered ?? -1)")
            #expect(run["intact"] as? Bool == true, "\(name): not intact")
        }
        let pacing = try #require(json["pacing"] as? [[String: Any]])
        #expect(pacing.count == 3, "pacing rounds at 10 Mbit/s, 100 Mbit/s and 1 Gbit/s")
        for row in pacing {
            let rate = row["rateBitsPerSecond"] as? Double ?? -1
            let sent = row["sent"] as? Int
            #expect(sent != nil && sent! > 0 && sent == row["delivered"] as? Int, "pacing at \(rate): not all delivered")
            #expect(row["intact"] as? Bool == true, "pacing at \(rate): not intact or without timestamps")
            #expect((row["achievedBitsPerSecond"] as? Double ?? 0) > 0, "pacing at \(rate): no achieved rate")
        }
        #expect(status == 0, "bench exited with \(status)")
    }
}
