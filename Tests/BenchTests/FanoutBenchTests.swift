import Foundation
import Testing

/// Runs the built `bench fanout --quick` (1, 10 and 255 unicast flows from one engine; one
/// multicast group on lo heard by 1 and 8 sockets) and checks, from its fanout.json, that every
/// receiving socket counted every datagram its flow sent. Never asserts on CPU figures.
@Suite struct FanoutBenchTests {
    @Test func quickRunDeliversEveryDatagramToEveryReceiver() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let (status, json) = try BenchRun.report(binary, ["fanout", "--quick"], file: "fanout.json")
        #expect(status == 0, "bench fanout exited with \(status)")
        let cases = try #require(json["cases"] as? [[String: Any]])
        let ran = cases.map { "\($0["case"] ?? "?") \($0["receivers"] ?? "?")" }
        #expect(ran == ["unicast 1", "unicast 10", "unicast 255", "multicast 1", "multicast 8"], "\(ran)")
        for entry in cases {
            let name = "\(entry["case"] ?? "?") \(entry["receivers"] ?? "?")"
            let expected = entry["expectedPerReceiver"] as? Int ?? 0
            #expect(expected > 0, "\(name): nothing planned")
            // The least any receiving socket counted, per round: every datagram of its flow.
            let delivered = entry["deliveredMin"] as? [Int] ?? []
            #expect(!delivered.isEmpty && delivered.allSatisfy { $0 == expected }, "\(name): \(delivered) of \(expected)")
            #expect((entry["intact"] as? [Bool] ?? [false]).allSatisfy { $0 }, "\(name): not intact")
        }
    }
}
