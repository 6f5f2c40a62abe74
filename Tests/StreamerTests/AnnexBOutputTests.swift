import Foundation
import Glibc
import MediaFormats
import Testing
@testable import streamer

/// `streamer recv --out`'s writer: what reaches the file is each access unit's Annex B form,
/// wherever its largest NAL unit (the one written from its own storage) stands.
@Suite struct AnnexBOutputTests {
    @Test func theFileHoldsEachAccessUnitInAnnexBForm() throws {
        func nal(_ type: UInt8, _ size: Int, _ fill: UInt8) -> [UInt8] { [type << 1, 1] + Array(repeating: fill, count: size) }
        let units: [[[UInt8]]] = [
            [nal(32, 20, 1), nal(33, 40, 2), nal(34, 8, 3), nal(19, 5000, 4)],  // largest last
            [nal(1, 3000, 5)],                                                  // one NAL unit
            [nal(1, 4000, 6), nal(39, 10, 7)],                                  // largest first
            [nal(1, 900, 8), nal(1, 2500, 9), nal(1, 1200, 10)],                // largest between
            [nal(1, 700, 11), nal(1, 700, 12)],                                 // two of one size
        ]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("annexb-\(UUID().uuidString)").path
        defer { unlink(path) }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        var output = AnnexBOutput(descriptor: descriptor)
        for nalUnits in units { output.write(nalUnits) }
        close(descriptor)
        #expect(output.failure == 0)
        let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let expected = units.flatMap { AccessUnit(nalUnits: $0, timestamp: 0, isKeyframe: false).annexB }
        #expect(written == expected)
    }
}
