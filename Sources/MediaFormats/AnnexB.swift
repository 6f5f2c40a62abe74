/// Annex B byte streams (H.265 annex B): NAL units behind `00 00 01` or `00 00 00 01` start codes.
public enum AnnexB {
    /// Splits a whole Annex B buffer into its NAL units, without start codes.
    ///
    /// Zero bytes just before a start code (the leading zero of a four-byte start code,
    /// trailing_zero_8bits) belong to the start code, not to the NAL unit before it.
    /// Bytes before the first start code and empty NAL units are skipped.
    public static func nalUnits(in bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var result: [ArraySlice<UInt8>] = []
        var nalStart: Int? = nil
        var index = 0
        while let startCode = nextStartCode(in: bytes, from: index) {
            if let start = nalStart {
                let end = trimmedEnd(of: bytes, from: start, to: startCode)
                if end > start { result.append(bytes[start..<end]) }
            }
            nalStart = startCode + 3
            index = startCode + 3
        }
        if let start = nalStart {
            let end = trimmedEnd(of: bytes, from: start, to: bytes.count)
            if end > start { result.append(bytes[start..<end]) }
        }
        return result
    }

    /// Index of the next `00 00 01` at or after `from`, or nil.
    static func nextStartCode(in bytes: [UInt8], from: Int) -> Int? {
        bytes.withUnsafeBytes { nextStartCode(in: $0, from: from) }
    }

    /// Index of the next `00 00 01` at or after `from`, or nil.
    ///
    /// Tests 32 possible start positions per step, in two stages. The first loads each of the
    /// four words once: `w | (w >> 8)` has a zero byte at `k` when bytes `k` and `k + 1` of `w`
    /// are both zero (`k < 7`), or when byte 7 is zero (a zero is shifted in above it). A start
    /// code beginning at `p` in the step has `bytes[p] == bytes[p + 1] == 0`: if `p` is byte
    /// `k < 7` of its word, that word's `w | (w >> 8)` is zero at `k`; if `k == 7`, at 7. So a
    /// step whose four words show no such zero byte holds no start code, and is passed after
    /// one load per word. Coded slice data has `00 00` only before an emulation prevention byte
    /// (`00 00 03`) or in a rare zero byte at byte 7, so the second stage runs seldom: for eight
    /// positions `i` at once, the byte-wise OR of the words at `i` and `i + 1` and of the word
    /// at `i + 2` XOR `01...01` has a zero byte exactly where `00 00 01` begins. Only a step
    /// that passes both goes byte by byte, and it holds a start code. (Looking for `01` bytes
    /// alone stopped at about one word in 32 of coded slice data, at each byte of value 1:
    /// twice the CPU time on a 720p stream; results/profile.md.)
    static func nextStartCode(in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        let highBits: UInt64 = 0x8080_8080_8080_8080
        let count = bytes.count
        var index = max(from, 0)  // where a start code may begin
        while index + 34 <= count {
            let pairs = zeroPairCandidates(bytes, index) | zeroPairCandidates(bytes, index + 8)
                | zeroPairCandidates(bytes, index + 16) | zeroPairCandidates(bytes, index + 24)
            if pairs & highBits != 0 {
                let zeros = startCodeCandidates(bytes, index) | startCodeCandidates(bytes, index + 8)
                    | startCodeCandidates(bytes, index + 16) | startCodeCandidates(bytes, index + 24)
                if zeros & highBits != 0 { break }
            }
            index += 32
        }
        while index + 3 <= count {
            if bytes[index + 2] == 1 && bytes[index + 1] == 0 && bytes[index] == 0 { return index }
            index += 1
        }
        return nil
    }

