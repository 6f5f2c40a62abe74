import Glibc
import MediaFormats

/// y4m frames from a file or pipe, each frame's pixels read straight into the frame: one
/// readv(2) per frame fills the frame's missing bytes (``Y4MReader/readPixels(_:)``) and, in the
/// same call, up to 4 KB after them (the next FRAME line) into a small buffer the reader parses.
/// So the pixels are copied once, by the kernel (from the page cache for a file), and a frame
/// given back with ``reuseStorage(of:)`` holds the next one: no allocation per frame.
struct Y4MFileReader {
    private let file: InputFile
    private var reader = Y4MReader()
    /// Header and FRAME lines, and whatever a read brought past a frame's pixels.
    private var lines = [UInt8](repeating: 0, count: 4096)
    /// Frames read and not yet returned, the next one last.
    private var pending: [Y4MFrame] = []
    private var ended = false

    /// Reads from `file`, from where it stands.
    init(_ file: InputFile) {
        self.file = file
    }

    /// The stream header, once its line has been read.
    var header: Y4MHeader? { reader.header }

    /// The next frame; nil at the end of the input (a truncated last frame is dropped) or when a
    /// read fails. Throws when the stream is not y4m.
    mutating func next() throws(Y4MError) -> Y4MFrame? {
        while pending.isEmpty && !ended {
            // The buffer out of `self` while the reader (also in `self`) fills it.
            var buffer: [UInt8] = []
            swap(&buffer, &lines)
            defer { swap(&buffer, &lines) }
            var extra = 0
            if reader.pixelBytesWanted > 0 {
                var reachedEnd = false
                let frame = buffer.withUnsafeMutableBytes { rest in
                    reader.readPixels { pixels in
                        let count = Self.read(file, into: pixels, then: rest)
                        reachedEnd = count <= 0
                        extra = max(count - pixels.count, 0)
                        return count
                    }
                }
                ended = reachedEnd
                if let frame { pending.append(frame) }
            } else {
                extra = buffer.withUnsafeMutableBytes { Self.read(file, into: nil, then: $0) }
                ended = extra <= 0
            }
            guard extra > 0 else { continue }
            let count = extra
            let result: Result<[Y4MFrame], Y4MError> = buffer.withUnsafeBytes { bytes in
                do throws(Y4MError) {
                    return .success(try reader.append(UnsafeRawBufferPointer(rebasing: bytes[..<count])))
                } catch { return .failure(error) }
            }
            pending.insert(contentsOf: try result.get().reversed(), at: 0)
        }
        return pending.popLast()
    }

    /// Takes a frame's storage back for a later frame (give it back once nothing else holds
    /// `frame.data`, or the next frame copies it).
    mutating func reuseStorage(of frame: consuming Y4MFrame) {
        reader.reuseStorage(of: frame)
    }

    /// readv(2) into `first` (when given), then `rest`, retrying on EINTR: the byte count, 0 at
    /// the end, -1 on an error.
    private static func read(_ file: InputFile, into first: UnsafeMutableRawBufferPointer?,
                             then rest: UnsafeMutableRawBufferPointer) -> Int {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { vectors in
            var count = 0
            if let first {
                vectors[0] = iovec(iov_base: first.baseAddress, iov_len: first.count)
                count = 1
            }
            vectors[count] = iovec(iov_base: rest.baseAddress, iov_len: rest.count)
            while true {
                let read = readv(file.descriptor, vectors.baseAddress, Int32(count + 1))
                if read >= 0 || errno != EINTR { return read }
            }
        }
    }
}
