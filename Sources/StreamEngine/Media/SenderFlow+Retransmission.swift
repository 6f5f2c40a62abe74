import MediaFormats
import UringIO

extension SenderFlow {
    /// The retransmitter of a flow with `retransmission` on: RTX on a route of its own (same
    /// socket and marking), its rate at most a quarter of the pace, from `rtxSSRC`.
    static func makeRetransmitter(_ config: MediaSenderConfig, flow: MediaFlow, rtxSSRC: UInt32, producer: DatagramProducer,
                                  paced: PacedSender, socket: UDPSocket, mark: TrafficMark) -> Retransmitter {
        let route = paced.addRoute(socket: socket, destination: nil, mark: mark)
        if !config.rtxSameSSRC { flow.payloadReserve = 2 }
        let history = RetransmissionHistory(ssrc: rtxSSRC, payloadType: config.rtxPayloadType,
                                            rtxTime: config.rtxTime.nanoseconds, sameSSRC: config.rtxSameSSRC,
                                            rateBytesPerSecond: Retransmitter.rate(ofPace: config.paceBitsPerSecond))
        return Retransmitter(inner: producer, flow: flow, route: route, history: history)
    }

    /// Answers the NACKs that feedback from `source` brought; from another address than the
    /// receiver's they are rejected (counted).
    func answerNACKs(from source: SocketAddress?) {
        let nacks = rtcp.takeNACKs()
        guard let retransmitter else { return }
        retransmitter.confirm(rtcp.takeRetransmissionsReceived())
        // Retransmissions still in flight that a packet sent after them overtook were lost. The
        // reorder window: the controller's (widened where the path reordered), at least a
        // quarter of the RTT, as the controller's own time threshold has it.
        let quarterRTT = rtcp.rttSmoothed.map { Int64($0 * 1e6) / 4 } ?? 0
        let reorderWindow = max(flow.congestion?.lossCounts?.reorderWindow.nanoseconds ?? 0, quarterRTT)
        retransmitter.writeOffOvertaken(deliveredSentAt: flow.log.newestConfirmedSentAt, reorderWindow: reorderWindow)
        guard !nacks.isEmpty else { return }
        // A request within half a round trip of the last answer, or of the packet itself, is premature.
        if let rtt = rtcp.rttSmoothed { retransmitter.noteRTT(milliseconds: rtt) }
        var peer = destination
        if !config.rtcpMux { peer.port = peer.port &+ 1 }
        for nack in nacks {
            if let source, source != peer {
                retransmitter.rejectForeign()
            } else {
                retransmitter.handle(nack)
            }
        }
    }

    /// Copies the retransmission counters into `local`.
    func publishRetransmissions() {
        guard let retransmitter else { return }
        let history = retransmitter.history
        local.rtxSSRC = history.sameSSRC ? nil : history.ssrc
        if !history.sameSSRC {
            // Only per-packet feedback (our receiver's) says which retransmissions arrived.
            if rtcp.perPacketFeedback {
                retransmitter.expire(sentBefore: monotonicNanoseconds() - rtcp.lossTimeout)
            } else {
                retransmitter.writeOffInFlight()
            }
            local.rtxConfirmed = retransmitter.confirmed
            local.rtxLost = retransmitter.lost
            local.packetsRecovered = retransmitter.recovered
        }
        local.rtxSent = retransmitter.sent
        local.rtxBytes = retransmitter.sentBytes
        local.rtxFailed = retransmitter.failed
        local.nackReceived = history.nacksReceived
        local.nackRequested = history.requested
        local.nackRequestedBytes = history.requestedBytes
        local.nackRejected = history.rejected
        if retransmitter.overflowed > 0 { local.nackRejected[.rateLimited, default: 0] += retransmitter.overflowed }
        if rtcp.foreignNACKs > 0 { local.nackRejected[.foreign, default: 0] += rtcp.foreignNACKs }
    }
}
