/// A moving test pattern generated in process, for tests, benchmarks and a
/// camera-less sender.
///
/// The picture is a pure function of the frame index: 75% color bars on the
/// top two thirds, a luma ramp that scrolls left by 4 pixels a frame next to
/// a patch of fresh noise (so more bitrate buys more bytes), a strip
/// of 16 cells showing the frame index in binary at the bottom, and a
/// checkered box bouncing across everything. Consecutive frames always differ
/// and the box and ramp give the encoder real motion to find.
///
/// Rendering copies precomputed rows and fills rectangles, with no per-pixel
/// allocation; 1280x720 takes well under a millisecond in release builds.
public struct SyntheticSource: Sendable {
    /// Picture width in pixels (even).
    public let width: Int
    /// Picture height in pixels (even).
    public let height: Int

    /// One row of the color bars, per plane.
    private let barLumaRow: [UInt8]
    private let barCbRow: [UInt8]
    private let barCrRow: [UInt8]
    /// A 0...255 sawtooth, `width + 256` long: any `width` window is a scrolled ramp.
    private let rampRow: [UInt8]
    /// Last row (exclusive) of the bars and of the ramp band; even, so chroma rows line up.
    private let barsBottom: Int
    private let rampBottom: Int

    /// 75% color bars (BT.601, video range): white, yellow, cyan, green,
    /// magenta, red, blue, black as (Y, Cb, Cr).
    private static let bars: [(UInt8, UInt8, UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58),
        (84, 184, 198), (65, 100, 212), (35, 212, 114), (16, 128, 128),
    ]

    /// Makes a source for `width` x `height` frames. Traps when either is
    /// odd or not positive: that is a caller bug.
    public init(width: Int, height: Int) {
        precondition(width > 0 && height > 0 && width % 2 == 0 && height % 2 == 0,
                     "SyntheticSource needs even, positive sizes, got \(width)x\(height)")
        self.width = width
        self.height = height
        let bars = Self.bars
        barLumaRow = (0..<width).map { bars[$0 * bars.count / width].0 }
        barCbRow = (0..<(width / 2)).map { bars[2 * $0 * bars.count / width].1 }
        barCrRow = (0..<(width / 2)).map { bars[2 * $0 * bars.count / width].2 }
        rampRow = (0..<(width + 256)).map { UInt8(truncatingIfNeeded: $0) }
        barsBottom = (height * 2 / 3) & ~1
        rampBottom = (height * 5 / 6) & ~1
    }

    /// A new frame showing picture number `index` (0 or more).
    public func frame(at index: Int) -> YUV420Frame {
        var frame = YUV420Frame(width: width, height: height,
                                bytes: [UInt8](repeating: 0, count: YUV420Frame.byteCount(width: width, height: height)))
        render(frameIndex: index, into: &frame)
        return frame
    }

