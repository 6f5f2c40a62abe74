import Foundation
import Glibc
import TestSupport

/// What a lab's router saw of a stream: every IPv4 packet on its interface toward the sender
/// (`rs`) and on its interface toward the receiver (`rr`, whose egress is the tbf bottleneck),
/// each with the kernel's timestamp. A record kept outside the engine of when each report and
/// datagram entered the bottleneck and when it left.
///
/// AF_PACKET sockets (SOCK_DGRAM: from the IP header on; ETH_P_ALL, so packets the router sends
/// are seen too, after its qdisc) opened in the router's namespace, with SO_TIMESTAMPNS. The
/// kernel keeps what arrives until `drain` reads it (32 MB each).
final class RouterCapture {
    /// The bytes that tell one packet from another on both interfaces (the router changes
    /// only the IP header): the first 24 bytes after the IP header, and the length. Enough for
    /// RTP (sequence number, timestamp, SSRC), sender reports (NTP time) and pings (sequence
    /// number); not for receiver reports (`reportRoundTrips` tells them apart by LSR and DLSR).
    struct Identity: Hashable {
        var first: UInt64, second: UInt64, third: UInt64
        var length: Int
    }

    /// One packet on one interface.
    struct Packet {
        /// The kernel's timestamp, Unix seconds.
        var time: Double
        /// Seen on the interface toward the receiver (else toward the sender).
        var receiverSide: Bool
        /// Leaving the router (else arriving).
        var outgoing: Bool
        var identity: Identity
        /// The IP protocol (1 ICMP, 17 UDP).
        var protocolNumber: UInt8
        /// An RTCP sender report's NTP timestamp.
        var senderReportNTP: UInt64?
        /// A receiver report's first block: LSR and DLSR (RFC 3550 6.4.1).
        var receiverReport: (lastSR: UInt32, delay: UInt32)?
    }

    private let sockets: [(fd: Int32, receiverSide: Bool)]
    private(set) var packets: [Packet] = []

    /// Opens the sockets in `lab`'s router.
    init(lab: Lab) throws {
        let namespace = "sl-\(lab.name)-rtr"
        let interfaces = ["sl-\(lab.name)-rs", "sl-\(lab.name)-rr"]
        let descriptors = try onThread(namespace: namespace) { try interfaces.map(Self.open) }
        sockets = descriptors.enumerated().map { ($1, $0 == 1) }
    }

    deinit { for socket in sockets { close(socket.fd) } }

