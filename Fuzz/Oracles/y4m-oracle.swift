// Fuzz oracle of the `y4m` target: Fuzz/Targets/y4m.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/y4m through it in `swift test`.
//
// Y4MReader fed whole and in chunks whose sizes come from the input.
//
// Every frame must have the size and dimensions the header says. Chunking must not change
// the outcome: the same frames (when no error), the same error, the same frames read and
// the same finish() result. A header that parses must render (`line`) and parse back equal.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

private func run(_ stream: UnsafeRawBufferPointer, chunkSeed: UInt64?) -> (frames: [Y4MFrame], error: Y4MError?, reader: Y4MReader) {
    var reader = Y4MReader()
    var frames: [Y4MFrame] = []
    var seed = chunkSeed ?? 0
    var offset = 0
    do throws(Y4MError) {
        while offset < stream.count {
            var length = stream.count - offset
            if chunkSeed != nil {
                seed ^= seed << 13
                seed ^= seed >> 7
                seed ^= seed << 17
                length = min(length, seed & 0x300 == 0 ? Int(seed >> 20 & 0x3FF) : Int(seed >> 20 & 0x1F))
            }
            frames += try reader.append(UnsafeRawBufferPointer(rebasing: stream[offset..<(offset + length)]))
            offset += length
        }
        try reader.finish()
        return (frames, nil, reader)
    } catch {
        return (frames, error, reader)
    }
}

/// The y4m target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzY4M(_ data: UnsafeRawBufferPointer) {
    var input = FuzzInput(data)
    let seed = UInt64(input.uint32()) | 1
    let stream = input.rest()

    let whole = run(stream, chunkSeed: nil)
    let chunked = run(stream, chunkSeed: seed)
    fuzzCheck(whole.error == chunked.error, "whole: \(String(describing: whole.error)), chunked: \(String(describing: chunked.error))")
    fuzzCheck(whole.reader.framesRead == chunked.reader.framesRead,
              "framesRead whole \(whole.reader.framesRead), chunked \(chunked.reader.framesRead)")
    fuzzCheck(whole.reader.header == chunked.reader.header, "headers differ")
    if whole.error == nil {
        fuzzCheck(whole.frames == chunked.frames, "frames differ")
        fuzzCheck(whole.frames.count == whole.reader.framesRead, "\(whole.frames.count) frames, framesRead \(whole.reader.framesRead)")
    }
    for result in [whole, chunked] {
        _ = result.error?.description
        guard let header = result.reader.header else {
            fuzzCheck(result.frames.isEmpty, "frames without a header")
            continue
        }
        for frame in result.frames {
            fuzzCheck(frame.width == header.width && frame.height == header.height, "frame dimensions differ from the header's")
            fuzzCheck(frame.data.count == header.frameByteCount, "frame of \(frame.data.count) bytes, header says \(String(describing: header.frameByteCount))")
            fuzzCheck(frame.luma.count == header.width * header.height, "luma plane size")
            fuzzCheck(frame.cb.count == frame.cr.count && frame.cb.count == header.width / 2 * (header.height / 2), "chroma plane sizes")
        }
        let line = header.line
        fuzzCheck(line.last == 0x0A, "header line without newline")
        let reparsed = try? Y4MHeader(line: Array(line.dropLast()))
        fuzzCheck(reparsed == header, "header \(header) renders as \(String(decoding: line, as: UTF8.self)) and re-parses as \(String(describing: reparsed))")
    }
}
