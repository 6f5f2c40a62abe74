#if canImport(MediaFormats)  // tools/fuzz compiles MediaFormats and SecureRTP into one module
import MediaFormats
#endif

/// Why SRTP keying material or a session was refused. The text never contains key bytes.
public struct SRTPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One line for the user.
    public var description: String

    /// Makes an error with its one-line text (which must not contain key material).
    public init(_ description: String) { self.description = description }
}

/// An SRTP master key and salt for one suite: the secret both ends share (RFC 4568 SDES
/// `inline:`). Its description, debug description and mirror never show the bytes; only
/// `inlineBase64` does, for the SDP or key file that must carry it.
public struct SRTPMasterKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
                             CustomReflectable {
    /// The suite the key is for.
    public let suite: SRTPSuite
    /// Key then salt (`suite.masterLength` bytes).
    let material: [UInt8]

    /// A key from raw key-and-salt bytes. Throws when their count does not fit the suite.
    public init(suite: SRTPSuite, keyAndSalt: [UInt8]) throws(SRTPError) {
        guard keyAndSalt.count == suite.masterLength else {
            throw SRTPError("SRTP key: \(keyAndSalt.count) bytes of key and salt, \(suite) needs \(suite.masterLength)")
        }
        self.suite = suite
        material = keyAndSalt
    }

    /// A key from the base64 text of key and salt (RFC 4568 `inline:` without a lifetime or
    /// MKI, ffmpeg's `-srtp_out_params`); surrounding white space is ignored. Throws a one-line
    /// error that does not repeat the text.
    public init(suite: SRTPSuite, base64: String) throws(SRTPError) {
        let text = base64.trimmingWhitespace
        let bytes: [UInt8]
        do { bytes = try Base64.decode(text) } catch {
            throw SRTPError("SRTP key: not base64 (\(error.description.replacingBase64Prefix))")
        }
        try self.init(suite: suite, keyAndSalt: bytes)
    }

    /// A fresh random key and salt from the system's cryptographic generator (getrandom).
    public static func random(suite: SRTPSuite = .aesCM128HMACSHA1_80) -> SRTPMasterKey {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<suite.masterLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return try! SRTPMasterKey(suite: suite, keyAndSalt: bytes)  // the length fits by construction
    }

    /// The base64 text of key and salt: what `a=crypto:1 <suite> inline:` carries. Secret.
    public var inlineBase64: String { Base64.encode(material) }

    /// Never the key: the suite and "key redacted".
    public var description: String { "SRTPMasterKey(\(suite), key redacted)" }
    /// Never the key.
    public var debugDescription: String { description }
    /// Never the key (`dump`, reflection).
    public var customMirror: Mirror { Mirror(self, children: ["suite": suite], displayStyle: .struct) }
}

extension String {
    var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// "base64: ..." without its prefix, for an error that already says what failed.
    var replacingBase64Prefix: String { hasPrefix("base64: ") ? String(dropFirst(8)) : self }
}
