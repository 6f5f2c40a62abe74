#!/usr/bin/env python3
# The interleaved fast runs of results/profile.md section 6: the floor sender without sleeping
# against `streamer send --fast` (unpaced), the same file, to bench-floor count; senders pinned to
# core 0, the counter to core 1, as results/profile-ab.py does.
# usage: fast-ab.py ROUNDS [VARIANT,VARIANT...]   (round 0 is a warm-up)
# $LP holds t.hevc and t.rtp (bench peers --frames 2400); $FLOOR bench-floor, $STREAMER the streamer;
# with variants, as results/profile-ab.py: variant V's streamer is $VARIANTS{V}/streamer, interleaved.
# Besides CPU per packet: packets/s at the counter (first to last receive), and busy, the
# sender's CPU over its wall-clock time (1.0: it had its core to itself all along).
import os, subprocess, sys, time, statistics
LP = os.environ.get("LP", "/tmp/lp")
FLOOR = os.environ.get("FLOOR", "/tmp/lp-before/bench-floor")
STREAMER = os.environ.get("STREAMER", ".build/release/streamer")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
VARIANTS = os.environ.get("VARIANTS", "/tmp/lp-")
streamers = {v: f"{VARIANTS}{v}/streamer" for v in sys.argv[2].split(",")} if len(sys.argv) > 2 else {"streamer": STREAMER}
port = 43000 + os.getpid() % 500 * 2
res = {}
for r in range(rounds + 1):
    for name in ["floor"] + list(streamers):
        port += 2
        out = f"{LP}/fcnt-{port}.txt"
        counter = subprocess.Popen(["taskset", "-c", "1", FLOOR, "count", str(port), "0"], stdout=open(out, "w"),
                                   stderr=subprocess.DEVNULL)
        for _ in range(500):
            time.sleep(0.01)
            if open(out).read().startswith("ready"): break
        argv = [FLOOR, "send", f"{LP}/t.rtp", str(port), "0"] if name == "floor" else \
            [streamers[name], "send", "--to", f"127.0.0.1:{port}", "--source", f"{LP}/t.hevc", "--fps", "240", "--fast",
             "--no-feedback", "--mtu", "1428", "--quiet"]
        started = time.monotonic()
        p = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        busy = (ru.ru_utime + ru.ru_stime) / max(time.monotonic() - started, 1e-6)
        counter.wait()
        fields = dict(x.split("=") for x in open(out).read().split()[1:])
        packets = int(fields["packets"])
        rate = packets * 1e9 / max(int(fields["duration"]), 1)
        user, system = ru.ru_utime * 1e6 / max(packets, 1), ru.ru_stime * 1e6 / max(packets, 1)
        print(f"round {r} {name}: {packets} of {fields['span']} packets, exit {status}, user {user:.2f} sys {system:.2f} "
              f"total {user + system:.2f} us/pkt, {rate:.0f} pkt/s, busy {busy:.2f}, load {open('/proc/loadavg').read().split()[0]}", flush=True)
        if r > 0: res.setdefault(name, []).append((user, system, user + system, rate, busy))
for name, values in res.items():
    m = [statistics.median(v[i] for v in values) for i in range(5)]
    print(f"  {name}: user {m[0]:.2f} sys {m[1]:.2f} total {m[2]:.2f} us/pkt, {m[3]:.0f} pkt/s, busy {m[4]:.2f} (n={len(values)})")
