import Foundation
import Glibc
import StreamEngine

/// The figures of one case over its measured rounds (medians, and the spread of the
/// sender's CPU per datagram as (max - min) / median).
struct CaseSummary {
    let benchCase: BenchCase
    let rounds: [RoundRecord]
    var ratioToSendto: Double?
    var receiverRatioToRecvfrom: Double?
    /// Sender CPU against raw `uring-gso` with the same receiver and size (the `stream` group).
    var ratioToUringGSO: Double?

    init(_ benchCase: BenchCase, _ rounds: [RoundRecord]) {
        self.benchCase = benchCase
        self.rounds = rounds
    }

    private func perDatagram(_ value: (RoundRecord) -> Double, by count: (RoundRecord) -> Int) -> [Double] {
        rounds.map { count($0) > 0 ? value($0) / Double(count($0)) : .nan }
    }

    var senderUser: [Double] { perDatagram({ Double($0.sender.userNanoseconds) }, by: { $0.sender.sent }) }
    var senderSystem: [Double] { perDatagram({ Double($0.sender.systemNanoseconds) }, by: { $0.sender.sent }) }
    var senderTotal: [Double] {
        perDatagram({ Double($0.sender.userNanoseconds + $0.sender.systemNanoseconds) }, by: { $0.sender.sent })
    }
    var interrupt: [Double] { perDatagram({ Double($0.sender.interruptNanoseconds) }, by: { $0.sender.sent }) }
    var softirq: [Double] { perDatagram({ Double($0.sender.softirqNanoseconds) }, by: { $0.sender.sent }) }
    var receiverUser: [Double] { perDatagram({ Double($0.receiver.int("userNs")) }, by: { $0.delivered }) }
    var receiverSystem: [Double] { perDatagram({ Double($0.receiver.int("systemNs")) }, by: { $0.delivered }) }
    var receiverTotal: [Double] {
        perDatagram({ Double($0.receiver.int("userNs") + $0.receiver.int("systemNs")) }, by: { $0.delivered })
    }
    var senderSyscalls: [Double] { perDatagram({ Double($0.sender.syscalls) }, by: { $0.sender.sent }) }
    var receiverSyscalls: [Double] { perDatagram({ Double($0.receiver.int("syscalls")) }, by: { $0.delivered }) }
    var segmentsPerSend: Double { rounds.segmentsPerSend }
    var datagramsPerSubmit: Double { rounds.datagramsPerSubmit }
    var megabitsPerSecond: Double {
        median(rounds.map { Double($0.sender.sent * benchCase.size * 8) / Double(max(1, $0.sender.wallNanoseconds)) * 1000 })
    }
    var sent: Int { rounds.reduce(0) { $0 + $1.sender.sent } }
    var planned: Int { rounds.reduce(0) { $0 + $1.planned } }
    var delivered: Int { rounds.reduce(0) { $0 + $1.delivered } }
    var intact: Bool { rounds.allSatisfy(\.intact) }
    var spread: Double {
        let values = senderTotal.filter { $0.isFinite }
        guard let low = values.min(), let high = values.max() else { return .nan }
        return (high - low) / median(values)
    }
    var notes: [String] { Array(Set(rounds.compactMap(\.sender.note))) }
    /// GSO sends per send, where the path reports GSO sends.
    var measuredGSOSends: Int? {
        rounds.allSatisfy({ $0.sender.gsoSends != nil }) && !rounds.isEmpty
            ? rounds.reduce(0) { $0 + $1.sender.gsoSends! } : nil
    }
    /// The `stream` plan of the measured rounds.
    var streamPlan: StreamPlan? { rounds.first?.stream }
    /// Mean UDP payload of what was sent.
    var meanDatagramBytes: Double { rounds.meanDatagramBytes }
}

