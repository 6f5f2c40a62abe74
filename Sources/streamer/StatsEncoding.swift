import MediaFormats
import MediaSources
import StreamEngine
import UringIO

// Every key of the stats JSON that `streamer send` and `streamer recv` write (`--stats`,
// `--stats-every`), in one place. Scripts read these names (the interface contract, and the
// keys README.md documents since): rename none of them. Each top-level object carries
// `version` (Sources/streamer/Version.swift).

/// The sender's stats JSON, as in the interface contract: the first flow's keys at the top
/// level (all there is with one `--to`), and every flow's under `flows`.
func senderStatsObject(_ all: [SenderStats]) -> [String: Any] {
    var object = flowStatsObject(all[0])
    object["role"] = "send"
    object["version"] = streamerVersion
    object["cpu"] = cpuObject()
    object["flows"] = all.map(flowStatsObject)
    return object
}

/// One flow's stats keys.
func flowStatsObject(_ stats: SenderStats) -> [String: Any] {
    func number(_ value: Double?) -> Any { value.map { ($0 * 1000).rounded() / 1000 } ?? StatsJSON.Null() }
    return [
        "destination": stats.destination,
        // A group: no receiver confirms packets, so there is no bound and no congestion control.
        "multicast": (try? SocketAddress.parse(stats.destination))?.isMulticast ?? false,
        "receivers": stats.receivers.map { report -> [String: Any] in
            ["ssrc": Int(report.ssrc), "fractionLost": number(report.fractionLost), "cumulativeLost": report.cumulativeLost,
             "highestSequence": Int(report.highestSequence), "jitterMs": number(report.jitterMs),
             "reports": report.reports, "lastReportAtUnix": report.lastReportAtUnix, "rttMs": number(report.rttMs),
             "address": orNull(report.address)]
        },
        "receiversSummary": ["count": stats.receivers.count, "evicted": stats.receiversEvicted,
                             "worstFractionLost": number(stats.receivers.map(\.fractionLost).max()),
                             "worstCumulativeLost": stats.receivers.map(\.cumulativeLost).max() ?? 0,
                             "medianRttMs": number(median(stats.receivers.compactMap(\.rttMs)))],
        "srtp": srtpStatsObject(stats.srtp),
        "ssrc": Int(stats.ssrc),
        "redirects": stats.redirects,
        "packets": ["sent": stats.packetsSent, "confirmed": stats.packetsConfirmed, "lost": stats.packetsLost,
                    "unconfirmed": stats.packetsUnconfirmed, "abandoned": stats.packetsAbandoned,
                    "recovered": stats.packetsRecovered,
                    "failed": stats.packetsFailed],
        "bytes": ["sent": stats.bytesSent, "unconfirmed": stats.bytesUnconfirmed,
                  "peakUnconfirmed": stats.peakUnconfirmedBytes, "maxUnconfirmed": stats.maxUnconfirmedBytes],
        "frames": ["encoded": stats.framesEncoded, "sent": stats.framesSent,
                   "droppedUnconfirmed": stats.framesDroppedUnconfirmed,
                   "droppedQueueFull": stats.framesDroppedQueueFull, "droppedUnviable": stats.framesDroppedUnviable,
                   "keyframes": stats.keyframes],
        "path": ["mtu": stats.pathMTU, "mtuSource": stats.mtuSource.rawValue, "datagramSize": stats.datagramSize,
                 "clamped": stats.clamped, "framesClamped": stats.framesClamped,
                 "probes": ["sent": stats.probesSent, "confirmed": stats.probesConfirmed, "lost": stats.probesLost],
                 "icmpReports": stats.icmpMTUReports, "blackHoles": stats.blackHoles, "searches": stats.mtuSearches,
                 "foundAfterMs": number(stats.mtuFoundAfterMs),
                 "viable": stats.pathViable, "unviableMs": number(stats.pathUnviableMs),
                 "unviableEpisodes": stats.pathUnviableEpisodes, "changes": stats.pathChanges, "rebinds": stats.pathRebinds,
                 "interface": orNull(stats.pathInterface), "gateway": orNull(stats.pathGateway),
                 "source": orNull(stats.pathSource), "unviableAtUnix": orNull(stats.pathUnviableAt),
                 "viableAgainAtUnix": orNull(stats.pathViableAgainAt),
                 "resumeMs": number(stats.pathResumeMs),
                 "monitor": ["overruns": stats.pathMonitorOverruns, "failures": stats.pathMonitorFailures]],
        "rttMs": ["last": number(stats.rttLast), "min": number(stats.rttMin), "smoothed": number(stats.rttSmoothed),
                  "median": number(stats.rttMedian), "p95": number(stats.rtt95thPercentile),
                  "samples": stats.rttSamplesWhileSending, "lastAtUnix": orNull(stats.rttLastAt)],
        "ecn": ["codepoint": stats.ecn, "ceReported": stats.ceReported, "path": stats.ecnPath,
                "reported": ["asSent": stats.ecnReported.asSent, "ce": stats.ecnReported.ce,
                             "bleached": stats.ecnReported.bleached, "remarked": stats.ecnReported.remarked],
                "remarkedAtPacket": orNull(stats.ecnRemarkedAtPacket)] as [String: Any],
        "dscp": Int(stats.dscp),
        "pacing": ["rateBps": stats.pacingRate, "batches": stats.batches,
                   "datagramsPerSubmit": stats.batches > 0 ? Double(stats.packetsSent) / Double(stats.batches) : 0,
                   "sends": stats.sendCalls, "gso": stats.gsoSends, "ioUringEnters": stats.enterCalls, "flows": stats.flows,
                   "mixedSubmissions": stats.mixedSubmissions],
        "feedback": ["enabled": stats.feedback, "absent": stats.feedbackAbsent, "reports": stats.feedbackReports, "rejected": stats.feedbackRejected.byStatsKey,
                     "intervalMs": number(stats.feedbackIntervalMs),
                     "senderReports": stats.senderReports, "byeSent": stats.byeSent,
                     "keyframeRequests": stats.keyframeRequests, "keyframeRequestsIgnored": stats.keyframeRequestsIgnored, "keyframeRequestsDeferred": stats.keyframeRequestsDeferred, "kernelDrops": stats.feedbackKernelDrops],
        "receiverGone": stats.receiverGone,
        "receiverGoneEvents": stats.receiverGoneEvents,
        "rtx": ["sent": stats.rtxSent, "bytes": stats.rtxBytes, "failed": stats.rtxFailed,
                "confirmed": stats.rtxConfirmed, "lost": stats.rtxLost,
                "ssrc": orNull(stats.rtxSSRC.map { Int($0) })],
        "nack": ["received": stats.nackReceived, "requested": stats.nackRequested,
                 "requestedBytes": stats.nackRequestedBytes, "rejected": stats.nackRejected.byStatsKey],
        "errors": stats.errorsByText,
        "cc": congestionObject(stats.congestion),
    ]
}

