/// The text of an RTCP item (an SDES CNAME, a BYE reason): the bytes as they go on the wire,
/// at most 255 of them (the item's 8-bit length).
///
/// RFC 3550 says these texts are UTF-8, but what a peer sends is kept byte for byte, not
/// decoded: a CNAME is an identifier that binds sources together and is compared as such,
/// and decoding invalid UTF-8 (each bad byte to U+FFFD, three bytes) would make different
/// names compare equal and could grow a 255-byte item past the limit, so that writing a
/// parsed packet back would no longer give what was read. With bytes, parse and serialize
/// are exact inverses. ``string`` decodes for display.
public struct RTCPText: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The most bytes an item can carry.
    public static let maxBytes = 255

    /// The bytes, as on the wire (at most ``maxBytes``).
    public let bytes: [UInt8]

    /// Text from a string: its UTF-8, cut to at most 255 bytes without splitting a Unicode scalar.
    public init(_ string: String) { bytes = RTCPWire.utf8Prefix(string, limit: Self.maxBytes) }

    /// Text from bytes as they would be on the wire, valid UTF-8 or not: the first 255 are kept.
    public init(bytes: some Sequence<UInt8>) { self.bytes = Array(bytes.prefix(Self.maxBytes)) }

    /// Text from a string literal, as ``init(_:)``.
    public init(stringLiteral value: String) { self.init(value) }

    /// The bytes decoded as UTF-8, each invalid sequence as U+FFFD: for display, not for comparing.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// ``string``.
    public var description: String { string }
}