/// What every summary takes from its rounds alike.
extension Array where Element == RoundRecord {
    /// Median over the rounds of datagrams per send (segments per send SQE).
    var segmentsPerSend: Double {
        median(map { $0.sender.sends > 0 ? Double($0.sender.sent) / Double($0.sender.sends) : .nan })
    }
    /// Median over the rounds of datagrams per submission.
    var datagramsPerSubmit: Double {
        median(map { $0.sender.submissions > 0 ? Double($0.sender.sent) / Double($0.sender.submissions) : .nan })
    }
    /// Mean UDP payload of what was sent, over all rounds.
    var meanDatagramBytes: Double {
        let sent = reduce(0) { $0 + $1.sender.sent }
        return sent > 0 ? Double(reduce(0) { $0 + $1.sender.bytes }) / Double(sent) : .nan
    }
}

/// The pacing figures at one rate, from the receiver's kernel timestamps.
struct PacingSummary {
    let rateBitsPerSecond: Double
    let size: Int
    let rounds: [RoundRecord]

    /// The pacer's default quantum at this rate (2 ms of it, at least 1500 bytes, at most 64 KiB).
    var quantum: Int { Pacer.defaultQuantum(rateBitsPerSecond: rateBitsPerSecond, minimum: 1500) }
    var achieved: [Double] { rounds.map { Double($0.receiver.int("achievedBps")) } }
    /// Median achieved rate over the rounds.
    var achievedMedian: Double { median(achieved) }
    /// The round farthest from the rate, as a signed percentage.
    var worstErrorPercent: Double {
        achieved.map { ($0 / rateBitsPerSecond - 1) * 100 }.max { abs($0) < abs($1) } ?? .nan
    }
    var medianErrorPercent: Double { (achievedMedian / rateBitsPerSecond - 1) * 100 }
    /// The largest burst above the token-bucket line in any round, bytes.
    var largestBurst: Int { rounds.map { $0.receiver.int("burst") }.max() ?? 0 }
    var medianBurst: Double { median(rounds.map { Double($0.receiver.int("burst")) }) }
    var segmentsPerSend: Double { rounds.segmentsPerSend }
    var datagramsPerSubmit: Double { rounds.datagramsPerSubmit }
    var seconds: Double { median(rounds.map { Double($0.receiver.int("spanNs")) / 1e9 }) }
    var datagrams: Int { rounds.first?.planned ?? 0 }
    var sent: Int { rounds.reduce(0) { $0 + $1.sender.sent } }
    var delivered: Int { rounds.reduce(0) { $0 + $1.delivered } }
    var intact: Bool {
        !rounds.isEmpty && rounds.allSatisfy { $0.intact && $0.receiver.int("noTimestamp") == 0 }
    }
}

/// A live video stream through `MediaSender`: access units handed at the frame rate in real
/// time, paced, to `uring-ts` (kernel timestamps).
struct VideoSummary {
    let bitrateKbps: Int
    let pace: Double
    let framesPerSecond: Int
    let size: Int
    let rounds: [RoundRecord]

    var quantum: Int { Pacer.defaultQuantum(rateBitsPerSecond: pace, minimum: 1500) }
    private func perDatagram(_ value: (RoundRecord) -> Double) -> Double {
        median(rounds.map { $0.sender.sent > 0 ? value($0) / Double($0.sender.sent) : .nan })
    }
    var senderUser: Double { perDatagram { Double($0.sender.userNanoseconds) } }
    var senderSystem: Double { perDatagram { Double($0.sender.systemNanoseconds) } }
    /// The sender process's CPU over the round's wall time, percent of one core.
    var senderCPUPercent: Double {
        median(rounds.map {
            $0.sender.wallNanoseconds > 0
                ? Double($0.sender.userNanoseconds + $0.sender.systemNanoseconds) * 100 / Double($0.sender.wallNanoseconds)
                : .nan
        })
    }
    var receiverTotal: Double {
        perDatagram { Double($0.receiver.int("userNs") + $0.receiver.int("systemNs")) }
    }
    /// io_uring_enter calls per datagram (without the eventfd writes that woke the engine).
    var entersPerDatagram: Double { perDatagram { Double($0.sender.syscalls - $0.sender.handOffs) } }
    var syscallsPerDatagram: Double { perDatagram { Double($0.sender.syscalls) } }
    var segmentsPerSend: Double { rounds.segmentsPerSend }
    var datagramsPerSubmit: Double { rounds.datagramsPerSubmit }
    var meanDatagramBytes: Double { rounds.meanDatagramBytes }
    var achieved: Double { median(rounds.map { Double($0.receiver.int("achievedBps")) }) }
    var largestBurst: Int { rounds.map { $0.receiver.int("burst") }.max() ?? 0 }
    var frameSpread: Double { median(rounds.map { Double($0.receiver.int("frameSpreadNs")) }) }
    var frameNeed: Double { median(rounds.map { Double($0.receiver.int("frameNeedNs")) }) }
    var frameExcessP95: Double { rounds.map { Double($0.receiver.int("frameExcessP95Ns")) }.max() ?? .nan }
    var frames: Int { rounds.first?.stream?.frames ?? 0 }
    var datagrams: Int { rounds.first?.planned ?? 0 }
    var intact: Bool { !rounds.isEmpty && rounds.allSatisfy { $0.intact && $0.receiver.int("noTimestamp") == 0 } }
}