    /// Draws picture number `index` (0 or more) into `frame`, reusing its
    /// storage. Traps when `frame` is not this source's size.
    public func render(frameIndex index: Int, into frame: inout YUV420Frame) {
        precondition(index >= 0, "frame index must not be negative, got \(index)")
        precondition(frame.width == width && frame.height == height,
                     "frame is \(frame.width)x\(frame.height), source is \(width)x\(height)")
        let (width, height, chromaWidth) = (width, height, width / 2)
        let (cbStart, crStart) = (frame.cbRange.lowerBound, frame.crRange.lowerBound)
        let box = boxRect(frameIndex: index)
        let scroll = (index * 4) & 255
        let counterCell = max(2, (width / 16) & ~1)

        frame.bytes.withUnsafeMutableBufferPointer { pixels in
            let luma = UnsafeMutableBufferPointer(rebasing: pixels[0..<cbStart])
            let cb = UnsafeMutableBufferPointer(rebasing: pixels[cbStart..<crStart])
            let cr = UnsafeMutableBufferPointer(rebasing: pixels[crStart...])

            // Bars, ramp and counter strip: row copies.
            var counterRow = [UInt8](repeating: 16, count: width)
            for cell in 0..<16 where (index >> cell) & 1 == 1 {
                let start = min(cell * counterCell, width)
                counterRow[start..<min(start + counterCell, width)].withUnsafeMutableBufferPointer {
                    $0.update(repeating: 235)
                }
            }
            rampRow.withUnsafeBufferPointer { ramp in
                counterRow.withUnsafeBufferPointer { counter in
                    barLumaRow.withUnsafeBufferPointer { bars in
                        for row in 0..<height {
                            let source = row < barsBottom ? bars
                                : row < rampBottom ? UnsafeBufferPointer(rebasing: ramp[scroll..<(scroll + width)])
                                : counter
                            _ = UnsafeMutableBufferPointer(rebasing: luma[(row * width)..<((row + 1) * width)])
                                .update(fromContentsOf: source)
                        }
                    }
                }
            }
            barCbRow.withUnsafeBufferPointer { barCb in
                barCrRow.withUnsafeBufferPointer { barCr in
                    for row in 0..<(height / 2) {
                        let range = (row * chromaWidth)..<((row + 1) * chromaWidth)
                        if 2 * row < barsBottom {
                            _ = UnsafeMutableBufferPointer(rebasing: cb[range]).update(fromContentsOf: barCb)
                            _ = UnsafeMutableBufferPointer(rebasing: cr[range]).update(fromContentsOf: barCr)
                        } else {
                            UnsafeMutableBufferPointer(rebasing: cb[range]).update(repeating: 128)
                            UnsafeMutableBufferPointer(rebasing: cr[range]).update(repeating: 128)
                        }
                    }
                }
            }

            // Fresh noise on the right half of the ramp band, like sensor noise:
            // it keeps rate control honest (more bitrate buys visibly more bytes).
            let seed = UInt32(truncatingIfNeeded: index) &* 0x9E37_79B1
            for row in barsBottom..<rampBottom {
                let rowStart = row * width
                for x in (width / 2)..<width {
                    var hash = UInt32(truncatingIfNeeded: rowStart + x) &* 0x85EB_CA6B ^ seed
                    hash ^= hash >> 13
                    hash = hash &* 0xC2B2_AE35
                    luma[rowStart + x] = UInt8(truncatingIfNeeded: hash >> 24)
                }
            }

            // The bouncing box: an 8-pixel checkerboard that moves with it, orange chroma.
            for y in 0..<box.height {
                let rowStart = (box.y + y) * width + box.x
                let phase = (y >> 3) & 1
                for x in 0..<box.width {
                    luma[rowStart + x] = ((x >> 3) & 1) ^ phase == 0 ? 235 : 60
                }
            }
            for y in 0..<(box.height / 2) {
                let rowStart = (box.y / 2 + y) * chromaWidth + box.x / 2
                UnsafeMutableBufferPointer(rebasing: cb[rowStart..<(rowStart + box.width / 2)]).update(repeating: 70)
                UnsafeMutableBufferPointer(rebasing: cr[rowStart..<(rowStart + box.width / 2)]).update(repeating: 190)
            }
        }
    }

    /// The box's place in frame `index`: even-aligned, an eighth of the picture
    /// each way, bouncing off the edges at different speeds in x and y.
    private func boxRect(frameIndex index: Int) -> (x: Int, y: Int, width: Int, height: Int) {
        let boxWidth = max(2, (width / 8) & ~1)
        let boxHeight = max(2, (height / 8) & ~1)
        func bounce(speed: Int, within span: Int) -> Int {
            guard span > 0 else { return 0 }
            let period = 2 * span
            let phase = (index % period) * speed % period
            return (phase < span ? phase : 2 * span - phase) & ~1
        }
        return (bounce(speed: 6, within: width - boxWidth),
                bounce(speed: 4, within: height - boxHeight),
                boxWidth, boxHeight)
    }
}
