/// Why a YUV4MPEG2 stream was rejected. `description` is one line fit for users.
public enum Y4MError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stream does not start with "YUV4MPEG2 ".
    case notY4M
    /// The header line has no newline within 1024 bytes.
    case headerTooLong
    /// A required header field (W, H or F) is absent.
    case missingField(String)
    /// A header token could not be read.
    case badField(String)
    /// Width or height is zero, odd, or above 16384.
    case badDimension(name: String, value: Int)
    /// A colorspace other than 8-bit 4:2:0.
    case unsupportedColorspace(String)
    /// Where a frame should start, something other than a FRAME line was found.
    case badFrameMarker(frame: Int)
    /// A FRAME line has no newline within 1024 bytes.
    case frameLineTooLong(frame: Int)
    /// The input ended inside the header line.
    case truncatedHeader
    /// The input ended inside a frame (its line or its pixels).
    case truncatedFrame(frame: Int, got: Int, expected: Int)

    /// One line, prefixed "y4m:", naming what was wrong.
    public var description: String {
        switch self {
        case .notY4M: return "y4m: not a YUV4MPEG2 stream (missing 'YUV4MPEG2 ' signature)"
        case .headerTooLong: return "y4m: header line longer than \(Y4MReader.maxLineBytes) bytes"
        case .missingField(let field): return "y4m: header lacks \(field)"
        case .badField(let token): return "y4m: bad header field '\(token)'"
        case .badDimension(let name, let value):
            return "y4m: \(name) \(value) not supported (must be even, 2...\(Y4MHeader.maxDimension))"
        case .unsupportedColorspace(let name): return "y4m: unsupported colorspace C\(name) (only 8-bit 4:2:0)"
        case .badFrameMarker(let frame): return "y4m: frame \(frame): expected a FRAME line"
        case .frameLineTooLong(let frame):
            return "y4m: frame \(frame): FRAME line longer than \(Y4MReader.maxLineBytes) bytes"
        case .truncatedHeader: return "y4m: input ended inside the header line"
        case .truncatedFrame(let frame, let got, let expected):
            return "y4m: truncated frame \(frame): got \(got) of \(expected) bytes"
        }
    }
}

/// Field order of a YUV4MPEG2 stream (the I header token).
public enum Y4MInterlacing: String, Sendable, Hashable {
    /// Ip, or no I token.
    case progressive = "p"
    /// It.
    case topFieldFirst = "t"
    /// Ib.
    case bottomFieldFirst = "b"
    /// Im: given per frame.
    case mixed = "m"
    /// I?.
    case unknown = "?"
}

/// The 8-bit 4:2:0 colorspaces supported (the C header token); they differ only in chroma siting.
public enum Y4MColorspace: String, Sendable, Hashable {
    /// C420jpeg, also the default when there is no C token.
    case c420jpeg = "420jpeg"
    /// C420.
    case c420 = "420"
    /// C420paldv.
    case c420paldv = "420paldv"
    /// C420mpeg2.
    case c420mpeg2 = "420mpeg2"
}

/// The "YUV4MPEG2 " stream header.
public struct Y4MHeader: Sendable, Hashable {
    /// Largest width or height accepted.
    public static let maxDimension = 16_384

    /// Luma width in pixels (even).
    public var width: Int
    /// Luma height in pixels (even).
    public var height: Int
    /// Frame rate numerator (F token).
    public var frameRateNumerator: Int
    /// Frame rate denominator (F token).
    public var frameRateDenominator: Int
    /// Field order (I token), progressive when absent.
    public var interlacing: Y4MInterlacing
    /// Pixel aspect ratio (A token); 0:0 when unknown or absent.
    public var pixelAspect: (numerator: Int, denominator: Int)
    /// Chroma siting (C token), C420jpeg when absent.
    public var colorspace: Y4MColorspace
    /// X tokens (without the X), kept verbatim.
    public var extensions: [String]

    /// Bytes of one frame: width * height luma plus two quarter-size chroma planes; nil
    /// when the fields are negative or the size overflows `Int`.
    public var frameByteCount: Int? {
        guard width >= 0, height >= 0 else { return nil }
        let (luma, lumaOverflow) = width.multipliedReportingOverflow(by: height)
        let (chroma, chromaOverflow) = (width / 2).multipliedReportingOverflow(by: height / 2)
        let (bothChroma, doubleOverflow) = chroma.multipliedReportingOverflow(by: 2)
        let (total, sumOverflow) = luma.addingReportingOverflow(bothChroma)
        return lumaOverflow || chromaOverflow || doubleOverflow || sumOverflow ? nil : total
    }

