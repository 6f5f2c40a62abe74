import Foundation
import Testing
@testable import streamer

/// `streamer` links no Foundation (its start-up relocations and pages: results/profile.md
/// section 35); what it used Foundation for is done by hand and done the same way.
@Suite struct WithoutFoundationTests {
    /// No Foundation library is loaded or linked in: neither a dynamic dependency
    /// (`libFoundation*.so`) nor a Foundation symbol (mangled names of the modules `Foundation`
    /// and `FoundationEssentials`) is in the executable's bytes, while liburing, which it does
    /// link, is.
    @Test(.enabled(if: streamerBinary() != nil, "the streamer executable is not built"))
    func theExecutableLinksNoFoundation() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try #require(streamerBinary())))
        #expect(bytes.range(of: Data("liburing.so".utf8)) != nil)
        for name in ["libFoundation", "10Foundation", "20FoundationEssentials", "FoundationInternationalization"] {
            #expect(bytes.range(of: Data(name.utf8)) == nil, "\(name)")
        }
    }

    /// Each flow's SDP file: the first at the path, the others `-N` before the extension of the
    /// last path component (what `URL.deletingPathExtension` gave).
    @Test func eachFlowsSDPFileIsNamedBesideTheFirst() {
        #expect(sdpFilePath("x.sdp", flow: 0) == "x.sdp")
        #expect(sdpFilePath("x.sdp", flow: 1) == "x-1.sdp")
        #expect(sdpFilePath("/tmp/a.b/stream.sdp", flow: 12) == "/tmp/a.b/stream-12.sdp")
        #expect(sdpFilePath("out/stream", flow: 2) == "out/stream-2")
        #expect(sdpFilePath("dir.d/stream", flow: 2) == "dir.d/stream-2")
        #expect(sdpFilePath(".hidden", flow: 1) == ".hidden-1")
        #expect(sdpFilePath("a.tar.sdp", flow: 3) == "a.tar-3.sdp")
        for path in ["x.sdp", "/tmp/a.b/stream.sdp", "a.tar.sdp"] {
            let url = URL(fileURLWithPath: path)
            #expect(sdpFilePath(path, flow: 4).hasSuffix("\(url.deletingPathExtension().lastPathComponent)-4.\(url.pathExtension)"))
        }
    }

    /// The progress and stall lines' numbers: what `String(format: "%.Nf")` wrote.
    @Test func fixedPointIsPrintfs() {
        for value in [0.0, -0.0, 0.125, 0.375, 2.675, 12.345, -0.05, 0.95, 99.995, 1e20, 123_456.789, -7.25, 1e-9] {
            for decimals in [1, 2] {
                #expect(fixedPoint(value, decimals: decimals) == String(format: "%.\(decimals)f", value), "\(value)")
            }
        }
        #expect(fixedPoint(.greatestFiniteMagnitude, decimals: 2) == String(format: "%.2f", Double.greatestFiniteMagnitude))
    }
}