/// The video table on stdout.
func renderVideoTable(_ video: [VideoSummary]) -> String {
    let header = ["Mbit/s", "pace", "fps", "frames", "size", "mean B", "segs/send", "dg/submit", "enter/dg", "sys/dg",
                  "snd usr", "snd sys", "snd CPU %", "rcv ns/dg", "achieved", "burst/quantum", "frame ms", "need ms",
                  "excess p95 ms", "intact"]
    var rows = [header]
    for v in video {
        rows.append([
            format(Double(v.bitrateKbps) / 1000, 1), format(v.pace / 1e6, 1), "\(v.framesPerSecond)", "\(v.frames)",
            "\(v.size)", format(v.meanDatagramBytes), format(v.segmentsPerSend, 2), format(v.datagramsPerSubmit, 2),
            format(v.entersPerDatagram, 2), format(v.syscallsPerDatagram, 2), format(v.senderUser), format(v.senderSystem),
            format(v.senderCPUPercent, 2), format(v.receiverTotal), format(v.achieved / 1e6, 2), format(Double(v.largestBurst) / Double(v.quantum), 2),
            format(v.frameSpread / 1e6, 2), format(v.frameNeed / 1e6, 2), format(v.frameExcessP95 / 1e6, 2),
            v.intact ? "yes" : "NO",
        ])
    }
    return alignColumns(rows, leftColumns: 0)
}

/// The pacing table on stdout.
func renderPacingTable(_ pacing: [PacingSummary]) -> String {
    let header = ["rate Mbit/s", "size", "segs/send", "dg/submit", "datagrams", "seconds", "achieved Mbit/s",
                  "error %", "worst %", "quantum B", "burst B (max)", "burst B (median)", "burst/quantum", "intact"]
    var rows = [header]
    for p in pacing {
        rows.append([
            format(p.rateBitsPerSecond / 1e6, 0), "\(p.size)", format(p.segmentsPerSend, 1), format(p.datagramsPerSubmit, 1),
            "\(p.datagrams)", format(p.seconds, 2), format(p.achievedMedian / 1e6, 2), format(p.medianErrorPercent, 2),
            format(p.worstErrorPercent, 2), "\(p.quantum)", "\(p.largestBurst)", format(p.medianBurst),
            format(Double(p.largestBurst) / Double(p.quantum), 2),
            p.intact ? "yes" : "NO \(p.delivered)/\(p.rounds.reduce(0) { $0 + $1.planned })",
        ])
    }
    return alignColumns(rows, leftColumns: 0)
}

private func alignColumns(_ rows: [[String]], leftColumns: Int) -> String {
    let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
    return rows.map { row in
        row.indices.map { column in
            column < leftColumns ? row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
                : String(repeating: " ", count: widths[column] - row[column].count) + row[column]
        }.joined(separator: "  ")
    }.joined(separator: "\n")
}