    private static func open(_ interface: String) throws -> Int32 {
        let all = UInt16(3).bigEndian  // ETH_P_ALL
        let fd = socket(AF_PACKET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(all))
        guard fd >= 0 else { throw LabError("AF_PACKET socket: \(String(cString: strerror(errno)))") }
        let index = if_nametoindex(interface)
        guard index > 0 else { close(fd); throw LabError("no interface \(interface)") }
        // struct sockaddr_ll: family, protocol (network order), ifindex, then unused for bind.
        var address = [UInt8](repeating: 0, count: 20)
        withUnsafeBytes(of: UInt16(AF_PACKET)) { address.replaceSubrange(0..<2, with: $0) }
        withUnsafeBytes(of: all) { address.replaceSubrange(2..<4, with: $0) }
        withUnsafeBytes(of: Int32(index)) { address.replaceSubrange(4..<8, with: $0) }
        var on: Int32 = 1, buffer: Int32 = 32 << 20
        let ok = address.withUnsafeBytes { bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), 20) } == 0
            && setsockopt(fd, SOL_SOCKET, 35 /* SO_TIMESTAMPNS */, &on, 4) == 0
            && setsockopt(fd, SOL_SOCKET, 33 /* SO_RCVBUFFORCE */, &buffer, 4) == 0
        guard ok else {
            let text = String(cString: strerror(errno))
            close(fd)
            throw LabError("AF_PACKET on \(interface): \(text)")
        }
        return fd
    }

    /// Reads every packet the kernel holds for the sockets (without waiting) into `packets`.
    func drain() {
        var data = [UInt8](repeating: 0, count: 2048)
        var control = [UInt8](repeating: 0, count: 64)
        var name = [UInt8](repeating: 0, count: 20)
        for socket in sockets {
            while true {
                control.replaceSubrange(0..<16, with: repeatElement(0, count: 16))  // no stale timestamp
                let received: Int = data.withUnsafeMutableBytes { bytes in
                    control.withUnsafeMutableBytes { controlBytes in
                        name.withUnsafeMutableBytes { nameBytes in
                            var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                                var message = msghdr(msg_name: nameBytes.baseAddress, msg_namelen: 20, msg_iov: vectorPointer,
                                                     msg_iovlen: 1, msg_control: controlBytes.baseAddress,
                                                     msg_controllen: controlBytes.count, msg_flags: 0)
                                return recvmsg(socket.fd, &message, Int32(MSG_DONTWAIT))
                            }
                        }
                    }
                }
                guard received > 0 else { break }
                // sockaddr_ll: protocol at 2 (network order), packet type at 10.
                guard name[2] == 0x08 && name[3] == 0x00, let time = Self.timestamp(control),
                      let packet = Self.parse(data[0..<received], time: time, receiverSide: socket.receiverSide,
                                              outgoing: name[10] == 4 /* PACKET_OUTGOING */) else { continue }
                packets.append(packet)
            }
        }
    }

    /// The SCM_TIMESTAMPNS control message's time (the first control message: the only one asked for).
    private static func timestamp(_ control: [UInt8]) -> Double? {
        // struct cmsghdr: length (8), level (4), type (4), then a struct timespec.
        let (level, type) = control.withUnsafeBytes { ($0.load(fromByteOffset: 8, as: Int32.self), $0.load(fromByteOffset: 12, as: Int32.self)) }
        guard level == SOL_SOCKET && type == 35 else { return nil }
        let (seconds, nanoseconds) = control.withUnsafeBytes { ($0.load(fromByteOffset: 16, as: Int.self), $0.load(fromByteOffset: 24, as: Int.self)) }
        return Double(seconds) + Double(nanoseconds) / 1e9
    }

    private static func parse(_ bytes: ArraySlice<UInt8>, time: Double, receiverSide: Bool, outgoing: Bool) -> Packet? {
        let ip = Array(bytes)
        guard ip.count >= 20, ip[0] >> 4 == 4 else { return nil }
        let header = Int(ip[0] & 15) * 4
        var identityBytes = [UInt8](repeating: 0, count: 24)
        let available = min(24, ip.count - header)
        if available > 0 { identityBytes.replaceSubrange(0..<available, with: ip[header..<(header + available)]) }
        let identity = identityBytes.withUnsafeBytes {
            Identity(first: $0.load(fromByteOffset: 0, as: UInt64.self), second: $0.load(fromByteOffset: 8, as: UInt64.self),
                     third: $0.load(fromByteOffset: 16, as: UInt64.self), length: ip.count)
        }
        var packet = Packet(time: time, receiverSide: receiverSide, outgoing: outgoing, identity: identity,
                            protocolNumber: ip[9])
        func be32(_ offset: Int) -> UInt32 { ip[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        let udp = header + 8
        if ip[9] == 17, ip.count >= udp + 32, ip[udp] >> 6 == 2 {
            if ip[udp + 1] == 200 {
                packet.senderReportNTP = UInt64(be32(udp + 8)) << 32 | UInt64(be32(udp + 12))
            } else if ip[udp + 1] == 201, ip[udp] & 31 >= 1 {
                packet.receiverReport = (be32(udp + 24), be32(udp + 28))
            }
        }
        return packet
    }
}

extension RouterCapture {
    /// A packet toward the receiver through the router: when it arrived from the sender's side
    /// and when it left toward the receiver (its time in the bottleneck's queue between).
    struct Passage {
        var entered: Double
        var left: Double
        var packet: Packet
    }

    /// Every packet toward the receiver seen both arriving and leaving, in order of arrival
    /// (the ones the bottleneck dropped only arrived).
    func passages() -> [Passage] {
        var arrivals: [Identity: Packet] = [:]
        for packet in packets where !packet.receiverSide && !packet.outgoing { arrivals[packet.identity] = packet }
        return packets.compactMap { packet in
            guard packet.receiverSide && packet.outgoing, let arrival = arrivals[packet.identity] else { return nil }
            return Passage(entered: arrival.time, left: packet.time, packet: arrival)
        }.sorted { $0.entered < $1.entered }
    }

    /// The queue's delay, in seconds, for a packet arriving at `time`: until the last packet that
    /// arrived before it left (0 if it had already). Nil before the first passage.
    static func queueDelay(at time: Double, in passages: [Passage]) -> Double? {
        var low = 0, high = passages.count
        while low < high {
            let middle = (low + high) / 2
            if passages[middle].entered < time { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? nil : max(passages[low - 1].left - time, 0)
    }

    /// When each sender report arrived at the router from the sender (Unix seconds), whether
    /// the bottleneck passed it or not.
    func senderReportArrivals() -> [Double] {
        packets.filter { !$0.receiverSide && !$0.outgoing && $0.senderReportNTP != nil }.map(\.time)
    }

    /// A sender report's round trip as the router saw it.
    struct ReportRoundTrip {
        /// When the report arrived from the sender and when its first answer left toward it (Unix seconds).
        var reportEntered: Double
        var answerLeft: Double
        /// From the report's arrival to its answer's departure, less the receiver's hold (from
        /// the report's departure toward the receiver to the answer's arrival): the RTT from the
        /// router, which leaves out only the two hops between the sender and the router (µs).
        var roundTrip: Double
    }

    /// Each sender report that went through and was answered (its first receiver report with
    /// that LSR, as the sender takes one sample per report), in order of the answers.
    func reportRoundTrips(_ passages: [Passage]) -> [ReportRoundTrip] {
        var reports: [UInt32: Passage] = [:]
        for passage in passages {
            if let ntp = passage.packet.senderReportNTP { reports[UInt32(truncatingIfNeeded: ntp >> 16)] = passage }
        }
        // An answer by its LSR and DLSR: repeated answers to one report can share their first
        // bytes (the UDP checksum of a veth's packet is only the pseudo-header's until it leaves).
        struct Answer: Hashable { var lastSR: UInt32, delay: UInt32 }
        var answersArrived: [Answer: Double] = [:]
        for packet in packets where packet.receiverSide && !packet.outgoing {
            if let answer = packet.receiverReport { answersArrived[Answer(lastSR: answer.lastSR, delay: answer.delay)] = packet.time }
        }
        var firstAnswer: [UInt32: (left: Double, arrived: Double)] = [:]
        for packet in packets where !packet.receiverSide && packet.outgoing {
            guard let answer = packet.receiverReport,
                  let arrived = answersArrived[Answer(lastSR: answer.lastSR, delay: answer.delay)] else { continue }
            if let known = firstAnswer[answer.lastSR], known.left <= packet.time { continue }
            firstAnswer[answer.lastSR] = (packet.time, arrived)
        }
        return firstAnswer.compactMap { lastSR, answer in
            guard let report = reports[lastSR] else { return nil }
            return ReportRoundTrip(reportEntered: report.entered, answerLeft: answer.left,
                                   roundTrip: (answer.left - report.entered) - (answer.arrived - report.left))
        }.sorted { $0.answerLeft < $1.answerLeft }
    }
}
