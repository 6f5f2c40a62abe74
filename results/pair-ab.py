#!/usr/bin/env python3
# Paired default senders into the default receiver, as users run them (results/profile.md section 44):
# each round, in random order, every variant's `streamer send --to 127.0.0.1:P --source HEVC --fps FPS
# --frames N --mtu 1428 [ARGS] --quiet --stats F` on CPU 0 into one `streamer recv --listen 127.0.0.1:P
# --frames N [RARGS] --quiet --stats F` on CPU 1 (the receiver binary RECV is the same for every variant,
# so a change of the sender shows in both processes' CPU). CPU is wait4's rusage of each process (user +
# system) per packet received; enters are each side's `ioUringEnters`; medians, and each variant
# against the first paired by round.
# usage: pair-ab.py ROUNDS label=STREAMER[:extra sender args] ...   env RECV (a release streamer),
# HEVC (bench peers' clip: ffmpeg -f lavfi -i testsrc2=size=1280x720:rate=240 -frames:v 1440 -c:v libx265
# -preset ultrafast -b:v 40M -f hevc test.hevc), FPS (default 30), FRAMES (480), RARGS (receiver options)
import os, sys, subprocess, random, time, json, statistics
RECV = os.environ.get("RECV", ".build/release/streamer"); HEVC = os.environ.get("HEVC", "test.hevc")
FPS = os.environ.get("FPS", "30"); FRAMES = os.environ.get("FRAMES", "480"); RARGS = os.environ.get("RARGS", "").split()
rounds = int(sys.argv[1]); variants = []
for a in sys.argv[2:]:
    label, spec = a.split("=", 1); parts = spec.split(":", 1)
    variants.append((label, parts[0], parts[1].split() if len(parts) > 1 else []))
res = {v[0]: [] for v in variants}
def spawn(cpu, cmd):
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu}); null = os.open("/dev/null", os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2)
        os.execv(cmd[0], cmd)
    return pid
def one(binary, args):
    port = 30000 + 2 * random.randrange(5000); rs = f"/tmp/pair-ab.r.{port}.json"; ss = f"/tmp/pair-ab.s.{port}.json"
    r = spawn(1, [RECV, "recv", "--listen", f"127.0.0.1:{port}", "--frames", FRAMES, *RARGS, "--quiet", "--stats", rs])
    time.sleep(1.0)
    s = spawn(0, [binary, "send", "--to", f"127.0.0.1:{port}", "--source", HEVC, "--fps", FPS, "--frames", FRAMES, "--mtu", "1428", *args, "--quiet", "--stats", ss])
    _, _, su = os.wait4(s, 0); _, _, ru = os.wait4(r, 0)
    sj = json.load(open(ss)); rj = json.load(open(rs)); os.unlink(ss); os.unlink(rs)
    pk = rj["packets"]["received"]
    return (su.ru_utime + su.ru_stime) * 1e6 / pk, (ru.ru_utime + ru.ru_stime) * 1e6 / pk, sj["pacing"]["ioUringEnters"], rj["ioUringEnters"], sj["pacing"]["datagramsPerSubmit"], rj["frames"]["complete"]
for rnd in range(rounds):
    order = list(variants); random.shuffle(order)
    for label, b, a in order:
        x = one(b, a); res[label].append(x)
        print(f"{rnd} {label:8s} send {x[0]:6.2f} recv {x[1]:6.2f} us/pkt  enters s {x[2]} r {x[3]}  dg/submit {x[4]:.2f} complete {x[5]}", flush=True)
print("load", open("/proc/loadavg").read().split()[:3])
base = variants[0][0]
for label, _, _ in variants:
    rows = res[label]
    print(f"median {label:8s} send {statistics.median(r[0] for r in rows):6.2f} recv {statistics.median(r[1] for r in rows):6.2f} enters s {statistics.median(r[2] for r in rows):.0f} r {statistics.median(r[3] for r in rows):.0f}")
    if label != base:
        for i, name in ((0, "send"), (1, "recv")):
            pr = [b[i] / a[i] for a, b in zip(res[base], rows)]
            print(f"   {name} {label}/{base} paired median {statistics.median(pr):.3f} range {min(pr):.3f}-{max(pr):.3f} lower in {sum(p < 1 for p in pr)} of {len(pr)}")
