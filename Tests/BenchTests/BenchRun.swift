import Foundation
import Testing

/// Runs of the built `bench`, as the bench tests make them.
enum BenchRun {
    /// Runs `bench arguments --out DIR` (a fresh directory, removed after) with stdout discarded,
    /// and returns its exit status and the JSON object of the file `report` it wrote in DIR.
    static func report(_ binary: URL, _ arguments: [String], file report: String) throws
        -> (status: Int32, json: [String: Any]) {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments + ["--out", out.path]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let data = try Data(contentsOf: out.appendingPathComponent(report))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (process.terminationStatus, json)
    }

    /// Runs `bench arguments` and returns its exit status and what it wrote on stdout and on
    /// stderr (each through a file, so that neither can fill while the other is read).
    static func output(_ binary: URL, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = [directory.appendingPathComponent("stdout"), directory.appendingPathComponent("stderr")]
        for file in files { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: files[0])
        process.standardError = try FileHandle(forWritingTo: files[1])
        try process.run()
        process.waitUntilExit()
        let texts = try files.map { try String(contentsOf: $0, encoding: .utf8) }
        return (process.terminationStatus, texts[0], texts[1])
    }
}
