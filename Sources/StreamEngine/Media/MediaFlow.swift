import MediaFormats
import UringIO

/// One RTP stream: access units in, RFC 7798 packets out, written straight into send slots.
///
/// The packetizer's budget follows the flow's path MTU (IP, UDP and RTP headers taken off),
/// read again for every access unit.
final class MediaFlow: DatagramProducer {
    let route: Int
    let ssrc: UInt32
    let payloadType: UInt8
    private let timestampOffset: UInt32
    private(set) var nextSequence: UInt16
    private var queue: [AccessUnit] = []
    private var queueHead = 0
    private var current: AccessUnit?
    private var plan: [HEVCPayload] = []
    private var planIndex = 0
    private var packetizer: HEVCPacketizer
    /// The largest UDP payload allowed on this flow's path.
    private(set) var maxDatagramSize: Int

    // Counters (engine thread only).
    private(set) var framesQueued = 0
    private(set) var framesWritten = 0
    private(set) var keyframesWritten = 0
    private(set) var packetsWritten = 0
    private(set) var largestDatagram = 0
    private(set) var clamped = 0

    init(route: Int, maxDatagramSize: Int, payloadType: UInt8 = 96) throws(HEVCPacketizerError) {
        self.route = route
        self.payloadType = payloadType
        self.maxDatagramSize = maxDatagramSize
        var generator = SystemRandomNumberGenerator()
        ssrc = generator.next()
        nextSequence = generator.next()
        timestampOffset = generator.next()
        packetizer = try HEVCPacketizer(maxPayloadSize: maxDatagramSize - RTPHeader.fixedSize)
    }

    /// Access units waiting (not yet started).
    var queuedAccessUnits: Int { queue.count - queueHead }

    /// True when nothing is waiting or half-written.
    var isEmpty: Bool { queuedAccessUnits == 0 && planIndex >= plan.count }

    func enqueue(_ accessUnit: AccessUnit) {
        queue.append(accessUnit)
        framesQueued += 1
    }

    /// Changes the datagram budget from the next access unit on.
    func setMaxDatagramSize(_ size: Int) throws(HEVCPacketizerError) {
        packetizer = try HEVCPacketizer(maxPayloadSize: size - RTPHeader.fixedSize)
        maxDatagramSize = size
    }

    func peekDatagram() -> PendingDatagram? {
        if planIndex >= plan.count {
            guard queueHead < queue.count else { return nil }
            let next = queue[queueHead]
            queueHead += 1
            if queueHead > 64 && queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            current = next
            plan = packetizer.plan(next)
            planIndex = 0
            if plan.isEmpty { return peekDatagram() }
        }
        return PendingDatagram(route: route, size: RTPHeader.fixedSize + plan[planIndex].size,
                               tag: UInt64(packetsWritten))
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        guard let accessUnit = current else { return }
        let payload = plan[planIndex]
        let header = RTPHeader(marker: payload.marker, payloadType: payloadType, sequenceNumber: nextSequence,
                               timestamp: accessUnit.timestamp &+ timestampOffset, ssrc: ssrc)
        header.write(to: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<RTPHeader.fixedSize]))
        let written = packetizer.write(payload, of: accessUnit,
                                       into: UnsafeMutableRawBufferPointer(rebasing: buffer[RTPHeader.fixedSize...]))
        let size = RTPHeader.fixedSize + written
        if size > maxDatagramSize { clamped += 1 }
        largestDatagram = max(largestDatagram, size)
        nextSequence &+= 1
        packetsWritten += 1
        planIndex += 1
        if planIndex == plan.count {
            framesWritten += 1
            if accessUnit.isKeyframe { keyframesWritten += 1 }
            current = nil
        }
    }
}
