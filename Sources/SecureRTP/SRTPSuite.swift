/// An SRTP protection profile (RFC 3711, RFC 7714) by its SDP name (RFC 4568 `a=crypto`).
public enum SRTPSuite: String, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// AES-128 counter mode, HMAC-SHA1 with an 80-bit tag: the default every SRTP receiver speaks.
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    /// AES-128 counter mode, HMAC-SHA1 with a 32-bit tag on SRTP (SRTCP keeps 80 bits).
    case aesCM128HMACSHA1_32 = "AES_CM_128_HMAC_SHA1_32"
    /// AES-128-GCM with a 16-byte tag (RFC 7714).
    case aeadAES128GCM = "AEAD_AES_128_GCM"
    /// AES-256-GCM with a 16-byte tag (RFC 7714).
    case aeadAES256GCM = "AEAD_AES_256_GCM"

    /// The SDP name.
    public var description: String { rawValue }

    /// Bytes of the master key.
    public var keyLength: Int {
        switch self {
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32, .aeadAES128GCM: return 16
        case .aeadAES256GCM: return 32
        }
    }

    /// Bytes of the master salt.
    public var saltLength: Int {
        switch self {
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32: return 14
        case .aeadAES128GCM, .aeadAES256GCM: return 12
        }
    }

    /// Bytes of key and salt together (what `inline:` carries in base64).
    public var masterLength: Int { keyLength + saltLength }

    /// Bytes SRTP adds to an RTP packet (the authentication tag).
    public var rtpOverhead: Int {
        switch self {
        case .aesCM128HMACSHA1_80: return 10
        case .aesCM128HMACSHA1_32: return 4
        case .aeadAES128GCM, .aeadAES256GCM: return 16
        }
    }

    /// Bytes SRTCP adds to an RTCP compound packet (the 4-byte E flag and index, and the tag).
    public var rtcpOverhead: Int {
        switch self {
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32: return 4 + 10
        case .aeadAES128GCM, .aeadAES256GCM: return 4 + 16
        }
    }

    /// The shim's number of the suite (`CSRTP_*` in Sources/CSRTP/shim.h).
    var shimNumber: Int32 { Int32(Self.allCases.firstIndex(of: self)!) }
}
