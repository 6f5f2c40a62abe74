import Glibc

/// What a receiver written by hand does to give its user frames, and no more: each RTP packet's
/// header skipped, its H.265 payload (RFC 7798: a NAL unit, an aggregation packet, a fragment)
/// copied once into the frame being rebuilt as Annex B (start codes before NAL units), the frame
/// ended by the marker bit. No accounting, no reordering, no loss handling, no checks beyond
/// the lengths: the reference `bench-floor count --rebuild` puts beside the floor (which only
/// counts) and `streamer recv` (which also accounts for every packet and frame).
final class FrameRebuilder {
    /// The frame being rebuilt (at most `capacity` bytes; a bigger one is dropped).
    private let frame: UnsafeMutableRawPointer
    private let capacity = 16 << 20
    private var length = 0, overflowed = false
    /// Frames ended by a marker bit, and their bytes.
    private(set) var frames = 0, frameBytes = 0
    /// Packets that could not be read as RTP carrying RFC 7798 payloads (not version 2, a
    /// header or extension longer than the packet, a payload too short); skipped.
    private(set) var malformed = 0

    init() {
        frame = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    deinit { frame.deallocate() }

    /// Takes one RTP packet.
    func take(_ packet: UnsafeRawBufferPointer) {
        guard packet.count >= 12, packet[0] >> 6 == 2 else { malformed += 1; return }
        var start = 12 + 4 * Int(packet[0] & 0x0f)
        if packet[0] & 0x10 != 0 {
            guard packet.count >= start + 4 else { malformed += 1; return }
            start += 4 + 4 * (Int(packet[start + 2]) << 8 | Int(packet[start + 3]))
        }
        let end = packet.count - (packet[0] & 0x20 != 0 ? Int(packet[packet.count - 1]) : 0)
        guard end >= start + 2 else { malformed += 1; return }
        let payload = UnsafeRawBufferPointer(rebasing: packet[start..<end])
        switch (payload[0] >> 1) & 0x3f {
        case 48:  // an aggregation packet: 16-bit sizes before its NAL units
            var offset = 2
            while offset + 2 <= payload.count {
                let size = Int(payload[offset]) << 8 | Int(payload[offset + 1])
                offset += 2
                guard size > 0, offset + size <= payload.count else { malformed += 1; break }
                appendStartCode()
                append(UnsafeRawBufferPointer(rebasing: payload[offset..<offset + size]))
                offset += size
            }
        case 49:  // a fragment: the NAL unit's header rebuilt from the first one's
            guard payload.count >= 3 else { malformed += 1; return }
            if payload[2] & 0x80 != 0 {
                appendStartCode()
                var header: (UInt8, UInt8) = ((payload[0] & 0x81) | (payload[2] & 0x3f) << 1, payload[1])
                withUnsafeBytes(of: &header) { append($0) }
            }
            append(UnsafeRawBufferPointer(rebasing: payload[3...]))
        default:  // one NAL unit
            appendStartCode()
            append(payload)
        }
        if packet[1] & 0x80 != 0 {
            if !overflowed {
                frames += 1
                frameBytes += length
            }
            length = 0
            overflowed = false
        }
    }

    private func appendStartCode() {
        var code: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 1)
        withUnsafeBytes(of: &code) { append($0) }
    }

    private func append(_ bytes: UnsafeRawBufferPointer) {
        guard !overflowed, length + bytes.count <= capacity else { overflowed = true; return }
        memcpy(frame + length, bytes.baseAddress!, bytes.count)
        length += bytes.count
    }
}
