import Foundation
import Testing

/// Runs the built `bench encoder-rate` on a small picture and checks its report: the schedule's
/// targets in order, every change made live, and only the periodic keyframes. No rate figures
/// are asserted here (BitrateChangeTests in MediaSourcesTests assert on sizes).
@Suite struct EncoderRateBenchTests {
    @Test func smallScheduleReportsEveryChangeLiveAndOnlyPeriodicKeyframes() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let (status, text, _) = try BenchRun.output(binary, ["encoder-rate", "--size", "320x180", "--schedule", "800,200,500",
                                                             "--segment", "2", "--keyint", "25"])
        #expect(status == 0)
        let rows = text.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| target") }
        #expect(rows.map { $0.split(separator: "|")[0].trimmingCharacters(in: .whitespaces) } == ["800", "200", "500"])
        // 180 frames, a keyframe every 25: frames 0, 25, ..., 175.
        #expect(text.contains("Keyframes: 8 (periodic: 8)"), "\(text)")
        #expect(text.contains("Rate changes: 2 requested, 2 applied live, 0 fallbacks"), "\(text)")
    }

    @Test func badOptionsGiveOneLineAndExitStatus2() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let (status, _, text) = try BenchRun.output(binary, ["encoder-rate", "--schedule", "800,zero"])
        #expect(status == 2)
        #expect(text == "bench encoder-rate: --schedule zero: expected a whole number in 1...800000\n")
    }
}
