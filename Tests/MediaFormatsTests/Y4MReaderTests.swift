import Testing
import TestSupport
@testable import MediaFormats

private func makeStream(width: Int, height: Int, frames: Int, header: String? = nil, frameLine: String = "FRAME") -> [UInt8] {
    var out = Array((header ?? "YUV4MPEG2 W\(width) H\(height) F30000:1001 Ip A1:1 C420jpeg XYSCSS=420JPEG") .utf8) + [0x0A]
    let size = width * height * 3 / 2
    for index in 0..<frames {
        out += Array(frameLine.utf8) + [0x0A]
        out += (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
    }
    return out
}

private func readAll(_ bytes: [UInt8], chunk: Int) throws(Y4MError) -> (Y4MReader, [Y4MFrame]) {
    var reader = Y4MReader()
    var frames = [Y4MFrame]()
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + chunk)
        frames += try reader.append(Array(bytes[offset..<end]))
        offset = end
    }
    try reader.finish()
    return (reader, frames)
}

private func error(of body: () throws(Y4MError) -> Void) -> Y4MError? {
    do { try body() } catch { return error }
    return nil
}

@Suite("Y4M reader")
struct Y4MReaderTests {
    @Test(arguments: [1, 2, 3, 7, 64, 100, 1000, 1 << 20])
    func chunkSizes(chunk: Int) throws {
        let stream = makeStream(width: 16, height: 8, frames: 5)
        let (reader, frames) = try readAll(stream, chunk: chunk)
        let header = try #require(reader.header)
        #expect(header.width == 16 && header.height == 8)
        #expect(header.frameRateNumerator == 30000 && header.frameRateDenominator == 1001)
        #expect(header.interlacing == .progressive && header.pixelAspect == (1, 1) && header.colorspace == .c420jpeg)
        #expect(header.extensions == ["YSCSS=420JPEG"])
        #expect(frames.count == 5 && reader.framesRead == 5)
        for (index, frame) in frames.enumerated() {
            #expect(frame.data.count == 16 * 8 * 3 / 2)
            #expect(frame.luma.count == 128 && frame.cb.count == 32 && frame.cr.count == 32)
            #expect(frame.data[0] == UInt8(index) && frame.cr.first == UInt8(truncatingIfNeeded: 160 * 7 + index))
        }
    }

    @Test func headerDefaultsAndFrameParameters() throws {
        let stream = makeStream(width: 4, height: 2, frames: 2, header: "YUV4MPEG2 W4 H2 F25:1", frameLine: "FRAME Ib XFOO")
        let (reader, frames) = try readAll(stream, chunk: 5)
        #expect(reader.header?.colorspace == .c420jpeg && reader.header?.interlacing == .progressive)
        #expect(frames.map(\.parameters) == [["Ib", "XFOO"], ["Ib", "XFOO"]])
        let line = try #require(reader.header).line
        #expect(String(decoding: line, as: UTF8.self) == "YUV4MPEG2 W4 H2 F25:1 Ip A0:0 C420jpeg\n")
        #expect(try Y4MHeader(line: Array(line.dropLast())) == reader.header)
    }

    @Test func acceptedColorspaces() throws {
        for name in ["420", "420jpeg", "420paldv", "420mpeg2"] {
            #expect(try Y4MHeader(line: Array("YUV4MPEG2 W2 H2 F1:1 C\(name)".utf8)).colorspace.rawValue == name)
        }
    }

    @Test func badHeaders() {
        func headerError(_ text: String) -> String? {
            error { () throws(Y4MError) in _ = try Y4MHeader(line: Array(text.utf8)) }?.description
        }
        #expect(headerError("YUV4MPEG2 W16 H16 F30:1 C444") == "y4m: unsupported colorspace C444 (only 8-bit 4:2:0)")
        #expect(headerError("YUV4MPEG2 W16 H16 F30:1 C420p10") == "y4m: unsupported colorspace C420p10 (only 8-bit 4:2:0)")
        #expect(headerError("YUV4MPEG W16 H16") == "y4m: not a YUV4MPEG2 stream (missing 'YUV4MPEG2 ' signature)")
        #expect(headerError("RIFF") == "y4m: not a YUV4MPEG2 stream (missing 'YUV4MPEG2 ' signature)")
        #expect(headerError("YUV4MPEG2 H16 F30:1") == "y4m: header lacks width (W)")
        #expect(headerError("YUV4MPEG2 W16 F30:1") == "y4m: header lacks height (H)")
        #expect(headerError("YUV4MPEG2 W16 H16") == "y4m: header lacks frame rate (F)")
        #expect(headerError("YUV4MPEG2 W15 H16 F30:1") == "y4m: width 15 not supported (must be even, 2...16384)")
        #expect(headerError("YUV4MPEG2 W16 H16386 F30:1") == "y4m: height 16386 not supported (must be even, 2...16384)")
        #expect(headerError("YUV4MPEG2 W0 H16 F30:1") == "y4m: width 0 not supported (must be even, 2...16384)")
        #expect(headerError("YUV4MPEG2 W99999999999999999999 H16 F30:1") == "y4m: bad header field 'W99999999999999999999'")
        #expect(headerError("YUV4MPEG2 W-2 H16 F30:1") == "y4m: bad header field 'W-2'")
        #expect(headerError("YUV4MPEG2 W16 H16 F30") == "y4m: bad header field 'F30'")
        #expect(headerError("YUV4MPEG2 W16 H16 F30:0") == "y4m: bad header field 'F30:0'")
        #expect(headerError("YUV4MPEG2 W16 H16 F30:1 Iz") == "y4m: bad header field 'Iz'")
        #expect(headerError("YUV4MPEG2 W16 H16 F30:1 Q1") == "y4m: bad header field 'Q1'")
    }

