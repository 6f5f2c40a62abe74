/// The stats JSON (`--stats`, `--stats-every`, `--stats-series`), written by hand rather than by
/// Foundation's `JSONSerialization`, whose first use in a process cost `streamer recv` ~5 ms
/// (its dynamic casts scan every loaded protocol conformance; `.sortedKeys` opens an ICU
/// collator): results/profile.md section 21.
///
/// It writes what `JSONSerialization` writes for the same object with `.sortedKeys` (and, when
/// `pretty`, `.prettyPrinted`): the same layout, the same escapes (`/` too), integers as
/// decimals, a `Double` as its shortest round-trip text without a trailing `.0`, keys in the
/// same order for the keys the stats use (see ``precedes(_:_:)``). The values it takes are the
/// ones the stats objects hold: `String`, `Bool`, `Int` (and the fixed-width integers),
/// `Double`, ``Null`` (JSON's `null`, where `JSONSerialization` took an `NSNull`),
/// `[String: Any]`, `[Any]`. Anything else, and a NaN or infinite `Double` (JSON has no text
/// for them), throws, as `JSONSerialization` does.
enum StatsJSON {
    /// JSON's `null` in a stats object (Foundation, whose `NSNull` it was, is not linked).
    struct Null: Sendable {}

    /// A value JSON cannot hold, under `key`.
    struct InvalidValue: Error, CustomStringConvertible {
        let description: String
    }

    /// `object` as UTF-8 JSON, keys sorted at every level; `pretty`: one member per line,
    /// indented by two spaces per level, `"key" : value`.
    static func data(_ object: [String: Any], pretty: Bool) throws -> [UInt8] {
        var writer = StatsJSONWriter(pretty: pretty)
        try writer.write(object)
        return writer.bytes
    }

    /// The keys of `object` (at any level) whose values the writer recognized only by a dynamic
    /// cast (``StatsJSONWriter``'s `writeCast`), whose first failing cast in a process searches
    /// every protocol conformance in it: none, for the stats objects the streamer writes.
    static func keysWrittenThroughCasts(_ object: [String: Any]) throws -> [String] {
        var writer = StatsJSONWriter(pretty: false)
        try writer.write(object)
        return writer.castKeys
    }

    /// Whether key `a` comes before key `b` in Foundation's `.sortedKeys` order (a comparison
    /// with `.numeric`, `.caseInsensitive` and `.forcedOrdering`, which ICU's root collation
    /// decides), for keys of ASCII characters, as all the stats keys are: case is ignored, a run
    /// of digits compares as its number, and by character: whitespace, then punctuation and
    /// symbols in ICU's order (`_ - , ; : ! ? . ' " ( ) [ ] { } @ * / \ & # %`, the backquote,
    /// `^ + < = > | ~ $`), then digits, then letters. Keys equal so far: the first letter that
    /// differs in case, lowercase first; then the shorter (fewer leading zeros) first. Other
    /// control characters come first (ICU ignores them) and characters past ASCII after
    /// letters, by code point (ICU would place `é` beside `e`).
    static func precedes(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var i = 0, j = 0
        while i < x.count, j < y.count {
            if isDigit(x[i]), isDigit(y[j]) {
                let (xStart, xEnd) = digitRun(x, from: i), (yStart, yEnd) = digitRun(y, from: j)
                if xEnd - xStart != yEnd - yStart { return xEnd - xStart < yEnd - yStart }
                for k in 0..<(xEnd - xStart) where x[xStart + k] != y[yStart + k] {
                    return x[xStart + k] < y[yStart + k]
                }
                (i, j) = (xEnd, yEnd)
                continue
            }
            let (u, v) = (weight(x[i]), weight(y[j]))
            if u != v { return u < v }
            i += 1
            j += 1
        }
        if x.count - i != y.count - j { return x.count - i < y.count - j }
        // Equal but for case and leading zeros: the letters are the same, in the same order.
        for (p, q) in zip(x.filter(isLetter), y.filter(isLetter)) where p != q { return p > q }
        if x.count != y.count { return x.count < y.count }
        return x.lexicographicallyPrecedes(y)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }

    /// The digits of the run that starts at `start`, leading zeros skipped (one kept).
    private static func digitRun(_ bytes: [UInt8], from start: Int) -> (Int, Int) {
        var end = start
        while end < bytes.count, isDigit(bytes[end]) { end += 1 }
        var first = start
        while first < end - 1, bytes[first] == 0x30 { first += 1 }
        return (first, end)
    }

    /// ASCII's whitespace, punctuation and symbols in ICU's root collation order.
    private static let symbolOrder = Array("\t\n\u{B}\u{C}\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$".utf8)

