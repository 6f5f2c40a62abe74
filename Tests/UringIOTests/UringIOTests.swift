import Glibc
import Testing
import UringIO

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct MarkingTests {
    /// Every service class and ECN codepoint comes back as exactly the TOS byte sent.
    @Test(arguments: [SocketAddress.Family.ipv4, .ipv6])
    func everyClassAndCodepointArrivesAsSent(family: SocketAddress.Family) throws {
        let pair = try LoopbackPair(family: family)
        var expected: [UInt8] = []
        var index = 0
        for serviceClass in ServiceClass.allCases {
            for ecn in [ECNCodepoint.notECT, .ect0, .ect1] {
                let mark = TrafficMark(serviceClass, ecn: ecn)
                // Three datagrams per mark: a GSO group on kernels that take it.
                let datagrams = (0..<3).map { patternDatagram(index: index + $0, length: 300) }
                index += 3
                try pair.send(datagrams, mark: mark)
                expected += Array(repeating: mark.tos, count: 3)
            }
        }
        try pair.pump(until: expected.count, reportsExpected: 12)
        #expect(pair.received.count == expected.count)
        #expect(pair.received.map(\.tos) == expected)
        #expect(pair.received.map(\.payload) == (0..<index).map { patternDatagram(index: $0, length: 300) })
        #expect(pair.receiver.counters.ecn[Int(ECNCodepoint.ect0.rawValue)] == 12)
        #expect(pair.receiver.counters.ecn[Int(ECNCodepoint.ect1.rawValue)] == 12)
        #expect(pair.receiver.counters.ecn[Int(ECNCodepoint.notECT.rawValue)] == 12)
        #expect(pair.receiver.counters.dscp[46] == 9)
        #expect(pair.receiver.counters.dscp[34] == 9)
        #expect(pair.receiver.counters.dscp[8] == 9)
        #expect(pair.receiver.counters.dscp[0] == 9)
        #expect(pair.reports.allSatisfy { $0.failedDatagrams == 0 && $0.sentDatagrams == 3 })
    }

    /// Sends with the socket's own mark carry no TOS cmsg and still arrive with that mark:
    /// single datagrams go as plain sends (no msghdr), a GSO run as a sendmsg with only its
    /// `UDP_SEGMENT` cmsg (so the kernel keeps the connected socket's cached route). Another
    /// mark on the same socket goes by sendmsg with its cmsg.
    @Test(arguments: [SocketAddress.Family.ipv4, .ipv6], [false, true])
    func sendsWithTheSocketsOwnMarkCarryNoCmsg(family: SocketAddress.Family, gso: Bool) throws {
        if gso { try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT") }
        let pair = try LoopbackPair(family: family)
        let own = TrafficMark(.realtime, ecn: .ect1)
        let other = TrafficMark(.background, ecn: .ect0)
        try pair.sender.setTrafficMark(own)
        pair.sender.gsoEnabled = gso  // without: one send per datagram
        let first = (0..<8).map { patternDatagram(index: $0, length: 500) }
        let second = (8..<16).map { patternDatagram(index: $0, length: 500) }
        try pair.send(first, mark: own)
        try pair.send(second, mark: other)
        try pair.pump(until: 16, reportsExpected: 2)
        #expect(pair.received.map(\.payload) == first + second)
        #expect(pair.received.map(\.tos) == Array(repeating: own.tos, count: 8) + Array(repeating: other.tos, count: 8))
        let counters = pair.queue.counters
        if gso {
            #expect(counters.sendCalls == 2 && counters.gsoSends == 2 && counters.plainSends == 0)
            #expect(counters.markCmsgs == 1)
        } else {
            #expect(counters.sendCalls == 16 && counters.plainSends == 8)
            #expect(counters.markCmsgs == 8)
        }
    }

    /// An IPv6 socket's own mark reaches an IPv4-mapped destination (which takes `IP_TOS`, not
    /// the traffic class).
    @Test func theSocketsMarkReachesAnIPv4MappedPeer() throws {
        let pair = try LoopbackPair(mappedSender: true)
        let mark = TrafficMark(.video, ecn: .ect1)
        try pair.sender.setTrafficMark(mark)
        let datagram = patternDatagram(index: 0, length: 100)
        #expect(Glibc.send(pair.sender.fd, datagram, datagram.count, 0) == datagram.count)
        try pair.pump(until: 1, reportsExpected: 0)
        #expect(pair.received.map(\.payload) == [datagram])
        #expect(pair.received.map(\.tos) == [mark.tos])
    }

    /// Through the send queue, an IPv6 socket's sends to an IPv4-mapped peer arrive with their
    /// own marks: the socket's (no cmsg) and others (their cmsg, which that path reads as
    /// `IP_TOS`), to the connected peer and to a destination named per slot, GSO on and off.
    @Test(arguments: [false, true])
    func everyMarkReachesAnIPv4MappedPeerThroughTheQueue(gso: Bool) throws {
        if gso { try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT") }
        let pair = try LoopbackPair(mappedSender: true)
        pair.sender.gsoEnabled = gso
        let own = TrafficMark(.realtime, ecn: .ect1)
        let others = [TrafficMark(.background, ecn: .ect0), TrafficMark(.video, ecn: .notECT)]
        try pair.sender.setTrafficMark(own)
        let mapped = SocketAddress(ip: "::ffff:127.0.0.1", port: pair.destination.port)!
        var expected: [(payload: [UInt8], tos: UInt8)] = []
        for (group, mark) in ([own] + others).enumerated() {
            for named in [false, true] {
                let datagrams = (0..<4).map { patternDatagram(index: expected.count + $0, length: 400) }
                let slot = try #require(pair.queue.acquire())
                for datagram in datagrams { _ = datagram.withUnsafeBytes { pair.queue.appendDatagram(slot, copying: $0) } }
                pair.queue.commit(slot, socketIndex: pair.senderIndex, destination: named ? mapped : nil,
                                  mark: mark, tag: UInt64(group))
                try pair.queue.submitReady()
                try pair.ring.submit()
                expected += datagrams.map { ($0, mark.tos) }
            }
        }
        try pair.pump(until: expected.count, reportsExpected: 6)
        #expect(pair.received.map(\.payload) == expected.map(\.payload))
        #expect(pair.received.map(\.tos) == expected.map(\.tos))
        #expect(pair.queue.counters.markCmsgs == (gso ? 4 : 16))  // the other marks' sends
    }

    @Test func trafficMarkPacksDSCPAndECN() {
        #expect(TrafficMark(.realtime, ecn: .ect0).tos == 0xBA)
        #expect(TrafficMark(.video, ecn: .ect1).tos == 0x89)
        #expect(TrafficMark(.background, ecn: .notECT).tos == 0x20)
        #expect(TrafficMark(tos: 0xBB) == TrafficMark(dscp: 46, ecn: .ce))
    }
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct GSOTests {
    /// Equal-size datagrams in one slot go as one GSO send; the receiver gets each intact.
    @Test func oneSlotIsOneGSOSend() throws {
        try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT")
        let pair = try LoopbackPair()
        let datagrams = (0..<40).map { patternDatagram(index: $0, length: $0 == 39 ? 500 : 1200) }
        try pair.send(datagrams, mark: TrafficMark(.video, ecn: .ect0))
        try pair.pump(until: 40, reportsExpected: 1)
        #expect(pair.queue.counters.gsoSends == 1)
        #expect(pair.queue.counters.sendCalls == 1)
        #expect(pair.received.map(\.payload) == datagrams)
    }

    /// GSO the socket cannot do (SO_NO_CHECK makes the kernel refuse UDP_SEGMENT with EINVAL):
    /// GSO goes off for that socket and every datagram still arrives, in order.
    @Test func rejectedGSOFallsBackWithoutLoss() throws {
        try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT")
        let pair = try LoopbackPair()
        try pair.sender.setOption(SOL_SOCKET, SO_NO_CHECK, 1, name: "SO_NO_CHECK")
        var all: [[UInt8]] = []
        for group in 0..<5 {
            let datagrams = (0..<20).map { patternDatagram(index: group * 20 + $0, length: 1000) }
            all += datagrams
            let slot = try #require(pair.queue.acquire())
            for d in datagrams { _ = d.withUnsafeBytes { pair.queue.appendDatagram(slot, copying: $0) } }
            pair.queue.commit(slot, socketIndex: pair.senderIndex, destination: nil,
                              mark: TrafficMark(.video, ecn: .ect0), tag: UInt64(group))
        }
        try pair.queue.submitReady()
        try pair.ring.submit()
        try pair.pump(until: 100, reportsExpected: 5)
        #expect(pair.sender.gsoEnabled == false)
        #expect(pair.queue.counters.gsoFallbacks == 1)
        #expect(pair.received.map(\.payload) == all)
        #expect(pair.reports.map(\.sentDatagrams) == [20, 20, 20, 20, 20])
        #expect(pair.reports.map(\.tag) == [0, 1, 2, 3, 4])
        #expect(pair.queue.counters.failedDatagrams == 0)
    }

    /// A GRO receiver splits coalesced segments back into datagrams (the last one shorter), and
    /// counts each of them, its bytes and its marks, though they are counted once per completion.
    @Test func groReceiverSplitsSegments() throws {
        try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT")
        let pair = try LoopbackPair(gro: true)
        let datagrams = (0..<64).map { patternDatagram(index: $0, length: $0 == 63 ? 500 : 1000) }
        let mark = TrafficMark(.video, ecn: .ect0)
        try pair.send(datagrams, mark: mark)
        try pair.pump(until: 64, reportsExpected: 1)
        #expect(pair.received.map(\.payload) == datagrams)
        #expect(pair.receiver.counters.groCompletions >= 1)
        #expect(pair.receiver.counters.truncated == 0)
        #expect(pair.receiver.counters.datagrams == 64)
        #expect(pair.receiver.counters.bytes == 63 * 1000 + 500)
        #expect(pair.receiver.counters.ecn == [0, 0, 64, 0])  // indexed by the ECN bits: ECT(0) is 0b10
        #expect(pair.receiver.counters.dscp[Int(mark.dscp)] == 64 && pair.receiver.counters.dscp.reduce(0, +) == 64)
    }
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct RingTests {
    /// Many SQEs, one io_uring_enter: the ring counts its enters.
    @Test func oneSubmissionCarriesManySends() throws {
        let pair = try LoopbackPair()
        try #require(pair.ring.enterCalls == 0)
        pair.sender.gsoEnabled = false
        let datagrams = (0..<64).map { patternDatagram(index: $0, length: 100 + $0) }
        try pair.send(datagrams, mark: TrafficMark(.default, ecn: .notECT))
        #expect(pair.ring.enterCalls == 1)
        #expect(pair.ring.submittedEntries == 65)  // 64 sends + the multishot receive
        try pair.pump(until: 64, reportsExpected: 1)
        #expect(pair.received.map(\.payload) == datagrams)
    }

    /// A wait with its own timeout: the completions of the sends it submits (posted during
    /// the submission) do not end it when the caller counts them in, it ends at the timeout
    /// without posting anything of its own, and a wait for one completion ends at once.
    @Test func waitTimeoutsOutwaitInlineSendCompletions() throws {
        let ring = try Ring()
        try #require(ring.hasWaitTimeouts, "kernel without IORING_FEAT_EXT_ARG (before 5.11)")
        let receiver = try UDPSocket(family: .ipv4)
        try receiver.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        let sender = try UDPSocket(family: .ipv4)
        try sender.connect(try receiver.localAddress())
        sender.gsoEnabled = false
        let queue = UDPSendQueue(ring: ring, slots: 4, slotCapacity: 4096)
        let index = queue.register(sender)
        var reports: [SendReport] = []
        queue.onReport = { reports.append($0) }
        func prepare(_ count: Int) throws {
            let slot = try #require(queue.acquire())
            for _ in 0..<count { _ = queue.appendDatagram(slot, length: 200) }
            queue.commit(slot, socketIndex: index, destination: nil, mark: TrafficMark(.default, ecn: .notECT), tag: 0)
            #expect(try queue.submitReady() == count)
        }
        // Three sends, waiting for one completion beyond them: the wait lasts its 30 ms.
        try prepare(3)
        var start = monotonicNanoseconds()
        #expect(try ring.submit(waitingFor: 1 + 3, timeoutNanoseconds: 30_000_000) == 3)
        #expect(monotonicNanoseconds() - start >= 29_000_000)
        var kinds: [UInt8] = []
        #expect(ring.reap { kinds.append($0.tag.kind); queue.handle($0) } == 3)
        #expect(kinds == [CompletionTag.sendKind, CompletionTag.sendKind, CompletionTag.sendKind])
        #expect(reports.count == 1 && reports[0].sentDatagrams == 3)
        // Nothing to submit: the timeout alone, and no completion for it.
        start = monotonicNanoseconds()
        #expect(try ring.submit(waitingFor: 1, timeoutNanoseconds: 20_000_000) == 0)
        #expect(monotonicNanoseconds() - start >= 19_000_000)
        #expect(ring.reap { _ in } == 0)
        // Waiting for one completion: the send's own ends the wait long before its 5 s.
        try prepare(1)
        start = monotonicNanoseconds()
        #expect(try ring.submit(waitingFor: 1, timeoutNanoseconds: 5_000_000_000) == 1)
        #expect(monotonicNanoseconds() - start < 4_000_000_000)
        #expect(ring.reap { queue.handle($0) } == 1)
        #expect(ring.enterCalls == 3)
        // All four datagrams arrived.
        var buffer = [UInt8](repeating: 0, count: 512)
        var arrived = 0
        while try buffer.withUnsafeMutableBytes({ try PlainUDP.receiveFrom(receiver, into: $0, flags: Int32(MSG_DONTWAIT)) }) == 200 {
            arrived += 1
        }
        #expect(arrived == 4)
    }

    /// Sends go through the ring's registered file table (64 entries, shared by the queues of
    /// one ring): each reaches its own socket's peer, the sockets past the table's end send by
    /// descriptor, and a queue's entries are free again once it is gone.
    @Test func sendsThroughRegisteredFilesReachTheirOwnPeers() throws {
        let ring = try Ring()
        let receivers = try (0..<2).map { _ in
            let receiver = try UDPSocket(family: .ipv4)
            try receiver.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
            receiver.setReceiveBufferSize(1 << 20)
            return receiver
        }
        /// One datagram through each of `count` sockets of a new queue, socket i to receiver i % 2;
        /// returns the indexes each receiver got.
        func sendThroughNewQueue(sockets count: Int) throws -> [[Int]] {
            let queue = UDPSendQueue(ring: ring, slots: 4, slotCapacity: 256)
            var reported = 0
            queue.onReport = { reported += $0.sentDatagrams }
            for i in 0..<count {
                let sender = try UDPSocket(family: .ipv4)
                try sender.connect(try receivers[i % 2].localAddress())
                let index = queue.register(sender)
                let slot = try #require(queue.acquire())
                let buffer = try #require(queue.appendDatagram(slot, length: 8))
                buffer.storeBytes(of: UInt64(i), as: UInt64.self)
                queue.commit(slot, socketIndex: index, destination: nil, mark: TrafficMark(.default, ecn: .notECT), tag: 0)
                try queue.submitReady()
                try ring.submit(waitingFor: 1)
                _ = ring.reap { queue.handle($0) }
            }
            #expect(reported == count)
            return try receivers.map { receiver in
                var got: [Int] = []
                var value: UInt64 = 0
                while try withUnsafeMutableBytes(of: &value, {
                    try PlainUDP.receiveFrom(receiver, into: $0, flags: Int32(MSG_DONTWAIT))
                }) == 8 {
                    got.append(Int(value))
                }
                return got
            }
        }
        let expected = { (count: Int) in [Array(stride(from: 0, to: count, by: 2)), Array(stride(from: 1, to: count, by: 2))] }
        #expect(try sendThroughNewQueue(sockets: 70) == expected(70))
        #expect(try sendThroughNewQueue(sockets: 64) == expected(64))
    }

    /// A send to a closed port on a connected socket fails with ECONNREFUSED and is reported.
    @Test func failedSendsAreReportedNotLost() throws {
        let ring = try Ring()
        let closed: SocketAddress
        do {
            // Reserve a port, then close it: sends there are refused (ICMP port unreachable).
            let probe = try UDPSocket(family: .ipv4)
            try probe.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
            closed = try probe.localAddress()
        }
        let sender = try UDPSocket(family: .ipv4)
        try sender.connect(closed)
        let queue = UDPSendQueue(ring: ring, slots: 4, slotCapacity: 2048)
        let index = queue.register(sender)
        var reports: [SendReport] = []
        queue.onReport = { reports.append($0) }
        for round in 0..<4 {
            let slot = try #require(queue.acquire())
            _ = queue.appendDatagram(slot, length: 100)
            queue.commit(slot, socketIndex: index, destination: nil, mark: TrafficMark(.default, ecn: .notECT),
                         tag: UInt64(round))
            try queue.submitReady()
            try ring.submit(waitingFor: 1)
            _ = ring.reap { queue.handle($0) }
        }
        let sent = reports.reduce(0) { $0 + $1.sentDatagrams }
        let failed = reports.reduce(0) { $0 + $1.failedDatagrams }
        #expect(reports.count == 4)
        #expect(sent + failed == 4)
        #expect(failed >= 1)
        #expect(queue.counters.errors[Errno(ECONNREFUSED), default: 0] == failed)
        #expect(reports.contains { $0.errno == ECONNREFUSED })
    }
}
