/// One 8-bit 4:2:0 picture (I420): the luma plane, then Cb, then Cr, each tightly
/// packed (strides equal the plane widths), `width * height * 3 / 2` bytes in all.
///
/// Width and height are even, so both chroma planes are exactly
/// `width / 2` by `height / 2`.
public struct YUV420Frame: Sendable, Equatable {
    /// Luma width in pixels (even).
    public let width: Int
    /// Luma height in pixels (even).
    public let height: Int
    /// Y, then Cb, then Cr, tightly packed.
    public var bytes: [UInt8]

    /// Wraps existing I420 bytes. Traps when the sizes are odd or negative or
    /// `bytes.count` is not `width * height * 3 / 2`: that is a caller bug.
    public init(width: Int, height: Int, bytes: [UInt8]) {
        precondition(width >= 0 && height >= 0 && width % 2 == 0 && height % 2 == 0,
                     "YUV420Frame needs even, non-negative sizes, got \(width)x\(height)")
        precondition(bytes.count == Self.byteCount(width: width, height: height),
                     "YUV420Frame \(width)x\(height) needs \(Self.byteCount(width: width, height: height)) bytes, got \(bytes.count)")
        self.width = width
        self.height = height
        self.bytes = bytes
    }

    /// A black picture (Y = 16, Cb = Cr = 128, video range).
    public init(blackWithWidth width: Int, height: Int) {
        precondition(width >= 0 && height >= 0 && width % 2 == 0 && height % 2 == 0,
                     "YUV420Frame needs even, non-negative sizes, got \(width)x\(height)")
        let lumaCount = width * height
        var bytes = [UInt8](repeating: 128, count: Self.byteCount(width: width, height: height))
        bytes.withUnsafeMutableBufferPointer { $0[0..<lumaCount].update(repeating: 16) }
        self.init(width: width, height: height, bytes: bytes)
    }

    /// Bytes of an I420 picture of this size: `width * height * 3 / 2`.
    public static func byteCount(width: Int, height: Int) -> Int {
        width * height + 2 * (width / 2) * (height / 2)
    }

    /// Width of each chroma plane: `width / 2`.
    public var chromaWidth: Int { width / 2 }
    /// Height of each chroma plane: `height / 2`.
    public var chromaHeight: Int { height / 2 }

    /// Index range of the luma plane in ``bytes``.
    public var lumaRange: Range<Int> { 0..<(width * height) }
    /// Index range of the Cb plane in ``bytes``.
    public var cbRange: Range<Int> {
        let start = width * height
        return start..<(start + chromaWidth * chromaHeight)
    }
    /// Index range of the Cr plane in ``bytes``.
    public var crRange: Range<Int> {
        let start = cbRange.upperBound
        return start..<(start + chromaWidth * chromaHeight)
    }

    /// The luma plane (a view into ``bytes``, no copy).
    public var luma: ArraySlice<UInt8> { bytes[lumaRange] }
    /// The Cb plane (a view into ``bytes``, no copy).
    public var cb: ArraySlice<UInt8> { bytes[cbRange] }
    /// The Cr plane (a view into ``bytes``, no copy).
    public var cr: ArraySlice<UInt8> { bytes[crRange] }

    /// Calls `body` with the three planes as raw buffers, valid only inside `body`.
    public func withPlanes<R, E: Error>(
        _ body: (_ luma: UnsafeRawBufferPointer, _ cb: UnsafeRawBufferPointer, _ cr: UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        let (lumaRange, cbRange, crRange) = (lumaRange, cbRange, crRange)
        let result: Result<R, E> = bytes.withUnsafeBytes { all in
            Result { () throws(E) -> R in
                try body(UnsafeRawBufferPointer(rebasing: all[lumaRange]),
                         UnsafeRawBufferPointer(rebasing: all[cbRange]),
                         UnsafeRawBufferPointer(rebasing: all[crRange]))
            }
        }
        return try result.get()
    }
}