/// The `cc` object: `enabled` false without a congestion controller, else its state.
func congestionObject(_ stats: CongestionStats?) -> [String: Any] {
    guard let stats else { return ["enabled": false] }
    return ["enabled": true, "controller": stats.controller, "active": stats.active,
            "targetBitrateBps": stats.targetBitrate, "controllerTargetBps": stats.controllerTarget,
            "senderQueueMs": (stats.senderQueueMs * 1000).rounded() / 1000, "windowBytes": stats.window, "bytesInFlight": stats.bytesInFlight,
            "pacingRateBps": stats.pacingRate, "bottleneckRateBps": orNull(stats.bottleneckRate),
            "queueDelayMs": orNull(stats.queueDelayMs),
            "ceFraction": (stats.ceFraction * 10_000).rounded() / 10_000, "rateChanges": stats.rateChanges,
            "framesDropped": stats.framesDropped,
            "losses": stats.losses.map { losses -> Any in
                ["declared": losses.declared, "spurious": losses.spurious, "cutsUndone": losses.cutsUndone,
                 "reorderWindowMs": Double(losses.reorderWindow.nanoseconds) / 1e6, "tailProbes": losses.tailProbes,
                 "feedbackStops": losses.feedbackStops]
            } ?? StatsJSON.Null(),
            "competition": stats.competition.map { mode -> Any in
                ["competing": mode.competing, "entries": mode.entries, "probes": mode.probes, "exits": mode.exits]
            } ?? StatsJSON.Null()]
}