    /// Non-zero in its high bits when one of the eight positions `at...at + 7` may begin
    /// `00 00`: when two neighbouring bytes of `at..<at + 8` are zero, or the last one is
    /// (reads `at..<at + 8`; see `nextStartCode(in:from:)`).
    @inline(__always)
    private static func zeroPairCandidates(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let word = bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)
        let t = word | (word >> 8)  // little-endian: byte k | byte k + 1
        return (t &- ones) & ~t
    }

    /// Non-zero in its high bits when one of the eight positions `at...at + 7` begins
    /// `00 00 01` (reads `at..<at + 10`): `(t - 01...01) & ~t` has a high bit set if and only
    /// if `t` has a zero byte.
    @inline(__always)
    private static func startCodeCandidates(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let t = bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            | bytes.loadUnaligned(fromByteOffset: at + 1, as: UInt64.self)
            | (bytes.loadUnaligned(fromByteOffset: at + 2, as: UInt64.self) ^ ones)
        return (t &- ones) & ~t
    }

    /// `end` moved back over zero bytes, not before `start`.
    static func trimmedEnd(of bytes: [UInt8], from start: Int, to end: Int) -> Int {
        bytes.withUnsafeBytes { trimmedEnd(of: $0, from: start, to: end) }
    }

    /// `end` moved back over zero bytes, not before `start`.
    static func trimmedEnd(of bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
        var end = end
        while end > start && bytes[end - 1] == 0 { end -= 1 }
        return end
    }
}

/// Counters kept by `AnnexBAccessUnitSplitter`.
public struct AnnexBSplitterCounters: Sendable, Equatable {
    /// Access units returned.
    public var accessUnits = 0
    /// NAL units placed in returned or pending access units.
    public var nalUnits = 0
    /// Non-zero bytes before the first start code, skipped.
    public var garbageBytes = 0
    /// NAL units with fewer than two bytes, the forbidden bit set or TemporalId + 1 = 0, skipped.
    public var invalidNALUnits = 0
    /// Access units dropped because they grew beyond `maxAccessUnitSize`.
    public var oversizedAccessUnits = 0
    /// NAL units skipped while resynchronizing after an oversized access unit.
    public var skippedNALUnits = 0
    /// Groups of NAL units without any VCL NAL unit (no picture), dropped.
    public var accessUnitsWithoutPicture = 0

    /// Makes zeroed counters.
    public init() {}
}

/// Splits an Annex B byte stream, fed in chunks of any size, into HEVC access units
/// (H.265 section 7.4.2.4.4).
///
/// A new access unit begins at an access unit delimiter; at a VPS, SPS, PPS, prefix SEI
/// (or NAL types 41...44, 48...55) that follows a VCL NAL unit of the current access unit;
/// or at a VCL NAL unit with first_slice_segment_in_pic_flag set when the current access
/// unit already has one. An access unit is returned once the first NAL unit of the next
/// one is complete (or at `finish()`). Timestamps are left 0 for the caller to set.
///
/// Memory is bounded: the splitter keeps at most about `maxAccessUnitSize` bytes between
/// calls. An access unit that grows beyond it (counted in stream bytes: NAL units plus any
/// zero bytes before the next start code) is dropped and counted, and NAL units are then
/// skipped until one that can begin an access unit. With ``append(sharing:)``, the NAL units
/// gathered for the next access unit are slices that keep the chunks they lie in alive (the
/// chunks that access unit's bytes span, not more).
public struct AnnexBAccessUnitSplitter: Sendable {
    /// The largest access unit kept, in bytes.
    public let maxAccessUnitSize: Int
    /// What has been seen so far.
    public private(set) var counters = AnnexBSplitterCounters()

    /// Input kept between calls: the current NAL unit's bytes so far (from `nalStart`) and
    /// at most two bytes that may begin the next start code. Input is split where it lies and
    /// only this tail is copied here; `nalStart` and `scanPosition` index into it between
    /// calls, and into the bytes being scanned during one.
    private var buffer: [UInt8] = []
    private var nalStart = 0
    /// Where the start code search resumes.
    private var scanPosition = 0
    private var seenStartCode = false
    /// The current NAL unit belongs to an oversized access unit: its bytes are thrown away.
    private var discardingNAL = false
    /// The NAL unit being thrown away has shown only zero bytes so far: it may still turn
    /// out empty (zeros before the next start code), which is not an invalid NAL unit.
    private var discardedOnlyZeros = false
    /// After an oversized access unit: skip NAL units until one that can begin an access unit.
    private var resynchronizing = false

    /// The bytes being scanned in place by ``append(sharing:)``, whose NAL units are slices of
    /// them: `bytes[i]` of the scan is `shared[sharedBase + i]`. Set only for that scan; nil
    /// otherwise (the kept tail, `finish()`: NAL units copied).
    private var shared: ArraySlice<UInt8>?
    private var sharedBase = 0

