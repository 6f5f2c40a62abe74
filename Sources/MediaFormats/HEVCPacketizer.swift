/// One RTP payload planned by `HEVCPacketizer`: what it carries and how many bytes it takes.
/// It refers to the access unit's NAL units by index; no bytes are copied until `write`.
public struct HEVCPayload: Sendable, Equatable {
    /// The RFC 7798 payload structure.
    public enum Kind: Sendable, Equatable {
        /// Single NAL unit packet: NAL unit `nal`, whole.
        case single(nal: Int)
        /// Aggregation Packet (type 48) holding NAL units `nals` (at least two).
        case aggregation(nals: Range<Int>)
        /// Fragmentation Unit (type 49): `length` bytes of NAL unit `nal`'s payload starting at
        /// `offset`, counted after its two-byte NAL header.
        case fragment(nal: Int, offset: Int, length: Int, isStart: Bool, isEnd: Bool)
    }

    /// What the payload carries.
    public var kind: Kind
    /// Payload size in bytes (excluding the RTP header).
    public var size: Int
    /// True for the last payload of the access unit: its RTP packet gets the marker bit.
    public var marker: Bool

    /// Makes a payload description.
    public init(kind: Kind, size: Int, marker: Bool) {
        self.kind = kind
        self.size = size
        self.marker = marker
    }
}

/// Why an `HEVCPacketizer` cannot be made.
public enum HEVCPacketizerError: Error, Sendable, Equatable {
    /// The payload budget is below 4 bytes: a Fragmentation Unit could not carry a byte.
    case payloadBudgetTooSmall(Int)
}

/// Plans and writes RTP payloads for HEVC access units (RFC 7798, without DONL).
///
/// A NAL unit that fits the budget goes as a single NAL unit packet, except that runs of
/// consecutive NAL units that together fit go as one Aggregation Packet (greedy, at least
/// two units). A larger NAL unit is cut into Fragmentation Units, every one filled to the
/// budget except the last, so all but the last have the same size (one UDP GSO batch).
/// An FU never has both S and E set: a NAL unit that fits is never fragmented.
public struct HEVCPacketizer: Sendable {
    /// The RTP payload budget: bytes after the 12-byte RTP header.
    public let maxPayloadSize: Int

    /// Bytes before the fragment data in an FU: PayloadHdr (2) and FU header (1).
    static let fragmentOverhead = 3
    /// Bytes of an AP's PayloadHdr.
    static let aggregationHeaderSize = 2
    /// Bytes of the size field before each NAL unit in an AP.
    static let aggregationSizeFieldSize = 2

    /// Makes a packetizer for payloads of at most `maxPayloadSize` bytes.
    /// - Throws: `HEVCPacketizerError.payloadBudgetTooSmall` when `maxPayloadSize < 4`.
    public init(maxPayloadSize: Int) throws(HEVCPacketizerError) {
        guard maxPayloadSize >= 4 else { throw .payloadBudgetTooSmall(maxPayloadSize) }
        self.maxPayloadSize = maxPayloadSize
    }

    /// The payloads for `au`, in sending order; the last one has `marker` set.
    /// NAL units shorter than two bytes (no NAL header) are skipped.
    public func plan(_ au: AccessUnit) -> [HEVCPayload] {
        var payloads: [HEVCPayload] = []
        plan(au, into: &payloads)
        return payloads
    }

    /// Plans `au` as `plan(_:)` does into `payloads`, replacing what it held but keeping its
    /// storage: a sender that plans every access unit into the same array allocates none per frame.
    public func plan(_ au: AccessUnit, into payloads: inout [HEVCPayload]) {
        payloads.removeAll(keepingCapacity: true)
        let nals = au.nalUnitSlices
        var index = 0
        while index < nals.count {
            let size = nals[index].count
            if size < 2 {
                index += 1
                continue
            }
            if size <= maxPayloadSize {
                let (end, apSize) = aggregationRun(nals, from: index)
                if end - index >= 2 {
                    payloads.append(HEVCPayload(kind: .aggregation(nals: index..<end), size: apSize, marker: false))
                    index = end
                } else {
                    payloads.append(HEVCPayload(kind: .single(nal: index), size: size, marker: false))
                    index += 1
                }
                continue
            }
            // Fragment: size > maxPayloadSize guarantees at least two fragments.
            let body = size - 2
            let perFragment = maxPayloadSize - Self.fragmentOverhead
            var offset = 0
            while offset < body {
                let length = min(perFragment, body - offset)
                payloads.append(HEVCPayload(
                    kind: .fragment(nal: index, offset: offset, length: length,
                                    isStart: offset == 0, isEnd: offset + length == body),
                    size: Self.fragmentOverhead + length, marker: false))
                offset += length
            }
            index += 1
        }
        if !payloads.isEmpty { payloads[payloads.count - 1].marker = true }
    }