/// `value`, or JSON null.
func orNull<T>(_ value: T?) -> Any { value.map { $0 as Any } ?? StatsJSON.Null() }

/// The sender's stats JSON with the source's own object (`source`: stalls) beside the engine's,
/// the encoder's rate changes in the top-level `cc` (`encoderReconfigs` made live,
/// `encoderReopens` made by reopening it with a keyframe, `encoderTargetBps`), and x265's CPU
/// time in `cpu.encoderSeconds` (``EncoderCPUTime``; 0 for a `.hevc` file).
func sendStatsObject(_ all: [SenderStats], source: LiveSource) -> [String: Any] {
    var object = senderStatsObject(all)
    if var cpu = object["cpu"] as? [String: Any] {
        cpu["encoderSeconds"] = EncoderCPUTime.seconds
        object["cpu"] = cpu
    }
    object["source"] = sourceStatsObject(source.stalls.stats)
    if var cc = object["cc"] as? [String: Any], cc["enabled"] as? Bool == true {
        let bitrate = source.bitrateStats
        cc["encoderReconfigs"] = bitrate.applied
        cc["encoderReopens"] = bitrate.fallbacks
        cc["encoderTargetBps"] = bitrate.targetKbps * 1000
        object["cc"] = cc
    }
    return object
}

/// The `source` object: `stalls`, `stalledMs` (including a stall under way), `stalled`, `thresholdMs`.
func sourceStatsObject(_ stats: SourceStallStats) -> [String: Any] {
    ["stalls": stats.stalls, "stalledMs": wholeMilliseconds(stats.stalledTime), "stalled": stats.isStalled,
     "thresholdMs": wholeMilliseconds(stats.threshold)]
}

/// `duration` in whole milliseconds, truncated.
func wholeMilliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
}

/// The sender's stats JSON with an `rtsp` object beside it.
func rtspStatsObject(_ gate: RTSPMediaGate) -> [String: Any] {
    var object = senderStatsObject([gate.senderStats])
    let server = gate.serverStats
    object["rtsp"] = ["connections": server.connections, "requests": server.requests, "rejected": server.rejected,
                      "client": server.client ?? StatsJSON.Null(), "ended": server.ended ?? StatsJSON.Null()] as [String: Any]
    return object
}

/// `streamer demo --stats`: both ends of the loopback run, each as its own command writes it.
func demoStatsObject(sender: SenderStats, receiver: ReceiverStats) -> [String: Any] {
    var send = senderStatsObject([sender])
    var recv = receiverStatsObject(receiver)
    for key in ["version", "cpu"] {
        send[key] = nil
        recv[key] = nil
    }
    return ["role": "demo", "version": streamerVersion, "send": send, "recv": recv, "cpu": cpuObject()]
}