    /// Equal when every field is.
    public static func == (lhs: Y4MHeader, rhs: Y4MHeader) -> Bool {
        lhs.width == rhs.width && lhs.height == rhs.height && lhs.frameRateNumerator == rhs.frameRateNumerator
            && lhs.frameRateDenominator == rhs.frameRateDenominator && lhs.interlacing == rhs.interlacing
            && lhs.pixelAspect == rhs.pixelAspect && lhs.colorspace == rhs.colorspace
            && lhs.extensions == rhs.extensions
    }

    /// Hashes every field.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(width)
        hasher.combine(height)
        hasher.combine(frameRateNumerator)
        hasher.combine(frameRateDenominator)
        hasher.combine(interlacing)
        hasher.combine(pixelAspect.numerator)
        hasher.combine(pixelAspect.denominator)
        hasher.combine(colorspace)
        hasher.combine(extensions)
    }

    /// Parses the header line, without its trailing newline, e.g.
    /// `YUV4MPEG2 W1280 H720 F30:1 Ip A1:1 C420jpeg`.
    public init(line: [UInt8]) throws(Y4MError) {
        let signature = Array("YUV4MPEG2".utf8)
        guard line.count >= signature.count, Array(line[0..<signature.count]) == signature,
            line.count == signature.count || line[signature.count] == 0x20
        else { throw .notY4M }
        var width: Int?
        var height: Int?
        var rate: (Int, Int)?
        interlacing = .progressive
        pixelAspect = (0, 0)
        colorspace = .c420jpeg
        extensions = []
        for tokenBytes in line[signature.count...].split(separator: 0x20) {
            let token = String(decoding: tokenBytes, as: UTF8.self)
            let value = String(token.dropFirst())
            switch token.first {
            case "W": width = try Self.number(value, token: token)
            case "H": height = try Self.number(value, token: token)
            case "F": rate = try Self.ratio(value, token: token)
            case "A": pixelAspect = try Self.ratio(value, token: token)
            case "I":
                guard let mode = Y4MInterlacing(rawValue: value) else { throw .badField(Self.printable(token)) }
                interlacing = mode
            case "C":
                guard let space = Y4MColorspace(rawValue: value) else {
                    throw .unsupportedColorspace(Self.printable(value))
                }
                colorspace = space
            case "X": extensions.append(value)
            default: throw .badField(Self.printable(token))
            }
        }
        guard let width else { throw .missingField("width (W)") }
        guard let height else { throw .missingField("height (H)") }
        guard let rate else { throw .missingField("frame rate (F)") }
        for (name, value) in [("width", width), ("height", height)]
        where value < 2 || value > Self.maxDimension || value % 2 != 0 {
            throw .badDimension(name: name, value: value)
        }
        guard rate.0 > 0, rate.1 > 0 else { throw .badField("F\(rate.0):\(rate.1)") }
        self.width = width
        self.height = height
        self.frameRateNumerator = rate.0
        self.frameRateDenominator = rate.1
    }

    /// The header line this header would be written as (with its newline).
    public var line: [UInt8] {
        var text = "YUV4MPEG2 W\(width) H\(height) F\(frameRateNumerator):\(frameRateDenominator) I\(interlacing.rawValue)"
        text += " A\(pixelAspect.numerator):\(pixelAspect.denominator) C\(colorspace.rawValue)"
        for item in extensions { text += " X\(item)" }
        return Array((text + "\n").utf8)
    }

    /// Decimal digits only, at most 9 of them, so no overflow is possible.
    private static func number(_ text: String, token: String) throws(Y4MError) -> Int {
        guard !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(text)
        else { throw .badField(printable(token)) }
        return value
    }

    private static func ratio(_ text: String, token: String) throws(Y4MError) -> (Int, Int) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw .badField(printable(token)) }
        return (try number(String(parts[0]), token: token), try number(String(parts[1]), token: token))
    }

    /// Input echoed in an error: printable ASCII only, at most 32 characters.
    static func printable(_ text: String) -> String {
        let cleaned = text.unicodeScalars.prefix(32).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" }
        return String(cleaned) + (text.unicodeScalars.count > 32 ? "..." : "")
    }
}

