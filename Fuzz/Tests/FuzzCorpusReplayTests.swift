import Foundation
import Testing

/// Every fuzz target's oracle (Fuzz/Oracles/<target>-oracle.swift), by target name: the checks that
/// tools/fuzz runs under libFuzzer.
let fuzzOracles: [String: @Sendable (UnsafeRawBufferPointer) -> Void] = [
    "annexb": fuzzAnnexB,
    "rtcp": fuzzRTCP,
    "rtp-depacketizer": fuzzRTPDepacketizer,
    "rtsp": fuzzRTSP,
    "sdp": fuzzSDP,
    "sequence": fuzzSequence,
    "srtp": fuzzSRTP,
    "y4m": fuzzY4M,
]

/// One file of the committed corpus: Tests/FuzzCorpus/<target>/<name>.
struct CorpusEntry: Sendable, CustomTestStringConvertible {
    var target: String
    var name: String
    var testDescription: String { "\(target)/\(name)" }
}

/// The repository's root (this file is Fuzz/Tests/FuzzCorpusReplayTests.swift).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The names in `directory` (relative to the repository), sorted; hidden files left out.
func listing(_ directory: String) -> [String] {
    let path = repositoryRoot.appendingPathComponent(directory).path
    return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
}

/// Replays what the fuzzer found and what seeds it: a crash or a broken invariant found once
/// stays found, because `swift test` runs every corpus entry through the same oracle code as
/// tools/fuzz (not a copy of it).
@Suite struct FuzzCorpusReplayTests {
    static let entries: [CorpusEntry] = listing("Tests/FuzzCorpus").flatMap { target in
        listing("Tests/FuzzCorpus/\(target)").map { CorpusEntry(target: target, name: $0) }
    }

    /// Each fuzz target has an oracle here and a non-empty corpus, and each corpus directory
    /// belongs to a target: a new target or corpus cannot be left out of the replay.
    @Test func everyTargetHasAnOracleAndACorpus() {
        let targets = listing("Fuzz/Targets").filter { $0.hasSuffix(".swift") }.map { String($0.dropLast(6)) }
        #expect(!targets.isEmpty)
        #expect(Set(targets) == Set(fuzzOracles.keys), "Fuzz/Targets \(targets), oracles \(fuzzOracles.keys.sorted())")
        #expect(Set(listing("Tests/FuzzCorpus")) == Set(targets), "corpus directories \(listing("Tests/FuzzCorpus"))")
        for target in targets {
            #expect(!listing("Tests/FuzzCorpus/\(target)").isEmpty, "Tests/FuzzCorpus/\(target) is empty")
        }
        #expect(Self.entries.count >= 40, "\(Self.entries.count) corpus entries")
    }

    /// One corpus entry through its target's oracle: every invariant holds.
    @Test(arguments: entries)
    func corpusEntryPassesItsOracle(_ entry: CorpusEntry) throws {
        let oracle = try #require(fuzzOracles[entry.target], "no oracle for \(entry.target)")
        let url = repositoryRoot.appendingPathComponent("Tests/FuzzCorpus/\(entry.target)/\(entry.name)")
        let bytes = try Data(contentsOf: url)
        bytes.withUnsafeBytes { oracle($0) }
    }
}
