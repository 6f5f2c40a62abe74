import Glibc
import StreamEngine
import UringIO

// bench-floor: the floor of `bench peers` (Bench/Peers.swift), the least a sender and a
// receiver of the same packets do. An executable of its own, linking neither Foundation nor
// anything else `bench` needs to run GStreamer and FFmpeg, so a floor process pays the Swift
// runtime's start-up (~2 ms of CPU, where a C program's is 0.3 – 0.8) and not Foundation's, and
// the ratios `bench peers` reports against it are not kinder than they are (results/profile.md
// section 36).

let sendUsage = "usage: bench-floor send RECORDS PORT FPS"
let countUsage = "usage: bench-floor count PORT EXPECTED [--engine-loop BUFFERS] [--rebuild]"

/// Why a floor program stopped: bad arguments (exit 2) or a failure (exit 1).
enum FloorError: Error {
    case usage(String)
    case runtime(String)
}

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
let commands: [String: ([String]) throws -> Void] = ["send": runFloorSender, "count": runCounter]
guard let name = arguments.first, let command = commands[name] else {
    printError(sendUsage + " | " + countUsage.dropFirst("usage: ".count))
    exit(2)
}
do {
    try command(Array(arguments.dropFirst()))
} catch FloorError.usage(let text) {
    printError(text)
    exit(2)
} catch FloorError.runtime(let text) {
    printError("bench-floor \(name): \(text)")
    exit(1)
} catch {
    printError("bench-floor \(name): \(error)")
    exit(1)
}

/// `bench-floor send RECORDS PORT FPS`: the least a sender does (run as a child so its CPU is
/// measured from outside like every other sender's); FPS 0 sends without sleeping.
func runFloorSender(_ arguments: [String]) throws {
    guard arguments.count == 3, let port = UInt16(arguments[1]), let fps = Int(arguments[2]), fps >= 0 else {
        throw FloorError.usage(sendUsage)
    }
    let file = open(arguments[0], O_RDONLY)
    guard file >= 0 else { throw FloorError.runtime("cannot open \(arguments[0]): \(String(cString: strerror(errno)))") }
    let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw FloorError.runtime("cannot connect the floor sender") }
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 16 << 20, alignment: 8)
    defer { buffer.deallocate() }
    let control = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
    defer { control.deallocate() }
    let interval = fps == 0 ? 0 : 1_000_000_000 / Int64(fps)
    var next = monotonicNanoseconds()
    while true {
        var counts = (UInt32(0), UInt32(0))
        guard read(file, &counts, 8) == 8 else { break }
        let bytes = Int(counts.0), count = Int(counts.1)
        guard count * 2 + bytes <= 16 << 20, read(file, buffer, count * 2 + bytes) == count * 2 + bytes else { break }
        let sizes = buffer.assumingMemoryBound(to: UInt16.self)
        var offset = count * 2
        var index = 0
        while index < count {
            // A run: datagrams of the first one's size, the last may be shorter (UDP GSO).
            let segment = Int(sizes[index])
            var end = index + 1
            var length = segment
            while end < count, Int(sizes[end]) <= segment, length + Int(sizes[end]) <= 65_000 {
                length += Int(sizes[end])
                end += 1
                if Int(sizes[end - 1]) < segment { break }
            }
            var vector = iovec(iov_base: buffer + offset, iov_len: length)
            var message = msghdr()
            withUnsafeMutablePointer(to: &vector) { message.msg_iov = $0 }
            message.msg_iovlen = 1
            if end - index > 1 {
                let header = control.assumingMemoryBound(to: cmsghdr.self)
                header.pointee.cmsg_level = Int32(IPPROTO_UDP)
                header.pointee.cmsg_type = 103  // UDP_SEGMENT
                header.pointee.cmsg_len = MemoryLayout<cmsghdr>.size + 2
                (control + MemoryLayout<cmsghdr>.size).storeBytes(of: UInt16(segment), as: UInt16.self)
                message.msg_control = control
                message.msg_controllen = MemoryLayout<cmsghdr>.size + 8
            }
            _ = sendmsg(socket, &message, 0)
            offset += length
            index = end
        }
        guard interval > 0 else { continue }
        next += interval
        let now = monotonicNanoseconds()
        if next > now {
            var time = timespec(tv_sec: Int((next - now) / 1_000_000_000), tv_nsec: Int((next - now) % 1_000_000_000))
            nanosleep(&time, nil)
        }
    }
}

