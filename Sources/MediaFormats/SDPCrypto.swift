/// An RFC 4568 (SDES) `a=crypto:<tag> <suite> <key-params> [<session-params>...]` attribute:
/// the SRTP suite and master key of a stream, carried in its SDP. The key parameters are
/// secret: `description` and the mirror never show them.
public struct SDPCrypto: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The tag (1 to 999,999,999).
    public var tag: UInt32
    /// The crypto suite's name (`AES_CM_128_HMAC_SHA1_80`).
    public var suite: String
    /// `inline:<base64 key and salt>[|lifetime][|MKI:length]`. Secret.
    public var keyParameters: String
    /// Session parameters after the key (`UNENCRYPTED_SRTCP`, ...), as written.
    public var sessionParameters: [String]

    /// An attribute with one inline key: `inline:<base64>`.
    public init(tag: UInt32 = 1, suite: String, inlineKey: String) {
        self.init(tag: tag, suite: suite, keyParameters: "inline:" + inlineKey, sessionParameters: [])
    }

    /// An attribute from its parts (none may contain spaces or line breaks).
    public init(tag: UInt32, suite: String, keyParameters: String, sessionParameters: [String]) {
        self.tag = tag
        self.suite = suite
        self.keyParameters = keyParameters
        self.sessionParameters = sessionParameters
    }

    /// Reads the attribute's value (what follows `a=crypto:`); nil when it is not
    /// `<tag> <suite> inline:...`.
    public init?(parsing value: String) {
        let fields = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count >= 3, fields[0].count <= 9, fields[0].allSatisfy(\.isASCII), let tag = UInt32(fields[0]),
              tag >= 1, fields[2].hasPrefix("inline:") else { return nil }
        self.init(tag: tag, suite: fields[1], keyParameters: fields[2], sessionParameters: Array(fields[3...]))
    }

    /// The base64 key and salt of the first inline key (without lifetime or MKI). Secret.
    public var inlineKey: String {
        String(keyParameters.dropFirst("inline:".count).prefix { $0 != "|" })
    }

    /// The attribute's value as written after `a=crypto:`. Secret (it holds the key).
    public var attributeValue: String {
        ([String(tag), suite, keyParameters] + sessionParameters).joined(separator: " ")
    }

    /// Tag and suite; the key redacted.
    public var description: String { "a=crypto:\(tag) \(suite) inline:<redacted>" }
    /// Tag and suite only (`dump`, reflection).
    public var customMirror: Mirror { Mirror(self, children: ["tag": tag, "suite": suite], displayStyle: .struct) }
}
