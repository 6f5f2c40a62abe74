import Testing
import TestSupport
@testable import MediaFormats

/// `AnnexB.nextStartCode(in:from:)` (two word-wise stages, then byte by byte) against the
/// plain byte-by-byte search, on buffers where its shortcuts could go wrong.
@Suite struct AnnexBStartCodeScanTests {
    /// The first `00 00 01` at or after `from`, byte by byte.
    static func referenceStartCode(in bytes: [UInt8], from: Int) -> Int? {
        var index = max(from, 0)
        while index + 3 <= bytes.count {
            if bytes[index] == 0 && bytes[index + 1] == 0 && bytes[index + 2] == 1 { return index }
            index += 1
        }
        return nil
    }

    /// Every start code the scan finds from `0`, then from each found one + 3, and the scan from
    /// every position, match the reference.
    static func expectMatchesReference(_ bytes: [UInt8], _ note: String) {
        for from in 0...bytes.count {
            let found = AnnexB.nextStartCode(in: bytes, from: from)
            let expected = referenceStartCode(in: bytes, from: from)
            guard found == expected else {
                Issue.record("\(note): from \(from) of \(bytes.count) found \(String(describing: found)), expected \(String(describing: expected))")
                return
            }
        }
    }

    /// Random coded-looking bytes (no `00` pairs) with a start code planted at every offset of
    /// a 32-byte step and of an 8-byte word, including the last positions of a buffer (its
    /// "chunk end": `00 00 01` in the last three bytes, or cut after `00` or `00 00`).
    @Test func plantedStartCodesAtEveryAlignmentAndAtTheEnd() {
        var rng = SplitMix64(seed: 15)
        for length in [3, 4, 33, 34, 35, 40, 64, 65, 66, 67, 97, 130] {
            for position in 0..<length {
                var bytes = (0..<length).map { _ in UInt8.random(in: 1...255, using: &rng) }
                for (offset, value) in [UInt8(0), 0, 1].enumerated() where position + offset < length {
                    bytes[position + offset] = value
                }
                Self.expectMatchesReference(bytes, "length \(length), start code at \(position)")
            }
        }
    }

    /// Near misses the first stage lets through and the second must reject: `00 00 03`
    /// (emulation prevention), `00 00 00`, `00 00 02`, a lone `00` at a word's last byte, a
    /// `00 00` cut by a word boundary; each at every offset of a 64-byte buffer, alone and
    /// followed by a real start code later.
    @Test func nearMissesAtEveryOffset() {
        var rng = SplitMix64(seed: 16)
        let misses: [[UInt8]] = [[0, 0, 3], [0, 0, 0], [0, 0, 2], [0, 0xFF], [0, 0, 0xFF], [0, 1, 0, 0, 1]]
        for miss in misses {
            for position in 0..<64 {
                for plantsStartCodeAfter in [false, true] {
                    var bytes = (0..<100).map { _ in UInt8.random(in: 1...255, using: &rng) }
                    for (offset, value) in miss.enumerated() where position + offset < bytes.count {
                        bytes[position + offset] = value
                    }
                    if plantsStartCodeAfter { bytes[90...92] = [0, 0, 1] }
                    Self.expectMatchesReference(bytes, "\(miss) at \(position), start code after: \(plantsStartCodeAfter)")
                }
            }
        }
    }

    /// Random buffers dense in `00`, `01`, `03` (so that words of every mix occur) and random
    /// start codes.
    @Test func randomBuffersDenseInZerosAndOnes() {
        var rng = SplitMix64(seed: 17)
        for _ in 0..<400 {
            let length = Int.random(in: 0...200, using: &rng)
            let bytes = (0..<length).map { _ -> UInt8 in
                switch Int.random(in: 0..<8, using: &rng) {
                case 0, 1, 2: 0
                case 3: 1
                case 4: 3
                default: UInt8.random(in: 0...255, using: &rng)
                }
            }
            Self.expectMatchesReference(bytes, "random \(bytes)")
        }
    }
}
