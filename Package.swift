// swift-tools-version:6.0
import PackageDescription

// Release builds of the executables carry the Swift runtime (and bench, Foundation) inside them
// (`-static-stdlib`, from the toolchain's lib/swift_static): a process starts without loading
// and relocating a dozen shared Swift libraries (results/profile.md section 21). The C libraries
// (glibc, liburing) stay shared, libx265 and libsrtp2 are loaded by their shims on first use
// (Sources/CX265/shim.h, Sources/CSRTP/shim.h); debug builds and the test bundles link the
// Swift libraries dynamically, as before.
let staticSwiftRuntimeInRelease: [LinkerSetting] = [
    .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release)),
]
// The same flag when compiling the executable's own module: the driver then imports the
// Swift modules of lib/swift_static, whose link entries name the static libraries that
// Foundation itself needs (_FoundationICU, CoreFoundation, ...).
let staticSwiftModulesInRelease: [SwiftSetting] = [
    .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "streamer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StreamEngine", targets: ["StreamEngine"]),
        .library(name: "MediaFormats", targets: ["MediaFormats"]),
        .library(name: "MediaSources", targets: ["MediaSources"]),
        .library(name: "UringIO", targets: ["UringIO"]),
        .executable(name: "streamer", targets: ["streamer"]),
        .executable(name: "bench", targets: ["bench"]),
        .executable(name: "bench-floor", targets: ["bench-floor"]),
    ],
    targets: [
        // C: liburing and libx265 (Debian's liburing-dev, libx265-dev). Shims only, no logic
        // besides loading libx265 on first use (dlopen: not linked, not loaded by a process that
        // does not encode).
        .systemLibrary(name: "CLibURing", path: "Sources/CLibURing"),
        .systemLibrary(name: "CX265", path: "Sources/CX265"),
        // libsrtp2 (Debian's libsrtp2-dev): SecureRTP alone imports it; loaded on first use likewise.
        .systemLibrary(name: "CSRTP", path: "Sources/CSRTP"),
        // glibc's <malloc.h> (mallopt): streamer sets the heap's trim and mmap thresholds.
        .systemLibrary(name: "CMalloc", path: "Sources/CMalloc"),

        // Pure wire formats: RTP/RTCP, HEVC NAL units, RFC 7798, Annex B, y4m, SDP. No I/O.
        .target(name: "MediaFormats"),
        // Linux I/O: the ring, UDP sockets and their options. Knows nothing of RTP or HEVC.
        .target(name: "UringIO", dependencies: ["CLibURing"]),
        // What produces access units: the x265 encoder, .hevc / y4m / stdin sources, the stall watch. No sockets
        // (UringIO for its clock and threads only).
        .target(name: "MediaSources", dependencies: ["MediaFormats", "UringIO", "CX265"]),
        // SRTP and SRTCP (RFC 3711) over libsrtp2: keys, suites, protect and unprotect. No I/O.
        .target(name: "SecureRTP", dependencies: ["MediaFormats", "CSRTP"]),
        // The engine: flows, pacer, sender, receiver, stats. Links no codec.
        .target(name: "StreamEngine", dependencies: ["MediaFormats", "UringIO", "SecureRTP"]),

        .executableTarget(name: "streamer", dependencies: ["StreamEngine", "MediaSources", "MediaFormats", "UringIO",
                                                           "SecureRTP", "CMalloc"],
                          swiftSettings: staticSwiftModulesInRelease, linkerSettings: staticSwiftRuntimeInRelease),
        .executableTarget(name: "bench", dependencies: ["StreamEngine", "MediaSources", "MediaFormats", "UringIO",
                                                        "SecureRTP"],
                          path: "Bench", exclude: ["Floor"], swiftSettings: staticSwiftModulesInRelease,
                          linkerSettings: staticSwiftRuntimeInRelease),
        // The floor sender and receiver of `bench peers`, without Foundation (Bench/Floor/main.swift).
        .executableTarget(name: "bench-floor", dependencies: ["StreamEngine", "UringIO"], path: "Bench/Floor",
                          swiftSettings: staticSwiftModulesInRelease, linkerSettings: staticSwiftRuntimeInRelease),

        // Helpers shared by the test targets (a seeded generator, network namespaces).
        // setns(2) comes from a shim of its own: CLibURing stays UringIO's alone.
        .systemLibrary(name: "CNetworkNamespace", path: "Tests/CNetworkNamespace"),
        .target(name: "TestSupport", dependencies: ["CNetworkNamespace"], path: "Tests/TestSupport"),
        .testTarget(name: "MediaFormatsTests", dependencies: ["MediaFormats", "TestSupport"]),
        .testTarget(name: "UringIOTests", dependencies: ["UringIO"]),
        .testTarget(name: "SecureRTPTests", dependencies: ["SecureRTP", "MediaFormats"]),
        .testTarget(name: "MediaSourcesTests", dependencies: ["MediaSources", "MediaFormats", "UringIO"]),
        .testTarget(name: "StreamerTests", dependencies: ["streamer", "TestSupport"]),
        .testTarget(name: "StreamEngineTests",
                    dependencies: ["StreamEngine", "MediaFormats", "MediaSources", "UringIO", "SecureRTP",
                                   "TestSupport"]),
        .testTarget(name: "BenchTests", dependencies: ["bench", "bench-floor"]),
        // The fuzz oracles (Fuzz/Oracles, also compiled by tools/fuzz) replayed on every
        // Tests/FuzzCorpus entry, and the regressions the fuzzer found.
        .testTarget(name: "FuzzCorpusTests", dependencies: ["MediaFormats", "SecureRTP"], path: "Fuzz",
                    exclude: ["Targets", "CorpusGenerator", "Support/FuzzCheck.swift"]),
    ],
    swiftLanguageModes: [.v6]
)