    @Test func headerLineLimit() {
        var reader = Y4MReader()
        let long = Array("YUV4MPEG2 W16 H16 F30:1 X".utf8) + [UInt8](repeating: 0x41, count: 2000)
        #expect(error { () throws(Y4MError) in _ = try reader.append(long) } == .headerTooLong)
        // Sticky: later input fails the same way.
        #expect(error { () throws(Y4MError) in _ = try reader.append([0x0A]) } == .headerTooLong)
    }

    @Test func truncatedLastFrameIsAnError() throws {
        let stream = makeStream(width: 16, height: 8, frames: 3)
        var reader = Y4MReader()
        let frames = try reader.append(Array(stream.dropLast(10)))
        #expect(frames.count == 2)
        #expect(error { () throws(Y4MError) in try reader.finish() } == .truncatedFrame(frame: 2, got: 182, expected: 192))
        #expect(Y4MError.truncatedFrame(frame: 2, got: 182, expected: 192).description == "y4m: truncated frame 2: got 182 of 192 bytes")

        var cutInLine = Y4MReader()
        _ = try cutInLine.append(Array(stream.prefix(stream.count - 192 - 3)))
        #expect(error { () throws(Y4MError) in try cutInLine.finish() } != nil)

        let empty = Y4MReader()
        #expect(error { () throws(Y4MError) in try empty.finish() } == .notY4M)
        var partial = Y4MReader()
        _ = try partial.append(Array("YUV4MP".utf8))
        #expect(error { () throws(Y4MError) in try partial.finish() } == .truncatedHeader)
        // Header only, no frames: a valid (empty) stream.
        var headerOnly = Y4MReader()
        _ = try headerOnly.append(makeStream(width: 2, height: 2, frames: 0))
        try headerOnly.finish()
    }

    /// The in-place path (``Y4MReader/readPixels(_:)`` for pixels, ``Y4MReader/append(_:)`` for
    /// lines, storage given back after each frame) gives the frames `append` alone gives, for
    /// reads of any size, and keeps counting a truncated frame's bytes.
    @Test(arguments: [1, 5, 13, 100, 1 << 20])
    func pixelsReadInPlaceMatchAppend(chunk: Int) throws {
        let stream = makeStream(width: 16, height: 8, frames: 5, frameLine: "FRAME Ip")
        let (_, expected) = try readAll(stream, chunk: 7)
        var reader = Y4MReader()
        var frames: [Y4MFrame] = []
        var offset = 0
        while offset < stream.count {
            if reader.pixelBytesWanted > 0 {
                let frame = reader.readPixels { pixels in
                    let count = min(chunk, pixels.count, stream.count - offset)
                    stream.withUnsafeBytes { pixels.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)])) }
                    offset += count
                    return count
                }
                if let frame {
                    frames.append(Y4MFrame(width: frame.width, height: frame.height, data: Array(frame.data),
                                           parameters: frame.parameters))
                    reader.reuseStorage(of: frame)
                }
            } else {
                let end = min(stream.count, offset + chunk)
                frames += try reader.append(Array(stream[offset..<end]))
                offset = end
            }
        }
        try reader.finish()
        #expect(frames == expected)
        #expect(reader.pixelBytesWanted == 0 && reader.readPixels { _ in Issue.record("read with nothing wanted"); return 0 } == nil)

        var truncated = Y4MReader()
        _ = try truncated.append(Array(stream.prefix(stream.count - 192)))
        #expect(truncated.pixelBytesWanted == 192)
        #expect(truncated.readPixels { pixels in pixels.storeBytes(of: 9, as: UInt8.self); return 1 } == nil)
        #expect(truncated.readPixels { _ in 0 } == nil)
        #expect(truncated.pixelBytesWanted == 191)
        #expect(error { () throws(Y4MError) in try truncated.finish() } == .truncatedFrame(frame: 4, got: 1, expected: 192))
    }

    @Test func badFrameMarker() {
        var stream = makeStream(width: 4, height: 2, frames: 2)
        let secondFrameLine = stream.count - 12 - 6
        stream[secondFrameLine] = UInt8(ascii: "X")
        var reader = Y4MReader()
        #expect(error { () throws(Y4MError) in _ = try reader.append(stream) } == .badFrameMarker(frame: 1))
        // A FRAME line that never ends is bounded.
        var endless = Y4MReader()
        let input = makeStream(width: 2, height: 2, frames: 0) + Array("FRAME ".utf8) + [UInt8](repeating: 0x49, count: 5000)
        #expect(error { () throws(Y4MError) in _ = try endless.append(input) } == .frameLineTooLong(frame: 0))
    }

    @Test func randomInputNeverTraps() {
        var generator = SplitMix64(seed: 5)
        let valid = makeStream(width: 4, height: 4, frames: 3)
        for _ in 0..<3000 {
            var input = valid
            for _ in 0..<3 { input[Int(generator.next() % UInt64(input.count))] = UInt8(truncatingIfNeeded: generator.next()) }
            var reader = Y4MReader()
            _ = try? reader.append(input)
            _ = try? reader.finish()
        }
    }
}
