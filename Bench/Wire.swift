/// The bench datagram: a 16-byte header, a filler, and the sequence number again in
/// the last 4 bytes, so the receiver can tell which round and datagram it holds, and
/// that its length and both ends are intact, without reading every byte.
///
///     0  magic "BNCH"   4  round id   8  sequence   12  length   ...   length-4  sequence
enum BenchDatagram {
    /// The smallest datagram the header and trailer fit.
    static let minimumSize = 20
    static let magic: UInt32 = 0x4843_4E42  // "BNCH" little-endian

    /// Writes the header and trailer of datagram `sequence` (the filler is left as it is).
    @inline(__always)
    static func stamp(_ buffer: UnsafeMutableRawBufferPointer, round: UInt32, sequence: UInt32) {
        let base = buffer.baseAddress!
        base.storeBytes(of: magic.littleEndian, as: UInt32.self)
        (base + 4).storeBytes(of: round.littleEndian, as: UInt32.self)
        (base + 8).storeBytes(of: sequence.littleEndian, as: UInt32.self)
        (base + 12).storeBytes(of: UInt32(buffer.count).littleEndian, as: UInt32.self)
        (base + buffer.count - 4).storeBytes(of: sequence.littleEndian, as: UInt32.self)
    }

    /// What a received datagram says about itself.
    enum Verdict {
        case valid(round: UInt32, sequence: UInt32)
        case corrupt
    }

    /// Checks magic, stated length against the real length, and both copies of the sequence.
    @inline(__always)
    static func check(_ payload: UnsafeRawBufferPointer) -> Verdict {
        guard payload.count >= minimumSize, let base = payload.baseAddress else { return .corrupt }
        let magicRead = UInt32(littleEndian: base.loadUnaligned(as: UInt32.self))
        let round = UInt32(littleEndian: (base + 4).loadUnaligned(as: UInt32.self))
        let sequence = UInt32(littleEndian: (base + 8).loadUnaligned(as: UInt32.self))
        let length = UInt32(littleEndian: (base + 12).loadUnaligned(as: UInt32.self))
        let trailer = UInt32(littleEndian: (base + payload.count - 4).loadUnaligned(as: UInt32.self))
        guard magicRead == magic, length == UInt32(payload.count), trailer == sequence else { return .corrupt }
        return .valid(round: round, sequence: sequence)
    }
}

/// What the receiver tallies in one round: every datagram checked against the round id,
/// its sequence number (each exactly once) and its length.
struct RoundTally {
    let round: UInt32
    let expected: Int
    let size: Int
    private(set) var seen: [UInt64]
    /// Distinct datagrams of this round, intact.
    private(set) var delivered = 0
    /// Payload bytes of those.
    private(set) var bytes = 0
    /// Datagrams whose header, length or trailer were wrong.
    private(set) var corrupt = 0
    /// Datagrams of this round seen twice.
    private(set) var duplicates = 0
    /// Datagrams of another round (late leftovers).
    private(set) var stale = 0
    /// Receive-side datagrams counted (all of the above).
    private(set) var received = 0

    init(round: UInt32, expected: Int, size: Int) {
        self.round = round
        self.expected = expected
        self.size = size
        seen = Array(repeating: 0, count: (expected + 63) / 64)
    }

    @inline(__always)
    mutating func record(_ payload: UnsafeRawBufferPointer) {
        received += 1
        switch BenchDatagram.check(payload) {
        case .corrupt:
            corrupt += 1
        case .valid(let datagramRound, let sequence):
            guard datagramRound == round else { stale += 1; return }
            let index = Int(sequence)
            guard index < expected, payload.count == size else { corrupt += 1; return }
            let bit: UInt64 = 1 << UInt64(index & 63)
            if seen[index >> 6] & bit != 0 { duplicates += 1; return }
            seen[index >> 6] |= bit
            delivered += 1
            bytes += payload.count
        }
    }

    var isComplete: Bool { delivered >= expected }
}