    /// A byte's place in the order: its class in the high bits, its rank or folded value in the low.
    private static func weight(_ byte: UInt8) -> Int {
        if isDigit(byte) { return 2 << 8 | Int(byte) }
        if isLetter(byte) { return 3 << 8 | Int(byte | 0x20) }
        if byte >= 0x80 { return 4 << 8 | Int(byte) }
        if let rank = symbolOrder.firstIndex(of: byte) { return 1 << 8 | rank }
        return Int(byte)
    }
}

/// The bytes of one stats object as they are written.
private struct StatsJSONWriter {
    private(set) var bytes: [UInt8] = []
    /// The keys whose values went through `writeCast`.
    private(set) var castKeys: [String] = []
    let pretty: Bool
    private var indent = 0

    init(pretty: Bool) {
        self.pretty = pretty
        bytes.reserveCapacity(pretty ? 8192 : 4096)
    }

    mutating func write<Value>(_ object: [String: Value]) throws {
        bytes.append(UInt8(ascii: "{"))
        if pretty {
            bytes.append(UInt8(ascii: "\n"))
            indent += 2
            if !object.isEmpty { writeIndent() }
        }
        var first = true
        for key in object.keys.sorted(by: StatsJSON.precedes) {
            if !first {
                bytes.append(UInt8(ascii: ","))
                if pretty {
                    bytes.append(UInt8(ascii: "\n"))
                    writeIndent()
                }
            }
            first = false
            writeString(key)
            append(pretty ? " : " : ":")
            try writeValue(object[key]!, key: key)
        }
        if pretty {
            bytes.append(UInt8(ascii: "\n"))
            indent -= 2
            writeIndent()
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func write<Element>(_ array: [Element], key: String) throws {
        bytes.append(UInt8(ascii: "["))
        if pretty {
            bytes.append(UInt8(ascii: "\n"))
            indent += 2
        }
        for (index, element) in array.enumerated() {
            if index > 0 {
                bytes.append(UInt8(ascii: ","))
                if pretty { bytes.append(UInt8(ascii: "\n")) }
            }
            if pretty { writeIndent() }
            try writeValue(element, key: key)
        }
        if pretty {
            bytes.append(UInt8(ascii: "\n"))
            indent -= 2
            writeIndent()
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// The types the stats objects hold are recognized by their identity: a failing `as?` from
    /// `Any` makes the runtime search every protocol conformance in the process the first time
    /// (for a bridge to Foundation), which was most of what the stats JSON cost
    /// (results/profile.md section 21). Any other type goes through ``writeCast(_:key:)``.
    private mutating func writeValue(_ value: Any, key: String) throws {
        let type = type(of: value)
        if type == String.self {
            writeString(value as! String)
        } else if type == Int.self {
            append(String(value as! Int))
        } else if type == Int64.self {
            append(String(value as! Int64))
        } else if type == Double.self {
            try writeDouble(value as! Double, key: key)
        } else if type == Bool.self {
            append(value as! Bool ? "true" : "false")
        } else if type == StatsJSON.Null.self {
            append("null")
        } else if type == [String: Any].self {
            try write(value as! [String: Any])
        } else if type == [String: Int].self {
            try write(value as! [String: Int])
        } else if type == [[String: Any]].self {
            try write(value as! [[String: Any]], key: key)
        } else {
            try writeCast(value, key: key)
        }
    }

    // The order of the casts is JSONSerialization's, so a value that would pass more than one
    // is written the same way.
    private mutating func writeCast(_ value: Any, key: String) throws {
        castKeys.append(key)
        switch value {
        case let string as String: writeString(string)
        case let bool as Bool: append(bool ? "true" : "false")
        case let number as Int: append(String(number))
        case let number as Int64: append(String(number))
        case let number as Int32: append(String(number))
        case let number as UInt: append(String(number))
        case let number as UInt64: append(String(number))
        case let number as UInt32: append(String(number))
        case let number as UInt16: append(String(number))
        case let number as UInt8: append(String(number))
        case let array as [Any]: try write(array, key: key)
        case let object as [String: Any]: try write(object)
        case let number as Double: try writeDouble(number, key: key)
        case is StatsJSON.Null: append("null")
        default:
            throw StatsJSON.InvalidValue(description: "stats JSON: '\(key)' holds a \(type(of: value)), which it cannot write")
        }
    }

    /// Shortest text that reads back as `number`, without a trailing `.0`.
    private mutating func writeDouble(_ number: Double, key: String) throws {
        guard number.isFinite else {
            throw StatsJSON.InvalidValue(description: "stats JSON: '\(key)' is \(number), which JSON cannot write")
        }
        var text = number.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        append(text)
    }

    /// `text` in quotes: `"`, `\` and `/` escaped with a backslash, control characters as `\b`,
    /// `\f`, `\n`, `\r`, `\t` or `\u00xx`, everything else as its UTF-8 bytes.
    private mutating func writeString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0x08: append("\\b")
            case 0x0C: append("\\f")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                append("\\u00")
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func writeIndent() {
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent))
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}
