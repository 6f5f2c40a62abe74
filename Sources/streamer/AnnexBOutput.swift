import Glibc

/// `streamer recv --out`: each access unit written goes to the file as Annex B (a four-byte
/// start code before each NAL unit) with one writev(2), not copied into one buffer first and
/// again into a `Data` (results/profile.md section 15). The largest NAL unit (a frame's slice,
/// nearly all of its bytes) is written from its own storage; the start codes and the other NAL
/// units (parameter sets, SEI, further slices) are gathered around it into one buffer reused
/// from frame to frame: one borrow per frame, not one nested borrow per NAL unit.
struct AnnexBOutput {
    let descriptor: Int32
    /// The errno of the first failed write, 0 while none; nothing more is written after one.
    private(set) var failure: Int32 = 0
    /// What comes before the largest NAL unit (up to `largestAt`) and after it.
    private var gathered: [UInt8] = []
    private static let startCode: [UInt8] = [0, 0, 0, 1]

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// Writes one access unit's NAL units, each behind a start code.
    mutating func write(_ nalUnits: [[UInt8]]) {
        guard failure == 0, !nalUnits.isEmpty else { return }
        var largest = nalUnits.startIndex
        for index in nalUnits.indices where nalUnits[index].count > nalUnits[largest].count { largest = index }
        gathered.removeAll(keepingCapacity: true)
        var largestAt = 0
        for index in nalUnits.indices {
            gathered.append(contentsOf: Self.startCode)
            if index == largest {
                largestAt = gathered.count
            } else {
                gathered.append(contentsOf: nalUnits[index])
            }
        }
        let descriptor = descriptor
        failure = gathered.withUnsafeBytes { around in
            nalUnits[largest].withUnsafeBytes { unit in
                // The three iovecs on the stack: no array allocated per frame.
                withUnsafeTemporaryAllocation(of: iovec.self, capacity: 3) { parts in
                    parts[0] = Self.vector(UnsafeRawBufferPointer(rebasing: around[..<largestAt]))
                    parts[1] = Self.vector(unit)
                    parts[2] = Self.vector(UnsafeRawBufferPointer(rebasing: around[largestAt...]))
                    return Self.writeAll(descriptor, parts)
                }
            }
        }
    }

    /// An iovec over `bytes` (valid while they are).
    private static func vector(_ bytes: UnsafeRawBufferPointer) -> iovec {
        iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
    }

    /// writev(2) until every byte is written (a pipe may take part of it); the errno on failure, 0 on success.
    private static func writeAll(_ descriptor: Int32, _ parts: UnsafeMutableBufferPointer<iovec>) -> Int32 {
        var index = 0
        while index < parts.count {
            let written = writev(descriptor, parts.baseAddress! + index, Int32(min(parts.count - index, 1024)))  // IOV_MAX
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
