/// Standard base64 (RFC 4648 section 4: `A-Z a-z 0-9 + /`, `=` padding), as SDP
/// sprop parameters use it.
public enum Base64 {
    /// Why a base64 string was rejected.
    public enum DecodingError: Error, Sendable, Hashable, CustomStringConvertible {
        /// Length is not a multiple of 4.
        case badLength(Int)
        /// A character outside the alphabet (or `=` before the end) at this UTF-8 offset.
        case badCharacter(offset: Int)
        /// Padding is malformed, or the bits it leaves over are not zero.
        case badPadding

        /// One line for logs.
        public var description: String {
            switch self {
            case .badLength(let length): return "base64: length \(length) is not a multiple of 4"
            case .badCharacter(let offset): return "base64: invalid character at offset \(offset)"
            case .badPadding: return "base64: malformed padding"
            }
        }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Encodes bytes, padded with `=` to a multiple of 4 characters.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let b0 = UInt32(bytes[index])
            let b1 = remaining > 1 ? UInt32(bytes[index + 1]) : 0
            let b2 = remaining > 2 ? UInt32(bytes[index + 2]) : 0
            let triple = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(triple >> 18 & 0x3F)])
            out.append(alphabet[Int(triple >> 12 & 0x3F)])
            out.append(remaining > 1 ? alphabet[Int(triple >> 6 & 0x3F)] : UInt8(ascii: "="))
            out.append(remaining > 2 ? alphabet[Int(triple & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes canonical base64: no whitespace, length a multiple of 4, at most two `=`
    /// only at the end, and zero bits left over before the padding.
    public static func decode(_ text: String) throws(DecodingError) -> [UInt8] {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { throw .badLength(input.count) }
        var out = [UInt8]()
        out.reserveCapacity(input.count / 4 * 3)
        var groupStart = 0
        while groupStart < input.count {
            let isLast = groupStart + 4 == input.count
            var values = [UInt32](repeating: 0, count: 4)
            var padding = 0
            for position in 0..<4 {
                let character = input[groupStart + position]
                if character == UInt8(ascii: "=") {
                    guard isLast, position >= 2 else { throw .badCharacter(offset: groupStart + position) }
                    padding += 1
                    continue
                }
                guard padding == 0 else { throw .badPadding }
                guard let value = sextet(character) else { throw .badCharacter(offset: groupStart + position) }
                values[position] = value
            }
            let triple = values[0] << 18 | values[1] << 12 | values[2] << 6 | values[3]
            out.append(UInt8(truncatingIfNeeded: triple >> 16))
            if padding < 2 { out.append(UInt8(truncatingIfNeeded: triple >> 8)) }
            if padding < 1 { out.append(UInt8(truncatingIfNeeded: triple)) }
            // Non-canonical: leftover bits before the padding must be zero.
            if (padding == 1 && triple & 0xFF != 0) || (padding == 2 && triple & 0xFFFF != 0) { throw .badPadding }
            groupStart += 4
        }
        return out
    }

    private static func sextet(_ character: UInt8) -> UInt32? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(character - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(character - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(character - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
