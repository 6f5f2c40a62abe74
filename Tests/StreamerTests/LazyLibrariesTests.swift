import Foundation
import Testing

/// libx265 and libsrtp2 are loaded when a stream encodes or encrypts, not at every start
/// (Sources/CX265/shim.h, Sources/CSRTP/shim.h; results/profile.md section 36): the dynamic
/// loader's own account (`LD_DEBUG=files`, which names every library it maps and why) of a
/// process that needs neither and of one that needs both.
@Suite struct LazyLibrariesTests {
    /// Runs the streamer with `LD_DEBUG=files`; its exit status and stderr (the loader's lines
    /// and the streamer's own).
    static func runTracingLibraries(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(streamerBinary()))
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["LD_DEBUG": "files"]) { $1 }
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr, as: UTF8.self))
    }

    @Test(.enabled(if: streamerBinary() != nil, "the streamer executable is not built"))
    func aProcessThatNeedsNeitherLoadsNeither() throws {
        let run = try Self.runTracingLibraries(["--version"])
        #expect(run.status == 0)
        #expect(run.stderr.contains("file=liburing.so.2 [0];  needed by"), "\(run.stderr.prefix(2000))")
        for library in ["libx265", "libsrtp2", "libnss3", "libnuma"] {
            #expect(!run.stderr.contains("file=\(library)"), "\(library) loaded: \(run.stderr.prefix(2000))")
        }
    }

    @Test(.enabled(if: streamerBinary() != nil, "the streamer executable is not built"))
    func encodingAndEncryptingLoadBothWhenUsed() throws {
        let port = nextPortPair()
        let run = try Self.runTracingLibraries(["send", "--to", "127.0.0.1:\(port)", "--frames", "2", "--size", "160x96",
                                                "--srtp", "--no-feedback", "--quiet"])
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        #expect(run.stderr.contains("streamer send: 2 frames"), "\(run.stderr.suffix(2000))")
        let lines = run.stderr.split(separator: "\n")
        for library in ["libx265.so.", "libsrtp2.so."] {
            let mentions = lines.filter { $0.contains("file=\(library)") }
            #expect(mentions.contains { $0.contains("dynamically loaded by") }, "\(library): \(run.stderr.prefix(2000))")
            #expect(!mentions.contains { $0.contains("needed by") }, "\(library) linked: \(mentions)")
        }
    }
}
