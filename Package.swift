// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "streamer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StreamEngine", targets: ["StreamEngine"]),
        .library(name: "MediaFormats", targets: ["MediaFormats"]),
        .library(name: "UringIO", targets: ["UringIO"]),
        .executable(name: "streamer", targets: ["streamer"]),
        .executable(name: "bench", targets: ["bench"]),
    ],
    targets: [
        // C: liburing and libx265 (Debian's liburing-dev, libx265-dev). Shims only, no logic.
        .systemLibrary(name: "CLibURing", path: "Sources/CLibURing"),
        .systemLibrary(name: "CX265", path: "Sources/CX265"),

        // Pure wire formats: RTP/RTCP, HEVC NAL units, RFC 7798, Annex B, y4m, SDP. No I/O.
        .target(name: "MediaFormats"),
        // Linux I/O: the ring, UDP sockets and their options. Knows nothing of RTP or HEVC.
        .target(name: "UringIO", dependencies: ["CLibURing"]),
        // The engine: flows, pacer, encoder, sender, receiver, stats.
        .target(name: "StreamEngine", dependencies: ["MediaFormats", "UringIO", "CX265"]),

        .executableTarget(name: "streamer", dependencies: ["StreamEngine"]),
        .executableTarget(name: "bench", dependencies: ["StreamEngine", "UringIO"], path: "Bench"),

        // Helpers shared by the test targets (a seeded generator).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "MediaFormatsTests", dependencies: ["MediaFormats", "TestSupport"]),
        .testTarget(name: "UringIOTests", dependencies: ["UringIO"]),
        .testTarget(name: "StreamerTests", dependencies: ["streamer", "TestSupport"]),
        .testTarget(name: "StreamEngineTests", dependencies: ["StreamEngine", "MediaFormats", "UringIO", "TestSupport"]),
        .testTarget(name: "BenchTests", dependencies: ["bench"]),
        // The fuzz oracles (Fuzz/Oracles, also compiled by tools/fuzz) replayed on every
        // Tests/FuzzCorpus entry, and the regressions the fuzzer found.
        .testTarget(name: "FuzzCorpusTests", dependencies: ["MediaFormats"], path: "Fuzz",
                    exclude: ["Targets", "CorpusGenerator", "Support/FuzzCheck.swift"]),
    ],
    swiftLanguageModes: [.v6]
)
