#!/usr/bin/env python3
# Paired default senders into default receivers, as users run them (results/profile.md section 44):
# each round, in random order, every variant's `streamer send --to 127.0.0.1:P --source HEVC --fps FPS
# --frames N --mtu 1428 [ARGS] --quiet --stats F` on CPU 0 into its `streamer recv --listen 127.0.0.1:P
# --frames N [RARGS] --quiet --stats F` on CPU 1 (the receiver binary RECV, or the variant's own).
# CPU is wait4's rusage of each process (user + system) per packet received; enters are each side's
# `ioUringEnters`, reports the sender's `feedback.reports` (as the receiver's `feedback.sent`) and the
# sender reports the receiver got; medians, and each variant against the first paired by round.
# usage: pair-ab.py ROUNDS label=SENDER[,RECEIVER][:extra sender args] ...   env RECV (default
# .build/release/streamer), HEVC (bench peers' clip: ffmpeg -f lavfi -i testsrc2=size=1280x720:rate=240
# -frames:v 1440 -c:v libx265 -preset ultrafast -b:v 40M -f hevc test.hevc), FPS (default 30),
# FRAMES (480), RARGS (receiver options)
import os, sys, random, time, json, statistics
RECV = os.environ.get("RECV", ".build/release/streamer"); HEVC = os.environ.get("HEVC", "test.hevc")
FPS = os.environ.get("FPS", "30"); FRAMES = os.environ.get("FRAMES", "480"); RARGS = os.environ.get("RARGS", "").split()
rounds = int(sys.argv[1]); variants = []
for argument in sys.argv[2:]:
    label, spec = argument.split("=", 1); parts = spec.split(":", 1)
    binaries = parts[0].split(",")
    variants.append((label, binaries[0], binaries[1] if len(binaries) > 1 else RECV, parts[1].split() if len(parts) > 1 else []))
results = {variant[0]: [] for variant in variants}

def spawn(cpu, command):
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu}); null = os.open("/dev/null", os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2)
        os.execv(command[0], command)
    return pid

def one(sender, receiver, args):
    port = 30000 + 2 * random.randrange(5000)
    receiverStats = f"/tmp/pair-ab.r.{port}.json"; senderStats = f"/tmp/pair-ab.s.{port}.json"
    r = spawn(1, [receiver, "recv", "--listen", f"127.0.0.1:{port}", "--frames", FRAMES, *RARGS, "--quiet", "--stats", receiverStats])
    time.sleep(1.0)
    s = spawn(0, [sender, "send", "--to", f"127.0.0.1:{port}", "--source", HEVC, "--fps", FPS, "--frames", FRAMES,
                  "--mtu", "1428", *args, "--quiet", "--stats", senderStats])
    _, _, senderUsage = os.wait4(s, 0); _, _, receiverUsage = os.wait4(r, 0)
    sent = json.load(open(senderStats)); got = json.load(open(receiverStats)); os.unlink(senderStats); os.unlink(receiverStats)
    packets = got["packets"]["received"]
    return {"send": (senderUsage.ru_utime + senderUsage.ru_stime) * 1e6 / packets,
            "recv": (receiverUsage.ru_utime + receiverUsage.ru_stime) * 1e6 / packets,
            "sendEnters": sent["pacing"]["ioUringEnters"], "recvEnters": got["ioUringEnters"],
            "perSubmit": sent["pacing"]["datagramsPerSubmit"], "complete": got["frames"]["complete"],
            "reports": got["feedback"]["sent"], "senderReports": got["feedback"]["senderReports"]}

for round in range(rounds):
    order = list(variants); random.shuffle(order)
    for label, sender, receiver, args in order:
        x = one(sender, receiver, args); results[label].append(x)
        print(f"{round} {label:8s} send {x['send']:6.2f} recv {x['recv']:6.2f} us/pkt  enters s {x['sendEnters']} r {x['recvEnters']}"
              f"  dg/submit {x['perSubmit']:.2f} complete {x['complete']} reports {x['reports']} SRs {x['senderReports']}", flush=True)
print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
base = variants[0][0]
for label, _, _, _ in variants:
    rows = results[label]
    print(f"median {label:8s} send {statistics.median(r['send'] for r in rows):6.2f} recv {statistics.median(r['recv'] for r in rows):6.2f}"
          f" enters s {statistics.median(r['sendEnters'] for r in rows):.0f} r {statistics.median(r['recvEnters'] for r in rows):.0f}")
    if label != base:
        for side in ("send", "recv"):
            paired = [b[side] / a[side] for a, b in zip(results[base], rows)]
            print(f"   {side} {label}/{base} paired median {statistics.median(paired):.3f} range {min(paired):.3f}-{max(paired):.3f}"
                  f" lower in {sum(p < 1 for p in paired)} of {len(paired)}")
