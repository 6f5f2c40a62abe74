/// An HEVC NAL unit type (ITU-T H.265 table 7-1, plus the RTP payload types of RFC 7798).
public struct HEVCNALUnitType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The 6-bit type value (0...63).
    public var rawValue: UInt8

    /// Makes a type from its 6-bit value; bits above the low six are ignored.
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x3f }

    /// Coded slice of a trailing picture (non-reference).
    public static let trailN = HEVCNALUnitType(rawValue: 0)
    /// Coded slice of a trailing picture (reference).
    public static let trailR = HEVCNALUnitType(rawValue: 1)
    /// Broken link access picture, with leading pictures.
    public static let blaWithLP = HEVCNALUnitType(rawValue: 16)
    /// Broken link access picture, with RADL leading pictures.
    public static let blaWithRADL = HEVCNALUnitType(rawValue: 17)
    /// Broken link access picture, no leading pictures.
    public static let blaNoLP = HEVCNALUnitType(rawValue: 18)
    /// IDR picture that may have RADL leading pictures (IDR_W_RADL).
    public static let idrWithRADL = HEVCNALUnitType(rawValue: 19)
    /// IDR picture without leading pictures (IDR_N_LP).
    public static let idrNoLP = HEVCNALUnitType(rawValue: 20)
    /// Clean random access picture.
    public static let cra = HEVCNALUnitType(rawValue: 21)
    /// Video parameter set.
    public static let vps = HEVCNALUnitType(rawValue: 32)
    /// Sequence parameter set.
    public static let sps = HEVCNALUnitType(rawValue: 33)
    /// Picture parameter set.
    public static let pps = HEVCNALUnitType(rawValue: 34)
    /// Access unit delimiter.
    public static let accessUnitDelimiter = HEVCNALUnitType(rawValue: 35)
    /// End of sequence.
    public static let endOfSequence = HEVCNALUnitType(rawValue: 36)
    /// End of bitstream.
    public static let endOfBitstream = HEVCNALUnitType(rawValue: 37)
    /// Filler data.
    public static let fillerData = HEVCNALUnitType(rawValue: 38)
    /// Prefix supplemental enhancement information.
    public static let prefixSEI = HEVCNALUnitType(rawValue: 39)
    /// Suffix supplemental enhancement information.
    public static let suffixSEI = HEVCNALUnitType(rawValue: 40)
    /// RFC 7798 Aggregation Packet payload.
    public static let aggregationPacket = HEVCNALUnitType(rawValue: 48)
    /// RFC 7798 Fragmentation Unit payload.
    public static let fragmentationUnit = HEVCNALUnitType(rawValue: 49)
    /// RFC 7798 PACI payload (not supported by this engine).
    public static let paci = HEVCNALUnitType(rawValue: 50)

    /// The type of the NAL unit that starts with these bytes (its header's first byte:
    /// `(byte0 >> 1) & 0x3f`); nil for an empty NAL unit.
    public init?<Bytes: Collection<UInt8>>(nalUnit: Bytes) {
        guard let byte0 = nalUnit.first else { return nil }
        self.init(rawValue: byte0 >> 1)
    }

    /// True for VCL (coded slice) types, 0...31.
    public var isVCL: Bool { rawValue <= 31 }
    /// True for intra random access point pictures (BLA, IDR, CRA and reserved IRAP), 16...23.
    public var isIRAP: Bool { (16...23).contains(rawValue) }
    /// True for the parameter sets a decoder needs before the first picture: VPS, SPS, PPS (32...34).
    public var isParameterSet: Bool { (Self.vps.rawValue...Self.pps.rawValue).contains(rawValue) }

    /// The type's name, e.g. `"IDR_W_RADL(19)"`, or its number.
    public var description: String {
        let names: [UInt8: String] = [
            0: "TRAIL_N", 1: "TRAIL_R", 16: "BLA_W_LP", 17: "BLA_W_RADL", 18: "BLA_N_LP",
            19: "IDR_W_RADL", 20: "IDR_N_LP", 21: "CRA", 32: "VPS", 33: "SPS", 34: "PPS",
            35: "AUD", 36: "EOS", 37: "EOB", 38: "FD", 39: "PREFIX_SEI", 40: "SUFFIX_SEI",
            48: "AP", 49: "FU", 50: "PACI",
        ]
        return names[rawValue].map { "\($0)(\(rawValue))" } ?? "\(rawValue)"
    }
}

/// The two-byte HEVC NAL unit header: F(1) | Type(6) | LayerId(6) | TID(3).
public struct HEVCNALHeader: Sendable, Equatable {
    /// forbidden_zero_bit; a conforming stream has it clear.
    public var forbiddenBit: Bool
    /// nal_unit_type.
    public var type: HEVCNALUnitType
    /// nuh_layer_id (0...63).
    public var layerId: UInt8
    /// nuh_temporal_id_plus1 (1...7 in a conforming stream; 0 is invalid).
    public var temporalIdPlusOne: UInt8

    /// Makes a header from its fields; `layerId` keeps its low 6 bits, `temporalIdPlusOne` its low 3.
    public init(forbiddenBit: Bool = false, type: HEVCNALUnitType, layerId: UInt8 = 0, temporalIdPlusOne: UInt8 = 1) {
        self.forbiddenBit = forbiddenBit
        self.type = type
        self.layerId = layerId & 0x3f
        self.temporalIdPlusOne = temporalIdPlusOne & 0x07
    }

    /// Decodes a header from its two bytes.
    public init(_ byte0: UInt8, _ byte1: UInt8) {
        forbiddenBit = byte0 & 0x80 != 0
        type = HEVCNALUnitType(rawValue: (byte0 >> 1) & 0x3f)
        layerId = (byte0 & 0x01) << 5 | byte1 >> 3
        temporalIdPlusOne = byte1 & 0x07
    }

    /// Decodes the header at the start of a NAL unit; nil when it has fewer than two bytes.
    public init?<Bytes: Collection<UInt8>>(of nalUnit: Bytes) {
        var iterator = nalUnit.makeIterator()
        guard let byte0 = iterator.next(), let byte1 = iterator.next() else { return nil }
        self.init(byte0, byte1)
    }

    /// The first header byte: F, Type and the high bit of LayerId.
    public var byte0: UInt8 { (forbiddenBit ? 0x80 : 0) | type.rawValue << 1 | layerId >> 5 }
    /// The second header byte: the low five bits of LayerId and TID.
    public var byte1: UInt8 { (layerId & 0x1f) << 3 | temporalIdPlusOne }

    /// True when `nalUnit` is a VCL NAL unit whose first_slice_segment_in_pic_flag
    /// (the first bit after the two-byte header) is set: it begins a new picture.
    /// False for non-VCL NAL units and for VCL NAL units too short to hold the flag.
    public static func isFirstSliceSegmentInPicture<Bytes: Collection<UInt8>>(_ nalUnit: Bytes) -> Bool {
        var iterator = nalUnit.makeIterator()
        guard let byte0 = iterator.next(), iterator.next() != nil, let byte2 = iterator.next() else { return false }
        return HEVCNALUnitType(rawValue: byte0 >> 1).isVCL && byte2 & 0x80 != 0
    }
}
