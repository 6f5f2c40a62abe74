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
/// Rendering copies precomputed rows and fills rectangles, with no allocation;
/// drawn over the picture before it (``render(frameIndex:into:replacing:)``), only
/// what changed is drawn, about a fifth of the pixels.
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
        render(frameIndex: index, into: &frame, replacing: nil)
    }

    /// Draws picture number `index` into `frame`, which shows picture `previous` as this
    /// source drew it (nil: unknown): then only what differs is drawn (the scrolling ramp and
    /// its noise, the counter cells whose bit changed, the box's old and new places), about a
    /// fifth of the pixels; the result equals ``render(frameIndex:into:)``'s. Traps when
    /// `frame` is not this source's size or an index is negative.
    public func render(frameIndex index: Int, into frame: inout YUV420Frame, replacing previous: Int?) {
        precondition(index >= 0 && (previous ?? 0) >= 0, "frame index must not be negative, got \(index)")
        precondition(frame.width == width && frame.height == height,
                     "frame is \(frame.width)x\(frame.height), source is \(width)x\(height)")
        guard previous != index else { return }
        let (cbStart, crStart) = (frame.cbRange.lowerBound, frame.crRange.lowerBound)
        let box = boxRect(frameIndex: index)
        frame.bytes.withUnsafeMutableBufferPointer { pixels in
            let planes = Planes(luma: UnsafeMutableBufferPointer(rebasing: pixels[0..<cbStart]),
                                cb: UnsafeMutableBufferPointer(rebasing: pixels[cbStart..<crStart]),
                                cr: UnsafeMutableBufferPointer(rebasing: pixels[crStart...]))
            if let previous {
                // The ramp band changes every frame; the counter only in the cells whose bit
                // flipped; the box leaves its old place, where the background shows again.
                drawLuma(planes, rows: barsBottom..<rampBottom, columns: 0..<width, frameIndex: index)
                let cell = counterCellWidth
                for bit in 0..<16 where ((index ^ previous) >> bit) & 1 == 1 && bit * cell < width {
                    drawLuma(planes, rows: rampBottom..<height, columns: (bit * cell)..<min((bit + 1) * cell, width),
                             frameIndex: index)
                }
                let old = boxRect(frameIndex: previous)
                drawLuma(planes, rows: old.y..<(old.y + old.height), columns: old.x..<(old.x + old.width), frameIndex: index)
                drawChroma(planes, rows: (old.y / 2)..<((old.y + old.height) / 2),
                           columns: (old.x / 2)..<((old.x + old.width) / 2))
            } else {
                drawLuma(planes, rows: 0..<height, columns: 0..<width, frameIndex: index)
                drawChroma(planes, rows: 0..<(height / 2), columns: 0..<(width / 2))
            }
            drawBox(planes, box)
        }
    }

    /// The three planes of a frame being drawn.
    private struct Planes {
        var luma: UnsafeMutableBufferPointer<UInt8>
        var cb: UnsafeMutableBufferPointer<UInt8>
        var cr: UnsafeMutableBufferPointer<UInt8>
    }

    /// Width of one cell of the counter strip (16 cells, one per bit of the frame index).
    private var counterCellWidth: Int { max(2, (width / 16) & ~1) }

    /// Draws the background (no box) of picture `index` in a rectangle of the luma plane: bars
    /// on top, the scrolled ramp with fresh noise on its right half in the middle band, the
    /// counter strip at the bottom.
    private func drawLuma(_ planes: Planes, rows: Range<Int>, columns: Range<Int>, frameIndex index: Int) {
        guard !columns.isEmpty else { return }
        let luma = planes.luma
        let scroll = (index * 4) & 255
        let cell = counterCellWidth
        barLumaRow.withUnsafeBufferPointer { bars in
            rampRow.withUnsafeBufferPointer { ramp in
                for row in rows {
                    let line = UnsafeMutableBufferPointer(rebasing: luma[(row * width)..<((row + 1) * width)])
                    if row < barsBottom {
                        _ = UnsafeMutableBufferPointer(rebasing: line[columns])
                            .update(fromContentsOf: UnsafeBufferPointer(rebasing: bars[columns]))
                    } else if row < rampBottom {
                        _ = UnsafeMutableBufferPointer(rebasing: line[columns])
                            .update(fromContentsOf: UnsafeBufferPointer(rebasing: ramp[(scroll + columns.lowerBound)..<(scroll + columns.upperBound)]))
                    } else {
                        // Cell `bit` is bright when that bit of the index is set; past the 16th, dark.
                        var x = columns.lowerBound
                        while x < columns.upperBound {
                            let bit = x / cell
                            let end = bit < 16 ? min((bit + 1) * cell, columns.upperBound) : columns.upperBound
                            UnsafeMutableBufferPointer(rebasing: line[x..<end])
                                .update(repeating: bit < 16 && (index >> bit) & 1 == 1 ? 235 : 16)
                            x = end
                        }
                    }
                }
            }
        }
        // Fresh noise on the right half of the ramp band, like sensor noise:
        // it keeps rate control honest (more bitrate buys visibly more bytes).
        let seed = UInt32(truncatingIfNeeded: index) &* 0x9E37_79B1
        let noiseColumns = max(columns.lowerBound, width / 2)..<max(columns.upperBound, width / 2)
        let noiseTop = max(rows.lowerBound, barsBottom)
        for row in noiseTop..<max(min(rows.upperBound, rampBottom), noiseTop) where !noiseColumns.isEmpty {
            // The pixel's index in the plane, as a 32-bit counter (the hash's input), stepping
            // with `x`: a loop of 32-bit lanes the compiler can vectorize.
            var position = UInt32(truncatingIfNeeded: row * width + noiseColumns.lowerBound)
            let line = UnsafeMutableBufferPointer(rebasing: luma[(row * width + noiseColumns.lowerBound)..<(row * width + noiseColumns.upperBound)])
            for x in line.indices {
                var hash = position &* 0x85EB_CA6B ^ seed
                hash ^= hash >> 13
                hash = hash &* 0xC2B2_AE35
                line[x] = UInt8(truncatingIfNeeded: hash >> 24)
                position &+= 1
            }
        }
    }

    /// Draws the background chroma (bars' colours on top, grey below) in a rectangle of the
    /// chroma planes.
    private func drawChroma(_ planes: Planes, rows: Range<Int>, columns: Range<Int>) {
        guard !columns.isEmpty else { return }
        let chromaWidth = width / 2
        barCbRow.withUnsafeBufferPointer { barCb in
            barCrRow.withUnsafeBufferPointer { barCr in
                for row in rows {
                    let range = (row * chromaWidth + columns.lowerBound)..<(row * chromaWidth + columns.upperBound)
                    if 2 * row < barsBottom {
                        _ = UnsafeMutableBufferPointer(rebasing: planes.cb[range])
                            .update(fromContentsOf: UnsafeBufferPointer(rebasing: barCb[columns]))
                        _ = UnsafeMutableBufferPointer(rebasing: planes.cr[range])
                            .update(fromContentsOf: UnsafeBufferPointer(rebasing: barCr[columns]))
                    } else {
                        UnsafeMutableBufferPointer(rebasing: planes.cb[range]).update(repeating: 128)
                        UnsafeMutableBufferPointer(rebasing: planes.cr[range]).update(repeating: 128)
                    }
                }
            }
        }
    }

    /// The bouncing box: an 8-pixel checkerboard that moves with it, orange chroma.
    private func drawBox(_ planes: Planes, _ box: (x: Int, y: Int, width: Int, height: Int)) {
        let chromaWidth = width / 2
        for y in 0..<box.height {
            let rowStart = (box.y + y) * width + box.x
            let phase = (y >> 3) & 1
            for x in 0..<box.width {
                planes.luma[rowStart + x] = ((x >> 3) & 1) ^ phase == 0 ? 235 : 60
            }
        }
        for y in 0..<(box.height / 2) {
            let rowStart = (box.y / 2 + y) * chromaWidth + box.x / 2
            UnsafeMutableBufferPointer(rebasing: planes.cb[rowStart..<(rowStart + box.width / 2)]).update(repeating: 70)
            UnsafeMutableBufferPointer(rebasing: planes.cr[rowStart..<(rowStart + box.width / 2)]).update(repeating: 190)
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