    /// The end of the longest run of NAL units from `start` that fits one AP, and that AP's size.
    private func aggregationRun(_ nals: [ArraySlice<UInt8>], from start: Int) -> (end: Int, size: Int) {
        var total = Self.aggregationHeaderSize
        var end = start
        while end < nals.count {
            let size = nals[end].count
            guard size >= 2, size <= Int(UInt16.max),
                  total + Self.aggregationSizeFieldSize + size <= maxPayloadSize else { break }
            total += Self.aggregationSizeFieldSize + size
            end += 1
        }
        return (end, total)
    }

    /// Writes the bytes of `payload` (not the RTP header) at the start of `buffer`.
    /// - Returns: `payload.size`, the number of bytes written.
    /// - Precondition: `payload` comes from `plan(au)` and `buffer.count >= payload.size`.
    public func write(_ payload: HEVCPayload, of au: AccessUnit, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(buffer.count >= payload.size, "payload of \(payload.size) bytes does not fit a \(buffer.count)-byte buffer")
        switch payload.kind {
        case .single(let index):
            let nal = au.nalUnitSlices[index]
            precondition(nal.count == payload.size, "payload does not match NAL unit \(index) of this access unit")
            Self.copy(nal, into: buffer, at: 0)
        case .aggregation(let range):
            var forbidden: UInt8 = 0
            var layerId = UInt8.max
            var temporalIdPlusOne = UInt8.max
            var offset = Self.aggregationHeaderSize
            for index in range {
                let nal = au.nalUnitSlices[index]
                precondition(nal.count >= 2 && offset + 2 + nal.count <= payload.size,
                             "payload does not match NAL units \(range) of this access unit")
                let header = HEVCNALHeader(nal[nal.startIndex], nal[nal.startIndex + 1])
                if header.forbiddenBit { forbidden = 1 }
                layerId = min(layerId, header.layerId)
                temporalIdPlusOne = min(temporalIdPlusOne, header.temporalIdPlusOne)
                buffer[offset] = UInt8(truncatingIfNeeded: nal.count >> 8)
                buffer[offset + 1] = UInt8(truncatingIfNeeded: nal.count)
                Self.copy(nal, into: buffer, at: offset + 2)
                offset += 2 + nal.count
            }
            let header = HEVCNALHeader(forbiddenBit: forbidden != 0, type: .aggregationPacket,
                                       layerId: layerId, temporalIdPlusOne: temporalIdPlusOne)
            buffer[0] = header.byte0
            buffer[1] = header.byte1
        case .fragment(let index, let offset, let length, let isStart, let isEnd):
            let nal = au.nalUnitSlices[index]
            precondition(nal.count >= 2 + offset + length && payload.size == Self.fragmentOverhead + length,
                         "payload does not match NAL unit \(index) of this access unit")
            // A slice keeps its buffer's indices: the NAL unit begins at `start`, not 0.
            let start = nal.startIndex
            // PayloadHdr: the NAL unit's F, LayerId and TID with type 49.
            buffer[0] = (nal[start] & 0x81) | HEVCNALUnitType.fragmentationUnit.rawValue << 1
            buffer[1] = nal[start + 1]
            buffer[2] = (isStart ? 0x80 : 0) | (isEnd ? 0x40 : 0) | (nal[start] >> 1) & 0x3f
            Self.copy(nal[(start + 2 + offset)..<(start + 2 + offset + length)], into: buffer, at: Self.fragmentOverhead)
        }
        return payload.size
    }

    /// The payload's bytes as an array (for tests and slow paths).
    public func bytes(of payload: HEVCPayload, of au: AccessUnit) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: payload.size) { storage, initialized in
            initialized = write(payload, of: au, into: UnsafeMutableRawBufferPointer(storage))
        }
    }

    private static func copy(_ bytes: ArraySlice<UInt8>, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        bytes.withUnsafeBytes { source in
            UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + source.count)]).copyMemory(from: source)
        }
    }
}