func median(_ values: [Double]) -> Double {
    let sorted = values.filter { $0.isFinite }.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// Ratios from the same rounds: round i of a case against round i of its reference.
func pairedRatio(_ values: [Double], _ reference: [Double]) -> Double? {
    guard values.count == reference.count, !values.isEmpty else { return nil }
    let ratios = zip(values, reference).map { $1 > 0 ? $0 / $1 : .nan }
    let result = median(ratios)
    return result.isFinite ? result : nil
}

/// Fills in each case's ratio to `sendto` (same group, receive path and size) and its
/// receiver's ratio to `recvfrom` (same group, send path and size).
func computeRatios(_ summaries: inout [CaseSummary]) {
    let snapshot = summaries
    for index in summaries.indices {
        let c = summaries[index].benchCase
        if let reference = snapshot.first(where: {
            $0.benchCase.group == c.group && $0.benchCase.send == .sendto && $0.benchCase.receive == c.receive
                && $0.benchCase.size == c.size
        }) {
            summaries[index].ratioToSendto = pairedRatio(summaries[index].senderTotal, reference.senderTotal)
        }
        if let reference = snapshot.first(where: {
            $0.benchCase.group == c.group && $0.benchCase.send == .uringGSO && $0.benchCase.receive == c.receive
                && $0.benchCase.size == c.size
        }), c.send.isStream {
            summaries[index].ratioToUringGSO = pairedRatio(summaries[index].senderTotal, reference.senderTotal)
        }
        if let reference = snapshot.first(where: {
            $0.benchCase.group == c.group && $0.benchCase.receive == .recvfrom && $0.benchCase.send == c.send
                && $0.benchCase.size == c.size
        }) {
            summaries[index].receiverRatioToRecvfrom = pairedRatio(summaries[index].receiverTotal, reference.receiverTotal)
        }
    }
}

/// The machine the bench ran on.
struct MachineInfo {
    let kernel: String
    let cpu: String
    let cores: Int

    static func current() -> MachineInfo {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        return MachineInfo(kernel: release, cpu: model, cores: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}

private func format(_ value: Double?, _ digits: Int = 0) -> String {
    guard let value, value.isFinite else { return "-" }
    return String(format: "%.\(digits)f", value)
}

/// The table on stdout.
func renderTable(_ summaries: [CaseSummary]) -> String {
    let header = ["group", "send", "recv", "size", "segs/send", "dg/submit",
                  "snd usr", "snd sys", "snd ns/dg", "rcv usr", "rcv sys", "rcv ns/dg",
                  "irq+si", "ksoftirqd", "sys/dg", "Mbit/s", "x sendto", "x uring-gso", "rcv x recvfrom", "spread", "intact"]
    var rows = [header]
    for s in summaries {
        rows.append([
            s.benchCase.group, s.benchCase.send.rawValue, s.benchCase.receive.rawValue, "\(s.benchCase.size)",
            format(s.segmentsPerSend, 1), format(s.datagramsPerSubmit, 1),
            format(median(s.senderUser)), format(median(s.senderSystem)), format(median(s.senderTotal)),
            format(median(s.receiverUser)), format(median(s.receiverSystem)), format(median(s.receiverTotal)),
            format(median(s.interrupt)), format(median(s.softirq)), format(median(s.senderSyscalls), 4), format(s.megabitsPerSecond),
            format(s.ratioToSendto, 2), format(s.ratioToUringGSO, 2), format(s.receiverRatioToRecvfrom, 2), format(s.spread, 2),
            s.intact ? "yes" : "NO \(s.delivered)/\(s.planned)",
        ])
    }
    return alignColumns(rows, leftColumns: 3)
}

/// A figure of `bench.json`: four significant digits, null when missing or not finite.
struct Figure: Encodable {
    let value: Double?

    init(_ value: Double?) { self.value = value }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value, value.isFinite, let rounded = Double(String(format: "%.4g", value)) {
            try container.encode(rounded)
        } else {
            try container.encodeNil()
        }
    }
}

/// `bench.json`: the shape of README.md's `bench` section, with more keys beside.
struct BenchDocument: Encodable {
    struct Machine: Encodable {
        let kernel: String
        let cpu: String
        let cores: Int
    }

    struct Method: Encodable {
        let count: Int
        let `repeat`: Int
        var warmup = "one round of each case at count/5"
        var flowWindow = "receiver reports progress over the control channel; sender blocks when sent - reported >= window"
        var cpu = "getrusage(RUSAGE_SELF) of each process around its own loop"
        var ksoftirqd = "on-CPU time of the ksoftirqd/N threads (/proc/PID/schedstat) during the sender's loop, per datagram: loopback receive work deferred out of both processes; machine-wide, so other load on the machine shows in it"
        var irqSoftirq = "machine-wide irq + softirq time from /proc/stat (10 ms ticks) during the sender's loop, per datagram: with IRQ time accounting, softirq work (loopback delivery) is charged to no process"
        var spread = "(max-min)/median of sender cpuNsPerDatagram"
    }

    /// One case of the main comparison.
    struct Run: Encodable {
        struct Sender: Encodable {
            let cpuNsPerDatagram, userNsPerDatagram, systemNsPerDatagram, syscallsPerDatagram: Figure
            let ksoftirqdNsPerDatagram, machineIrqSoftirqNsPerDatagram: Figure
        }

        struct Receiver: Encodable {
            let path: String
            let cpuNsPerDatagram, userNsPerDatagram, systemNsPerDatagram, syscallsPerDatagram, ratioToRecvfrom: Figure
        }

        /// The media path's plan (`stream` runs only).
        struct Stream: Encodable {
            let mtu, framesPerRound, datagramsPerRound: Int
            let meanDatagramBytes, datagramsPerFrame: Figure
            var segmentsPerSendSource = "measured (MediaSender stats: send SQEs); a note says if the engine's slot and GSO rules model disagrees"
            let modelledSendsPerRound, modelledGSOSendsPerRound: Int
            let measuredGSOSendsPerRound: Figure
        }

        let path, group: String
        let datagramSize, batch: Int
        let segmentsPerSend, datagramsPerSubmit: Figure
        let rounds, planned, sent, delivered: Int
        let intact: Bool
        let sender: Sender
        let receiver: Receiver
        let ratioToSendto, ratioToUringGSO, spread, throughputMbitPerSecond: Figure
        let notes: [String]
        let stream: Stream?
    }

    /// One pacing rate.
    struct Pacing: Encodable {
        var path = "uring-gso"
        var sender = "PacedSender"
        var receiver = "uring-ts"
        let rateBitsPerSecond: Figure
        let datagramSize: Int
        let segmentsPerSend, datagramsPerSubmit: Figure
        let datagramsPerRound, rounds: Int
        let seconds, achievedBitsPerSecond: Figure
        let achievedPerRound: [Figure]
        let errorPercent, worstErrorPercent: Figure
        let quantumBytes, largestBurstBytes: Int
        let medianBurstBytes, burstOverQuantum: Figure
        let sent, delivered: Int
        let intact: Bool
    }

    /// One live video case.
    struct Video: Encodable {
        var path = "stream"
        var sender = "MediaSender (live, paced)"
        var receiver = "uring-ts"
        let bitrateKbps: Int
        let paceBitsPerSecond: Figure
        let framesPerSecond, framesPerRound, datagramsPerRound, rounds, datagramSize: Int
        let meanDatagramBytes, segmentsPerSend, datagramsPerSubmit, ioUringEntersPerDatagram, syscallsPerDatagram: Figure
        let senderUserNsPerDatagram, senderSystemNsPerDatagram, senderCpuPercentOfOneCore: Figure
        let receiverCpuNsPerDatagram, achievedBitsPerSecond: Figure
        let quantumBytes, largestBurstBytes: Int
        let frameSpreadMs, frameNeedMs, frameExcessP95Ms: Figure
        let intact: Bool
    }

    let machine: Machine
    let command: String
    let method: Method
    let runs: [Run]
    let pacing: [Pacing]
    var pacingMethod = "PacedSender (GSO on, default quantum = 2 ms of the rate, at least 1500 B, at most 64 KiB) to a multishot receiver with SO_TIMESTAMPNS; achieved = bytes*8/(t_last - t_first) over every datagram's bytes; burst = max over i<=j of bytes(i..j) - R/8*(t_j - t_i)"
    let video: [Video]
    var videoMethod = "x265 access units (1280x720, the bitrate given, 30 fps) handed to a paced MediaSender (no feedback) at the frame rate in real time; CPU is the sender process (getrusage) and the receiver's; enters per datagram count the ring's io_uring_enter calls, syscalls add the eventfd writes that woke the engine (MediaSender.wakeSignals: one per frame handed to an engine waiting for its time); frame spread = first to last packet arrival of a frame (kernel timestamps), need = (frame bytes - one quantum) * 8 / pace; medians over frames and rounds, excess p95 the largest over rounds"
}

extension BenchDocument.Run {
    init(_ s: CaseSummary) {
        let c = s.benchCase
        path = c.send.rawValue
        group = c.group
        datagramSize = c.size
        batch = c.batch
        segmentsPerSend = Figure(s.segmentsPerSend)
        datagramsPerSubmit = Figure(s.datagramsPerSubmit)
        rounds = s.rounds.count
        planned = s.planned
        sent = s.sent
        delivered = s.delivered
        intact = s.intact
        sender = Sender(cpuNsPerDatagram: Figure(median(s.senderTotal)), userNsPerDatagram: Figure(median(s.senderUser)),
                        systemNsPerDatagram: Figure(median(s.senderSystem)),
                        syscallsPerDatagram: Figure(median(s.senderSyscalls)),
                        ksoftirqdNsPerDatagram: Figure(median(s.softirq)),
                        machineIrqSoftirqNsPerDatagram: Figure(median(s.interrupt)))
        receiver = Receiver(path: c.receive.rawValue, cpuNsPerDatagram: Figure(median(s.receiverTotal)),
                            userNsPerDatagram: Figure(median(s.receiverUser)),
                            systemNsPerDatagram: Figure(median(s.receiverSystem)),
                            syscallsPerDatagram: Figure(median(s.receiverSyscalls)),
                            ratioToRecvfrom: Figure(s.receiverRatioToRecvfrom))
        ratioToSendto = Figure(s.ratioToSendto)
        ratioToUringGSO = Figure(s.ratioToUringGSO)
        spread = Figure(s.spread)
        throughputMbitPerSecond = Figure(s.megabitsPerSecond)
        notes = s.notes
        stream = s.streamPlan.map { plan in
            Stream(mtu: plan.datagramSize + 28, framesPerRound: plan.frames, datagramsPerRound: plan.datagrams,
                   meanDatagramBytes: Figure(s.meanDatagramBytes),
                   datagramsPerFrame: Figure(Double(plan.datagrams) / Double(plan.frames)),
                   modelledSendsPerRound: plan.modelledSends, modelledGSOSendsPerRound: plan.modelledGSOSends,
                   measuredGSOSendsPerRound: Figure(s.measuredGSOSends.map { Double($0) / Double(max(1, s.rounds.count)) }))
        }
    }
}

extension BenchDocument.Pacing {
    init(_ p: PacingSummary) {
        rateBitsPerSecond = Figure(p.rateBitsPerSecond)
        datagramSize = p.size
        segmentsPerSend = Figure(p.segmentsPerSend)
        datagramsPerSubmit = Figure(p.datagramsPerSubmit)
        datagramsPerRound = p.datagrams
        rounds = p.rounds.count
        seconds = Figure(p.seconds)
        achievedBitsPerSecond = Figure(p.achievedMedian)
        achievedPerRound = p.achieved.map(Figure.init)
        errorPercent = Figure(p.medianErrorPercent)
        worstErrorPercent = Figure(p.worstErrorPercent)
        quantumBytes = p.quantum
        largestBurstBytes = p.largestBurst
        medianBurstBytes = Figure(p.medianBurst)
        burstOverQuantum = Figure(Double(p.largestBurst) / Double(p.quantum))
        sent = p.sent
        delivered = p.delivered
        intact = p.intact
    }
}

extension BenchDocument.Video {
    init(_ v: VideoSummary) {
        bitrateKbps = v.bitrateKbps
        paceBitsPerSecond = Figure(v.pace)
        framesPerSecond = v.framesPerSecond
        framesPerRound = v.frames
        datagramsPerRound = v.datagrams
        rounds = v.rounds.count
        datagramSize = v.size
        meanDatagramBytes = Figure(v.meanDatagramBytes)
        segmentsPerSend = Figure(v.segmentsPerSend)
        datagramsPerSubmit = Figure(v.datagramsPerSubmit)
        ioUringEntersPerDatagram = Figure(v.entersPerDatagram)
        syscallsPerDatagram = Figure(v.syscallsPerDatagram)
        senderUserNsPerDatagram = Figure(v.senderUser)
        senderSystemNsPerDatagram = Figure(v.senderSystem)
        senderCpuPercentOfOneCore = Figure(v.senderCPUPercent)
        receiverCpuNsPerDatagram = Figure(v.receiverTotal)
        achievedBitsPerSecond = Figure(v.achieved)
        quantumBytes = v.quantum
        largestBurstBytes = v.largestBurst
        frameSpreadMs = Figure(v.frameSpread / 1e6)
        frameNeedMs = Figure(v.frameNeed / 1e6)
        frameExcessP95Ms = Figure(v.frameExcessP95 / 1e6)
        intact = v.intact
    }
}

/// `bench.json` (`BenchDocument`), keys sorted.
func renderJSON(_ summaries: [CaseSummary], pacing: [PacingSummary], video: [VideoSummary], machine: MachineInfo, command: String,
                options: BenchOptions) throws -> String {
    let document = BenchDocument(
        machine: .init(kernel: machine.kernel, cpu: machine.cpu, cores: machine.cores), command: command,
        method: .init(count: options.roundCount, repeat: options.repeatCount),
        runs: summaries.map(BenchDocument.Run.init), pacing: pacing.map(BenchDocument.Pacing.init),
        video: video.map(BenchDocument.Video.init))
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(document), as: UTF8.self) + "\n"
}

/// `bench.csv`: one line per case.
func renderCSV(_ summaries: [CaseSummary]) -> String {
    var lines = ["group,path,receiverPath,datagramSize,batch,segmentsPerSend,datagramsPerSubmit,sent,delivered,intact,"
        + "senderUserNs,senderSystemNs,senderCpuNs,senderSyscallsPerDatagram,receiverUserNs,receiverSystemNs,receiverCpuNs,"
        + "receiverSyscallsPerDatagram,throughputMbitPerSecond,ratioToSendto,receiverRatioToRecvfrom,spread,ratioToUringGSO,"
        + "ksoftirqdNs,machineIrqSoftirqNs"]
    for s in summaries {
        let c = s.benchCase
        let fields: [String] = [
            c.group, c.send.rawValue, c.receive.rawValue, "\(c.size)", "\(c.batch)", format(s.segmentsPerSend, 2),
            format(s.datagramsPerSubmit, 2), "\(s.sent)", "\(s.delivered)", "\(s.intact)",
            format(median(s.senderUser), 1), format(median(s.senderSystem), 1), format(median(s.senderTotal), 1),
            format(median(s.senderSyscalls), 5), format(median(s.receiverUser), 1), format(median(s.receiverSystem), 1),
            format(median(s.receiverTotal), 1), format(median(s.receiverSyscalls), 5), format(s.megabitsPerSecond, 1),
            format(s.ratioToSendto, 3), format(s.receiverRatioToRecvfrom, 3), format(s.spread, 3),
            format(s.ratioToUringGSO, 3), format(median(s.softirq), 1),
            format(median(s.interrupt), 1),
        ]
        lines.append(fields.joined(separator: ","))
    }
    return lines.joined(separator: "\n") + "\n"
}