    private var currentNALUnits: [ArraySlice<UInt8>] = []
    private var currentStreamBytes = 0
    private var currentHasVCL = false
    private var currentHasIRAP = false

    /// Makes a splitter that keeps access units of at most `maxAccessUnitSize` bytes.
    /// - Precondition: `maxAccessUnitSize > 0`.
    public init(maxAccessUnitSize: Int = 16 << 20) {
        precondition(maxAccessUnitSize > 0, "maxAccessUnitSize must be positive, got \(maxAccessUnitSize)")
        self.maxAccessUnitSize = maxAccessUnitSize
    }

    /// Feeds the next bytes of the stream; returns the access units completed by them.
    ///
    /// The bytes are split where they lie: each NAL unit is copied once, into its array.
    /// Only a NAL unit begun in an earlier call goes through the kept tail (up to the first
    /// start code that ends in `bytes`), and what follows the last start code is kept.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) -> [AccessUnit] {
        append(bytes, sharing: nil)
    }

    /// Feeds the next bytes of the stream; returns the access units completed by them, whose
    /// NAL units are slices of `chunk` where they lie wholly in it (nothing is copied), so the
    /// chunk's storage lives as long as one of those access units. A NAL unit begun in an
    /// earlier call, or left over at `finish()`, is copied into an array of its own.
    ///
    /// The caller must not write into `chunk`'s storage afterwards: read the next bytes into a
    /// new array (writing into a shared array copies it, and the slices would keep it anyway).
    public mutating func append(sharing chunk: ArraySlice<UInt8>) -> [AccessUnit] {
        chunk.withUnsafeBytes { append($0, sharing: chunk) }
    }

    /// `append(_:)`; with `chunk` (whose bytes `bytes` are), NAL units that lie wholly in
    /// `bytes` are slices of it.
    private mutating func append(_ bytes: UnsafeRawBufferPointer, sharing chunk: ArraySlice<UInt8>?) -> [AccessUnit] {
        var output: [AccessUnit] = []
        var rest = bytes
        if !buffer.isEmpty {
            let end = firstStartCodeEnd(in: bytes) ?? bytes.count
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<end]))
            scanKept(into: &output)
            guard end < bytes.count else { return output }
            // The kept tail ended in that start code: nothing is left of it.
            rest = UnsafeRawBufferPointer(rebasing: bytes[end...])
        }
        if let chunk {
            shared = chunk
            sharedBase = chunk.startIndex + (bytes.count - rest.count)
        }
        scan(rest, into: &output)
        shared = nil
        buffer = Array(UnsafeRawBufferPointer(rebasing: rest[nalStart...]))
        scanPosition -= nalStart
        nalStart = 0
        return output
    }

    /// Feeds the next bytes of the stream; returns the access units completed by them.
    public mutating func append(_ bytes: [UInt8]) -> [AccessUnit] {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Where in `input` the first start code ends that ends there (the one begun in the kept
    /// tail, or the first one in `input`), or nil.
    private func firstStartCodeEnd(in input: UnsafeRawBufferPointer) -> Int? {
        // The tail holds at most two bytes past the search position: a start code whose
        // `01` is one of the first two bytes of `input` begins there.
        let tail = buffer[scanPosition...]
        let joint = Array(tail) + input.prefix(2)
        if let start = AnnexB.nextStartCode(in: joint, from: 0) { return start + 3 - tail.count }
        return AnnexB.nextStartCode(in: input, from: 0).map { $0 + 3 }
    }

    /// Scans the kept bytes (after input was added to them), then drops what was consumed
    /// once that is at least half of them.
    private mutating func scanKept(into output: inout [AccessUnit]) {
        var kept = buffer
        buffer = []
        kept.withUnsafeBytes { scan($0, into: &output) }
        if nalStart > 0 && nalStart >= kept.count / 2 {
            kept.removeFirst(nalStart)
            scanPosition -= nalStart
            nalStart = 0
        }
        buffer = kept
    }

    /// Ends the stream: completes the last NAL unit and returns the remaining access units.
    /// The splitter is then ready for a new stream (counters are kept).
    public mutating func finish() -> [AccessUnit] {
        var output: [AccessUnit] = []
        let kept = buffer
        buffer = []
        kept.withUnsafeBytes { bytes in
            if seenStartCode {
                let end = AnnexB.trimmedEnd(of: bytes, from: nalStart, to: bytes.count)
                completeNAL(bytes, end: end, streamEnd: bytes.count, into: &output)
            } else {
                countGarbage(bytes, nalStart..<bytes.count)
            }
        }
        emitCurrent(into: &output)
        buffer = []
        nalStart = 0
        scanPosition = 0
        seenStartCode = false
        discardingNAL = false
        discardedOnlyZeros = false
        resynchronizing = false
        return output
    }

    /// Splits `bytes` (the kept bytes, or input where it lies) from `scanPosition` on;
    /// `nalStart` and `scanPosition` index into `bytes`. While `shared` is set, `bytes` lie in
    /// it from `sharedBase` on, and NAL units ending here are slices of it.
    private mutating func scan(_ bytes: UnsafeRawBufferPointer, into output: inout [AccessUnit]) {
        while let startCode = AnnexB.nextStartCode(in: bytes, from: scanPosition) {
            if seenStartCode {
                let end = AnnexB.trimmedEnd(of: bytes, from: nalStart, to: startCode)
                completeNAL(bytes, end: end, streamEnd: startCode, into: &output)
            } else {
                countGarbage(bytes, nalStart..<startCode)
                seenStartCode = true
            }
            nalStart = startCode + 3
            scanPosition = nalStart
        }
        // No start code begins before count - 2: the last two bytes may still start one.
        scanPosition = max(nalStart, bytes.count - 2)
        boundPendingBytes(bytes, into: &output)
    }

    /// Keeps the retained bytes bounded when no start code arrives.
    ///
    /// The decision matches what `completeNAL` would decide once the NAL unit ends, so the
    /// result does not depend on how the input was chunked: the NAL unit's type and
    /// first-slice flag come from its first three bytes, and the last two retained bytes
    /// (possibly the next start code's zeros) are not counted yet.
    private mutating func boundPendingBytes(_ bytes: UnsafeRawBufferPointer, into output: inout [AccessUnit]) {
        let keepFrom = max(nalStart, bytes.count - 2)
        if !seenStartCode {
            countGarbage(bytes, nalStart..<keepFrom)
            nalStart = keepFrom
        } else if !discardingNAL && keepFrom - nalStart >= 3 {
            let pendingBytes = keepFrom - nalStart
            let disposition = disposition(bytes[nalStart], bytes[nalStart + 1], bytes[nalStart + 2])
            switch disposition {
            case .invalid:
                if pendingBytes > maxAccessUnitSize {
                    // Zeros only so far: counted once a non-zero byte shows it is not empty.
                    discardedOnlyZeros = !bytes[nalStart..<keepFrom].contains { $0 != 0 }
                    if !discardedOnlyZeros { counters.invalidNALUnits += 1 }
                    discardingNAL = true
                }
            case .skip:
                if pendingBytes > maxAccessUnitSize {
                    counters.skippedNALUnits += 1
                    discardingNAL = true
                }
            case .beginAccessUnit:
                if pendingBytes > maxAccessUnitSize {
                    beginAccessUnit(into: &output)
                    dropOversized()
                    discardingNAL = true
                }
            case .append:
                if currentStreamBytes + pendingBytes > maxAccessUnitSize {
                    dropOversized()
                    discardingNAL = true
                }
            }
        }
        if discardingNAL {
            noteDiscardedBytes(bytes[nalStart..<keepFrom])
            nalStart = keepFrom
        }
    }

    /// Counts a discarded all-zero NAL unit as invalid once it shows a non-zero byte.
    private mutating func noteDiscardedBytes(_ bytes: Slice<UnsafeRawBufferPointer>) {
        if discardedOnlyZeros && bytes.contains(where: { $0 != 0 }) {
            discardedOnlyZeros = false
            counters.invalidNALUnits += 1
        }
    }

    private mutating func countGarbage(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) {
        for index in range where bytes[index] != 0 { counters.garbageBytes += 1 }
    }

    private mutating func dropOversized() {
        counters.oversizedAccessUnits += 1
        currentNALUnits = []
        currentStreamBytes = 0
        currentHasVCL = false
        currentHasIRAP = false
        resynchronizing = true
    }

    private enum NALDisposition {
        /// Fewer than two bytes, forbidden bit set, or TemporalId + 1 = 0: skipped and counted.
        case invalid
        /// Skipped while resynchronizing.
        case skip
        /// Begins a new access unit.
        case beginAccessUnit
        /// Joins the current access unit.
        case append
    }

    /// What to do with a NAL unit given its first three bytes (absent bytes read as 0).
    private func disposition(_ byte0: UInt8, _ byte1: UInt8, _ byte2: UInt8) -> NALDisposition {
        // A NAL unit of one byte ends in 0 after trimming, so byte1 == 0 covers it too.
        guard byte0 & 0x80 == 0, byte1 & 0x07 != 0 else { return .invalid }
        let type = HEVCNALUnitType(rawValue: byte0 >> 1)
        let firstSlice = type.isVCL && byte2 & 0x80 != 0
        if resynchronizing {
            return Self.canBeginAccessUnit(type, firstSlice: firstSlice) ? .beginAccessUnit : .skip
        }
        if !currentNALUnits.isEmpty && beginsNewAccessUnit(type, firstSlice: firstSlice) {
            return .beginAccessUnit
        }
        return .append
    }

    /// Closes the current access unit (or ends resynchronization) before a NAL unit that begins one.
    private mutating func beginAccessUnit(into output: inout [AccessUnit]) {
        if resynchronizing {
            resynchronizing = false
        } else {
            emitCurrent(into: &output)
        }
    }

    /// Handles the NAL unit `bytes[nalStart..<end]`, which spans the stream up to `streamEnd`;
    /// kept as a slice of `shared` while it is set (`bytes` lie in it), else copied.
    private mutating func completeNAL(_ bytes: UnsafeRawBufferPointer, end: Int, streamEnd: Int,
                                      into output: inout [AccessUnit]) {
        if discardingNAL {
            noteDiscardedBytes(bytes[nalStart..<end])
            discardingNAL = false
            discardedOnlyZeros = false
            return
        }
        guard end > nalStart else { return }  // empty: two start codes in a row
        let byte1 = end - nalStart >= 2 ? bytes[nalStart + 1] : 0
        let byte2 = end - nalStart >= 3 ? bytes[nalStart + 2] : 0
        let byte0 = bytes[nalStart]
        switch disposition(byte0, byte1, byte2) {
        case .invalid:
            counters.invalidNALUnits += 1
            return
        case .skip:
            counters.skippedNALUnits += 1
            return
        case .beginAccessUnit:
            beginAccessUnit(into: &output)
        case .append:
            break
        }
        let streamBytes = streamEnd - nalStart
        if currentStreamBytes + streamBytes > maxAccessUnitSize {
            dropOversized()
            return
        }
        if let shared {
            currentNALUnits.append(shared[(sharedBase + nalStart)..<(sharedBase + end)])
        } else {
            currentNALUnits.append(Array(UnsafeRawBufferPointer(rebasing: bytes[nalStart..<end]))[...])
        }
        currentStreamBytes += streamBytes
        counters.nalUnits += 1
        let type = HEVCNALUnitType(rawValue: byte0 >> 1)
        if type.isVCL {
            currentHasVCL = true
            if type.isIRAP { currentHasIRAP = true }
        }
    }

    private func beginsNewAccessUnit(_ type: HEVCNALUnitType, firstSlice: Bool) -> Bool {
        switch type.rawValue {
        case HEVCNALUnitType.accessUnitDelimiter.rawValue: true
        case 32...34, 39, 41...44, 48...55: currentHasVCL
        case 0...31: currentHasVCL && firstSlice
        default: false
        }
    }

    private static func canBeginAccessUnit(_ type: HEVCNALUnitType, firstSlice: Bool) -> Bool {
        switch type.rawValue {
        case 32...35, 39: true
        case 0...31: firstSlice
        default: false
        }
    }

    private mutating func emitCurrent(into output: inout [AccessUnit]) {
        defer {
            currentNALUnits = []
            currentStreamBytes = 0
            currentHasVCL = false
            currentHasIRAP = false
        }
        guard !currentNALUnits.isEmpty else { return }
        guard currentHasVCL else {
            counters.accessUnitsWithoutPicture += 1
            return
        }
        counters.accessUnits += 1
        output.append(AccessUnit(nalUnitSlices: currentNALUnits, timestamp: 0, isKeyframe: currentHasIRAP))
    }
}
