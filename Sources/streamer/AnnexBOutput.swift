import Glibc

/// `streamer recv --out`: each access unit written goes to the file as Annex B (a four-byte
/// start code before each NAL unit) with one writev(2) from the NAL units' own storage, not
/// copied into one buffer first and again into a `Data` (results/profile.md section 15).
struct AnnexBOutput {
    let descriptor: Int32
    /// The errno of the first failed write, 0 while none; nothing more is written after one.
    private(set) var failure: Int32 = 0
    private static let startCode: [UInt8] = [0, 0, 0, 1]

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// Writes one access unit's NAL units, each behind a start code.
    mutating func write(_ nalUnits: [[UInt8]]) {
        guard failure == 0, !nalUnits.isEmpty else { return }
        var parts: [iovec] = []
        parts.reserveCapacity(2 * nalUnits.count)
        let descriptor = descriptor
        failure = Self.startCode.withUnsafeBytes { code in
            Self.withVectors(nalUnits[...], code: code, &parts) { Self.writeAll(descriptor, &$0) }
        }
    }

    /// The NAL units' bytes, each behind `code`, as iovecs valid inside `body` (each array's
    /// bytes are borrowed for the call, one nested borrow per NAL unit).
    private static func withVectors(_ units: ArraySlice<[UInt8]>, code: UnsafeRawBufferPointer, _ parts: inout [iovec],
                                    _ body: (inout [iovec]) -> Int32) -> Int32 {
        guard let unit = units.first else { return body(&parts) }
        return unit.withUnsafeBytes { bytes in
            parts.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: code.baseAddress), iov_len: code.count))
            parts.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count))
            return withVectors(units.dropFirst(), code: code, &parts, body)
        }
    }

    /// writev(2) until every byte is written (a pipe may take part of it); the errno on failure, 0 on success.
    private static func writeAll(_ descriptor: Int32, _ parts: inout [iovec]) -> Int32 {
        var index = 0
        while index < parts.count {
            let written = parts.withUnsafeMutableBufferPointer { vectors in
                writev(descriptor, vectors.baseAddress! + index, Int32(min(vectors.count - index, 1024)))  // IOV_MAX
            }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            var left = written
            while index < parts.count && left >= parts[index].iov_len {
                left -= parts[index].iov_len
                index += 1
            }
            if left > 0 {
                parts[index].iov_base = parts[index].iov_base.map { $0 + left }
                parts[index].iov_len -= left
            }
        }
        return 0
    }
}