/// The receiver's stats JSON, as in the interface contract.
func receiverStatsObject(_ stats: ReceiverStats) -> [String: Any] {
    var dscp: [String: Int] = [:]
    for (value, count) in stats.dscp.enumerated() where count > 0 { dscp[String(value)] = count }
    return [
        "role": "recv",
        "version": streamerVersion,
        "packets": ["received": stats.received, "lost": stats.lost, "late": stats.late,
                    "duplicate": stats.duplicate, "reordered": stats.reordered, "truncated": stats.truncated,
                    "timestampRestarts": stats.timestampRestarts, "recovered": stats.recovered,
                    "sentBeforeFirst": orNull(stats.sentBeforeFirst)],
        "probes": ["received": stats.probesReceived],
        "ecn": ["notEct": stats.ecn[0], "ect0": stats.ecn[2], "ect1": stats.ecn[1], "ce": stats.ecn[3]],
        "dscp": dscp,
        "frames": ["complete": stats.framesComplete, "incomplete": stats.framesIncomplete, "missing": stats.framesMissing,
                   "keyframes": stats.keyframes, "undecodable": stats.framesUndecodable, "late": stats.framesLate],
        "rtx": ["received": stats.rtxReceived, "bytes": stats.rtxBytes, "late": stats.rtxLate,
                "duplicate": stats.rtxDuplicate],
        "nack": ["sent": stats.nackSent, "requested": stats.nackRequested, "bytes": stats.nackBytes,
                 "abandoned": stats.nackAbandoned, "budgetLimited": stats.nackBudgetLimited,
                 "spurious": stats.nackSpurious],
        "playout": ["latencyMs": orNull(stats.playoutLatencyMs), "targetLatencyMs": orNull(stats.playoutLatencyTargetMs),
                    "derived": stats.playoutLatencyDerived, "repairAsks": orNull(stats.playoutRepairAsks),
                    "rttMs": orNull(stats.retransmissionRTTMs),
                    "addedLatencyMs": stats.playoutAddedLatencyMs.map { added -> Any in
                        ["p50": added.p50, "p95": added.p95, "max": added.max, "frames": added.frames]
                    } ?? StatsJSON.Null()],
        "srtp": srtpStatsObject(stats.srtp),
        "feedback": ["sent": stats.feedbackSent, "keyframeRequests": stats.keyframeRequests,
                     "senderReports": stats.senderReports, "errors": stats.feedbackErrors],
        "rtcp": ["interval": orNull(stats.rtcpIntervalSeconds), "members": orNull(stats.rtcpMembers),
                 "byeReceived": stats.byeReceived],
        "bytes": ["received": stats.bytesReceived],
        "rejected": stats.rejected.byStatsKey,
        "kernelDrops": stats.kernelDrops,
        "ioUringEnters": stats.enterCalls,
        "source": stats.source ?? StatsJSON.Null(),
        "sourceMoves": stats.sourceMoves,
        "streamChanges": stats.streamChanges,
        "cpu": cpuObject(),
    ]
}

/// The process's CPU time as the stats JSON spells it.
func cpuObject() -> [String: Any] {
    let cpu = ProcessCPUTime.now()
    return ["userSeconds": Double(cpu.userNanoseconds) / 1e9, "systemSeconds": Double(cpu.systemNanoseconds) / 1e9]
}

/// A reason whose count appears in the stats JSON under a stable key.
protocol StatsKeyed: Hashable {
    /// The key in the stats JSON.
    var statsKey: String { get }
}

extension ReceiveRejection: StatsKeyed {
    /// The receiver's `rejected` keys: `rtp.<RTPPacketError.reason>`, `rtcp.<RTCPParseError.reason>`,
    /// `payload.<HEVCPayloadRejection.rawValue>`, and the stream's own checks bare.
    var statsKey: String {
        switch self {
        case .rtp(let error): "rtp." + error.reason
        case .foreignSource: "foreignSource"
        case .foreignSSRC: "foreignSSRC"
        case .badProbe: "badProbe"
        case .unexpectedPayloadType: "unexpectedPayloadType"
        case .timestampJump: "timestampJump"
        case .sequenceJump: "sequenceJump"
        case .rtcpForeignSource: "rtcp.foreignSource"
        case .badRetransmission: "badRetransmission"
        case .rtcp(let kind): "rtcp." + kind.rawValue
        case .payload(let reason): "payload." + reason.rawValue
        }
    }
}

extension FeedbackRejection: StatsKeyed {
    /// The sender's `feedback.rejected` keys: `<RTCPParseError.reason>` bare, and `confirmsUnsentPacket`.
    var statsKey: String {
        switch self {
        case .rtcp(let kind): kind.rawValue
        case .confirmsUnsentPacket: "confirmsUnsentPacket"
        }
    }
}

extension NACKRejection: StatsKeyed {
    /// The sender's `nack.rejected` keys: the reason's name.
    var statsKey: String { rawValue }
}

extension Dictionary where Key: StatsKeyed, Value == Int {
    /// The counts under their stats JSON keys.
    var byStatsKey: [String: Int] {
        Dictionary<String, Int>(uniqueKeysWithValues: map { ($0.key.statsKey, $0.value) })
    }
}

extension SenderStats {
    /// `errors` keyed by text, as the stats JSON and the messages name them: the C library's
    /// text for a send's errno (`Connection refused`), or `redirect: ` and what failed.
    var errorsByText: [String: Int] {
        Dictionary(errors.map { ($0.key.description, $0.value) }, uniquingKeysWith: +)
    }
}

/// The middle value (the upper of the two middle ones for an even count); nil for none.
private func median(_ values: [Double]) -> Double? {
    values.isEmpty ? nil : values.sorted()[values.count / 2]
}