/// One decoded picture: the three 8-bit planes back to back (Y, then Cb, then Cr).
public struct Y4MFrame: Sendable, Hashable {
    /// Luma width.
    public var width: Int
    /// Luma height.
    public var height: Int
    /// Y plane (width * height), then Cb and Cr (each width/2 * height/2).
    public var data: [UInt8]
    /// Parameters on the FRAME line, if any (e.g. "Ip"), verbatim.
    public var parameters: [String]

    /// Makes a frame; `data` must hold width * height * 3 / 2 bytes.
    public init(width: Int, height: Int, data: [UInt8], parameters: [String] = []) {
        self.width = width
        self.height = height
        self.data = data
        self.parameters = parameters
    }

    /// Where the Cb plane starts in `data`.
    public var cbOffset: Int { width * height }
    /// Where the Cr plane starts in `data`.
    public var crOffset: Int { width * height + (width / 2) * (height / 2) }
    /// The Y plane.
    public var luma: ArraySlice<UInt8> { data[0..<cbOffset] }
    /// The Cb plane.
    public var cb: ArraySlice<UInt8> { data[cbOffset..<crOffset] }
    /// The Cr plane.
    public var cr: ArraySlice<UInt8> { data[crOffset...] }
}

/// Incremental YUV4MPEG2 reader: feed it bytes as they come, get whole frames back.
/// It buffers at most one line (1024 bytes) and one frame. After an error every later
/// call throws the same error.
///
/// A file reader can skip the copy out of its read buffer: while ``pixelBytesWanted`` is
/// above 0, ``readPixels(_:)`` lends the frame's own unfilled bytes to read(2); and a frame
/// given back with ``reuseStorage(of:)`` holds the next one, with no allocation per frame.
public struct Y4MReader: Sendable {
    /// Longest header or FRAME line accepted, newline included.
    public static let maxLineBytes = 1024

    private enum State: Sendable {
        case header
        case frameLine
        case frameData(parameters: [String])
        case failed(Y4MError)
    }

    private var state = State.header
    private var line: [UInt8] = []
    /// The frame being read: `frameSize` bytes from its FRAME line on (the first `filled`
    /// of them read), empty between frames.
    private var frameBytes: [UInt8] = []
    private var filled = 0
    /// Storage given back by ``reuseStorage(of:)``, for the next frame.
    private var spare: [UInt8] = []
    private var frameSize = 0

    /// The stream header, once its line has been read.
    public private(set) var header: Y4MHeader?
    /// Frames returned so far.
    public private(set) var framesRead = 0

    /// Makes a reader at the start of a stream.
    public init() {}