/// `bench-floor count PORT EXPECTED [--engine-loop BUFFERS] [--rebuild]`: a recvmmsg + GRO counter of
/// datagrams and bytes; stops at EXPECTED datagrams (0: unknown) or 1.5 s after the last one;
/// prints `packets=N bytes=N span=N duration=NS` (span: RTP sequence numbers from the first to
/// the last seen; duration: from the first receive to the last, in nanoseconds). With
/// `--engine-loop`, the same count on the engine's receive loop (`DatagramReceiveLoop`: a
/// multishot `recvmsg` on a ring of BUFFERS buffers of 64 KB, its work deferred to the loop's
/// waits, as `streamer recv` receives), so the loop's own cost can be set beside `recvmmsg`'s
/// with nothing else of a receiver (results/profile.md section 34). With `--rebuild`, each
/// datagram also goes to a `FrameRebuilder` (Bench/Floor/FrameRebuilder.swift: the frames
/// rebuilt as a receiver written by hand would, each payload copied once) and the line ends
/// `frames=N frameBytes=N malformed=N` (results/profile.md section 37).
func runCounter(_ arguments: [String]) throws {
    let usage = FloorError.usage(countUsage)
    var options = arguments.dropFirst(2)
    guard arguments.count >= 2, let port = UInt16(arguments[0]), let expected = Int(arguments[1]), expected >= 0 else { throw usage }
    var buffers: Int?, rebuilder: FrameRebuilder?
    while let option = options.popFirst() {
        switch option {
        case "--engine-loop" where buffers == nil:
            guard let count = options.popFirst().flatMap({ Int($0) }), (1...4096).contains(count) else { throw usage }
            buffers = count
        case "--rebuild" where rebuilder == nil:
            rebuilder = FrameRebuilder()
        default:
            throw usage
        }
    }
    let socket = try UDPSocket(family: .ipv4)
    socket.setReceiveBufferSize(64 << 20)
    try socket.enableGRO()
    try socket.bind(try SocketAddress.parse("127.0.0.1:\(port)"))
    var stream = CountedStream(expected: expected, rebuilder: rebuilder)
    if let buffers {
        let loop = try DatagramReceiveLoop(sockets: [(socket, buffers, 65_536)], deferTaskRun: true)
        print("ready")
        fflush(nil)
        // The time is read once per wake-up, after its datagrams, as the recvmmsg loop reads it.
        try loop.run(checkInterval: 100_000_000, shouldStop: { stream.done(now: monotonicNanoseconds()) }) {
            stream.count($0.payload)
        }
    } else {
        try PlainUDP.setReceiveTimeout(socket, nanoseconds: 100_000_000)
        print("ready")
        fflush(nil)
        try countWithRecvmmsg(socket, into: &stream)
    }
    var line = "packets=\(stream.packets) bytes=\(stream.bytes) span=\(stream.span) duration=\(stream.duration)"
    if let rebuilder {
        line += " frames=\(rebuilder.frames) frameBytes=\(rebuilder.frameBytes) malformed=\(rebuilder.malformed)"
    }
    print(line)
}

/// What a counter saw: datagrams, bytes, the RTP sequence span, the time from its first receive
/// to its last.
private struct CountedStream {
    let expected: Int
    private(set) var packets = 0, bytes = 0
    private var sequences: (highest: Int, last: UInt16)?
    private var firstSeen: Int64?, lastSeen: Int64 = 0, countedAtLastSeen = 0
    private let started = monotonicNanoseconds()
    /// With `--rebuild`: takes every datagram after it is counted.
    let rebuilder: FrameRebuilder?

    init(expected: Int, rebuilder: FrameRebuilder?) { (self.expected, self.rebuilder) = (expected, rebuilder) }

    var span: Int { sequences.map { $0.highest + 1 } ?? 0 }
    var duration: Int64 { lastSeen - (firstSeen ?? lastSeen) }

    /// Counts one datagram (one GRO segment).
    mutating func count(_ datagram: UnsafeRawBufferPointer) {
        if datagram.count >= 12 {
            let sequence = UInt16(datagram[2]) << 8 | UInt16(datagram[3])
            if let seen = sequences {
                sequences = (seen.highest + Int(Int16(bitPattern: sequence &- seen.last)), sequence)
            } else {
                sequences = (0, sequence)
            }
        }
        packets += 1
        bytes += datagram.count
        rebuilder?.take(datagram)
    }

    /// Notes a wake-up at `now` (after its datagrams were counted) and says whether to stop:
    /// EXPECTED datagrams counted, 1.5 s without one, or 60 s without any.
    mutating func done(now: Int64) -> Bool {
        if packets > countedAtLastSeen {
            countedAtLastSeen = packets
            lastSeen = now
            if firstSeen == nil { firstSeen = now }
        }
        if expected > 0 && packets >= expected { return true }
        return packets > 0 ? now - lastSeen > 1_500_000_000 : now - started > 60_000_000_000
    }
}

/// Counts with `recvmmsg` of 64 (the floor receiver), each GRO burst split by its segment size.
private func countWithRecvmmsg(_ socket: UDPSocket, into stream: inout CountedStream) throws {
    let batch = 64, slot = 65_536, controlSize = 64
    let buffers = UnsafeMutableRawPointer.allocate(byteCount: batch * slot, alignment: 16)
    let controls = UnsafeMutableRawPointer.allocate(byteCount: batch * controlSize, alignment: 16)
    let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: batch)
    let messages = UnsafeMutablePointer<MultiMessageHeader>.allocate(capacity: batch)
    defer { buffers.deallocate(); controls.deallocate(); vectors.deallocate(); messages.deallocate() }
    while !stream.done(now: monotonicNanoseconds()) {
        for index in 0..<batch {
            vectors[index] = iovec(iov_base: buffers + index * slot, iov_len: slot)
            messages[index] = MultiMessageHeader()
            messages[index].header.msg_iov = vectors + index
            messages[index].header.msg_iovlen = 1
            messages[index].header.msg_control = controls + index * controlSize
            messages[index].header.msg_controllen = controlSize
        }
        guard let received = try PlainUDP.receiveMessages(socket, messages, count: batch) else { continue }
        for index in 0..<received {
            let length = Int(messages[index].length)
            var segment = length
            if messages[index].header.msg_controllen >= MemoryLayout<cmsghdr>.size + 2 {
                let header = (controls + index * controlSize).assumingMemoryBound(to: cmsghdr.self)
                if header.pointee.cmsg_level == Int32(IPPROTO_UDP) && header.pointee.cmsg_type == 104 {
                    segment = Int((controls + index * controlSize + MemoryLayout<cmsghdr>.size)
                        .loadUnaligned(as: UInt16.self))
                }
            }
            var offset = 0
            while offset < length {
                let size = min(max(segment, 1), length - offset)
                stream.count(UnsafeRawBufferPointer(start: buffers + index * slot + offset, count: size))
                offset += size
            }
        }
    }
}
