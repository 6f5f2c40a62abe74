#!/usr/bin/env python3
# The interleaved before/after runs of results/profile.md's x265 section (issue 15's x265 target):
# profile-ab.py's way for x265 live sending. Each round runs, pinned and niced like profile-ab.py
# (sender on core 0, bench-floor count on core 1), the floor sender, then each variant's
# `streamer send` with x265 at 30 fps from a y4m file and from the synthetic source; whole-process
# CPU from wait4, the encoder's from the run's `--stats` (cpu.encoderSeconds).
# usage: x265-ab.py ROUNDS VARIANT,VARIANT...   (round 0 is a warm-up)
# A variant V is $VARIANTS{V}/streamer; $LP holds t.rtp (profile-ab.py's floor records, cut here
# to the first FRAMES frames: the floor sends those at 30 fps) and t720.y4m (1280x720, at least
# FRAMES frames: ffmpeg -f lavfi -i testsrc2=size=1280x720:rate=30 -frames:v 300 -pix_fmt yuv420p
# -f yuv4mpegpipe t720.y4m). FRAMES (default 300) frames per run.
import os, subprocess, sys, time, statistics, json, struct
LP = os.environ.get("LP", "/tmp/lp")
FLOOR = os.environ.get("FLOOR", "/tmp/lp-before/bench-floor")
VARIANTS = os.environ.get("VARIANTS", "/tmp/lp-")
FRAMES = int(os.environ.get("FRAMES", "300"))
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
variants = sys.argv[2].split(",") if len(sys.argv) > 2 else ["before", "after"]
sources = {"y4m": ["--source", f"{LP}/t720.y4m"], "synthetic": ["--source", "synthetic", "--size", "1280x720"]}
port = 45000 + os.getpid() % 1000 * 2
# The floor's records: t.rtp's first FRAMES frames (u32 body bytes, u32 packets, u16 sizes, body).
records = f"{LP}/t{FRAMES}.rtp"
with open(f"{LP}/t.rtp", "rb") as f: data = f.read()
offset, floor_packets = 0, 0
for _ in range(FRAMES):
    body, count = struct.unpack_from("<II", data, offset)
    offset += 8 + 2 * count + body
    floor_packets += count
open(records, "wb").write(data[:offset])
def load(): return open("/proc/loadavg").read().split()[0]
def counted(argv):
    global port
    port += 2
    out = f"{LP}/x265cnt-{port}.txt"
    c = subprocess.Popen(["taskset", "-c", "1", "nice", "-n", "-10", FLOOR, "count", str(port), "0"],
                         stdout=open(out, "w"), stderr=subprocess.DEVNULL)
    for _ in range(500):
        time.sleep(0.01)
        if open(out).read().startswith("ready"): break
    p = subprocess.Popen(["taskset", "-c", "0", "nice", "-n", "-10"] + [a.replace("PORT", str(port)) for a in argv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    c.wait()
    packets = int(open(out).read().split("packets=")[1].split()[0])
    return ru.ru_utime + ru.ru_stime, packets, status
res = {}
for r in range(rounds + 1):
    cpu, packets, status = counted([FLOOR, "send", records, "PORT", "30"])
    print(f"round {r} floor: {packets} of {floor_packets} pkts, {cpu*1e6/packets:.2f} us/pkt, "
          f"{cpu*1e3/FRAMES:.3f} ms/frame, exit {status}, load {load()}", flush=True)
    if r > 0: res.setdefault("floor", []).append((cpu * 1e6 / packets, cpu * 1e3 / FRAMES, cpu * 1e6 / packets))
    for name in variants:
        for source, arguments in sources.items():
            stats = f"{LP}/x265-{name}-{source}.json"
            cpu, packets, status = counted([f"{VARIANTS}{name}/streamer", "send", "--to", "127.0.0.1:PORT"] + arguments
                + ["--fps", "30", "--frames", str(FRAMES), "--bitrate", "5M", "--no-feedback", "--cc", "off",
                   "--pace", "2G", "--mtu", "1428", "--quiet", "--stats", stats])
            encoder = json.load(open(stats))["cpu"]["encoderSeconds"]
            rest = cpu - encoder
            print(f"round {r} {name} {source}: {packets} pkts, total {cpu*1e6/packets:.1f} encoder {encoder*1e6/packets:.1f} "
                  f"rest {rest*1e6/packets:.2f} us/pkt = {rest*1e3/FRAMES:.3f} ms/frame, exit {status}, load {load()}", flush=True)
            if r > 0: res.setdefault(f"{name} {source}", []).append((rest * 1e6 / packets, rest * 1e3 / FRAMES, cpu * 1e6 / packets))
print("medians: all but the encoder us/pkt, ms/frame (whole process us/pkt), x floor us/pkt")
floor = statistics.median(x[0] for x in res["floor"])
for k, v in res.items():
    m = [statistics.median(x[i] for x in v) for i in range(3)]
    print(f"  {k}: {m[0]:.2f} us/pkt, {m[1]:.3f} ms/frame ({m[2]:.1f})  x floor {m[0]/floor:.2f}  (n={len(v)})")