    /// Consumes `bytes` and returns the frames they completed, in order.
    public mutating func append(_ bytes: [UInt8]) throws(Y4MError) -> [Y4MFrame] {
        let result: Result<[Y4MFrame], Y4MError> = bytes.withUnsafeBytes { buffer in
            do throws(Y4MError) { return .success(try append(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Consumes `bytes` and returns the frames they completed, in order.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) throws(Y4MError) -> [Y4MFrame] {
        var frames = [Y4MFrame]()
        var offset = 0
        while offset < bytes.count {
            switch state {
            case .failed(let error):
                throw error
            case .header, .frameLine:
                if try takeLine(bytes, from: &offset) { try handleLine() }
            case .frameData:
                let take = min(frameSize - filled, bytes.count - offset)
                let source = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)])
                let done = filled
                frameBytes.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: done).copyMemory(from: source.baseAddress!, byteCount: take) }
                filled += take
                offset += take
                if let frame = completeFrame() { frames.append(frame) }
            }
        }
        if case .failed(let error) = state { throw error }
        return frames
    }

    /// Pixel bytes the frame being read still lacks: above 0 only between a FRAME line and the
    /// frame's last byte, when ``readPixels(_:)`` can fill them in place.
    public var pixelBytesWanted: Int {
        if case .frameData = state { return frameSize - filled }
        return 0
    }

    /// Fills the frame being read in place: `read` gets the frame's unfilled bytes (all that
    /// ``pixelBytesWanted`` counts) and returns how many it wrote from their start (0 or less:
    /// none). Returns the frame once its last byte is in, else nil; does not call `read`
    /// when ``pixelBytesWanted`` is 0. With read(2) as `read`, a frame's pixels are copied
    /// once, from the kernel into the frame.
    public mutating func readPixels(_ read: (UnsafeMutableRawBufferPointer) -> Int) -> Y4MFrame? {
        guard pixelBytesWanted > 0 else { return nil }
        let done = filled
        let count = frameBytes.withUnsafeMutableBytes { read(UnsafeMutableRawBufferPointer(rebasing: $0[done...])) }
        filled += min(max(count, 0), frameSize - done)
        return completeFrame()
    }

    /// Takes `frame`'s storage back for a later frame of the same size, so reading a stream
    /// allocates once (give it back once nothing else holds `frame.data`, or the next frame
    /// copies it).
    public mutating func reuseStorage(of frame: consuming Y4MFrame) {
        guard frame.data.count == frameSize else { return }
        spare = frame.data
    }

    /// The frame, when its last byte is in; the reader then waits for the next FRAME line.
    private mutating func completeFrame() -> Y4MFrame? {
        guard case .frameData(let parameters) = state, filled == frameSize, let header else { return nil }
        let frame = Y4MFrame(width: header.width, height: header.height, data: frameBytes, parameters: parameters)
        framesRead += 1
        frameBytes = []
        filled = 0
        state = .frameLine
        return frame
    }

    /// Declares the end of input. Throws if the stream ended inside the header, a FRAME
    /// line or a frame's pixels: a truncated last frame is an error, not dropped silently.
    public func finish() throws(Y4MError) {
        switch state {
        case .failed(let error): throw error
        case .header: throw line.isEmpty && header == nil ? .notY4M : .truncatedHeader
        case .frameLine:
            if !line.isEmpty {
                throw .truncatedFrame(frame: framesRead, got: 0, expected: frameSize)
            }
        case .frameData:
            throw .truncatedFrame(frame: framesRead, got: filled, expected: frameSize)
        }
    }

    /// Moves bytes up to a newline into `line`, consuming the newline. False if no newline yet.
    private mutating func takeLine(_ bytes: UnsafeRawBufferPointer, from offset: inout Int) throws(Y4MError) -> Bool {
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if byte == 0x0A { return true }
            line.append(byte)
            if line.count >= Self.maxLineBytes {
                throw fail(isHeaderLine ? .headerTooLong : .frameLineTooLong(frame: framesRead))
            }
            // Reject a wrong frame marker early rather than buffering a line of pixels.
            if !isHeaderLine && line.count <= 5 && line[line.count - 1] != Array("FRAME".utf8)[line.count - 1] {
                throw fail(.badFrameMarker(frame: framesRead))
            }
        }
        return false
    }

    private var isHeaderLine: Bool {
        if case .header = state { return true }
        return false
    }

    /// Enters the failed state (dropping buffers) and returns the error to throw.
    private mutating func fail(_ error: Y4MError) -> Y4MError {
        state = .failed(error)
        line = []
        frameBytes = []
        spare = []
        filled = 0
        return error
    }

    private mutating func handleLine() throws(Y4MError) {
        defer { line.removeAll(keepingCapacity: true) }
        if isHeaderLine {
            let parsed: Y4MHeader
            do {
                parsed = try Y4MHeader(line: line)
            } catch {
                throw fail(error)
            }
            guard let size = parsed.frameByteCount else {
                throw fail(.badDimension(name: "frame size", value: parsed.width))
            }
            header = parsed
            frameSize = size
            state = .frameLine
            return
        }
        guard line.count >= 5, Array(line[0..<5]) == Array("FRAME".utf8), line.count == 5 || line[5] == 0x20 else {
            throw fail(.badFrameMarker(frame: framesRead))
        }
        let parameters = line.count == 5 ? [] : line[5...].split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        if spare.count == frameSize {
            swap(&frameBytes, &spare)
        } else {
            // Every byte is written before the frame is handed out (`filled` counts them, and an
            // error reports only the count), so the storage need not be zeroed first: that would
            // touch every page of a frame the input may never fill.
            frameBytes = [UInt8](unsafeUninitializedCapacity: frameSize) { _, count in count = frameSize }
        }
        state = .frameData(parameters: parameters)
    }
}
