/// The receive loop's time per wake-up (`MediaReceiver.run`): the clock is read once for all the
/// datagrams a wake-up brought (their arrival times are the kernel's), not once per datagram,
/// and the interval between wake-ups that brought datagrams is smoothed (1/8) for
/// `MediaReceiver.deadlineSlack`. Pure: the caller passes the clock, so tests choose the times.
struct ReceiveWakeClock {
    /// The time read for this wake-up's first datagram; nil until one came.
    private(set) var wakeTime: Int64?
    /// The time of the last wake-up that brought datagrams; 0 before the first.
    private(set) var lastDatagramWake: Int64 = 0
    /// The time between wake-ups that brought datagrams, smoothed; `.max` while not known.
    private(set) var datagramInterval = Int64.max
    /// After a pause this long (nanoseconds) the interval is not known again.
    static let pause: Int64 = 1_000_000_000

    /// A new wake-up of the loop: its first datagram reads the clock again.
    mutating func wokeUp() { wakeTime = nil }

    /// The time for a datagram of this wake-up: `clock()` for its first datagram (which also
    /// updates the smoothed interval), the same time for the others.
    mutating func datagramTime(clock: () -> Int64) -> Int64 {
        if let wakeTime { return wakeTime }
        let now = clock()
        wakeTime = now
        let gap = now - lastDatagramWake
        if lastDatagramWake == 0 || gap > Self.pause {
            datagramInterval = .max  // the first, or after a pause: not known
        } else {
            datagramInterval = datagramInterval == .max ? gap : datagramInterval + (gap - datagramInterval) / 8
        }
        lastDatagramWake = now
        return now
    }

    /// How late a deadline may be served at `now` (`MediaReceiver.deadlineSlack`), judging the
    /// datagrams' rate by the smoothed interval or, if longer, the time since the last of them.
    /// `limit`: the most slack (`MediaReceiver.slackLimit`).
    func deadlineSlack(limit: Int64, now: Int64) -> Int64 {
        MediaReceiver.deadlineSlack(limit: limit, datagramInterval: max(datagramInterval, now - lastDatagramWake))
    }
}
