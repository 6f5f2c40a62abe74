#!/usr/bin/env python3
# Interleaved whole-process CPU of receivers fed the same stream, as bench peers' receiver rows:
# each receiver on CPU 1 (`streamer recv --listen 127.0.0.1:P --frames 1440 --no-feedback --quiet
# --stats F`, the floor, `bench-floor count P 22782`, or by-hand, the same with `--rebuild`: frames
# rebuilt as a receiver written by hand would, results/profile.md 37), `bench-floor send RTP P FPS` on CPU 0.
# CPU is wait4's rusage (user and system split by the kernel's tick sampling: the total is the
# figure to trust), faults are minor page faults; medians per receiver, and after - before per round.
# usage: recv-ab.py ROUNDS label=STREAMER|floor|by-hand ...   env: FLOOR (a release bench-floor), RTP (bench peers'
# floor-sender records of 1,440 frames, 22,782 packets), FPS (default 240), RECV_ARGS (streamer recv's
# options besides these, default --no-feedback as bench peers; "" for the default receiver with
# feedback and loss recovery: results/profile.md section 31)   (results/profile.md 23)
import os, sys, subprocess, random, time, json, statistics
FLOOR = os.environ.get("FLOOR", ".build/release/bench-floor"); RTP = os.environ.get("RTP", "test.rtp")
FPS = os.environ.get("FPS", "240"); PACKETS = 22782
RECV_ARGS = os.environ.get("RECV_ARGS", "--no-feedback").split()
rounds = int(sys.argv[1]); variants = [a.split("=", 1) for a in sys.argv[2:]]
results = {label: [] for label, _ in variants}

def one(binary):
    port = 30000 + random.randrange(10000); stats = f"/tmp/recv-ab.{port}.json"
    floor = binary in ("floor", "by-hand")
    command = ([FLOOR, "count", str(port), str(PACKETS)] + (["--rebuild"] if binary == "by-hand" else []) if floor else
               [binary, "recv", "--listen", f"127.0.0.1:{port}", "--frames", "1440", *RECV_ARGS, "--quiet", "--stats", stats])
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {1}); null = os.open("/dev/null", os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2)
        os.execv(command[0], command)
    time.sleep(1.5)
    subprocess.run(["taskset", "-c", "0", FLOOR, "send", RTP, str(port), FPS], stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(pid, 0)
    received = PACKETS
    if not floor:
        received = json.load(open(stats))["packets"]["received"]; os.unlink(stats)
    return usage.ru_utime * 1000, usage.ru_stime * 1000, usage.ru_minflt, received

for r in range(rounds):
    for label, binary in variants:
        user, system, faults, received = one(binary)
        results[label].append((user, system, faults))
        print(f"{r} {label:8s} user {user:7.2f} sys {system:7.2f} total {user + system:7.2f} ms faults {faults} received {received}", flush=True)
print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
for label, _ in variants:
    rows = results[label]
    user = statistics.median(x[0] for x in rows); system = statistics.median(x[1] for x in rows)
    total = statistics.median(x[0] + x[1] for x in rows); faults = statistics.median(x[2] for x in rows)
    print(f"median {label:8s} user {user:7.2f} ms ({user * 1000 / PACKETS:.2f} us/pkt) sys {system:7.2f} ({system * 1000 / PACKETS:.2f})"
          f" total {total:7.2f} ({total * 1000 / PACKETS:.2f}) faults {faults:.0f}")
if len(variants) >= 2:
    (first, _), (second, _) = variants[0], variants[1]
    paired = [b[0] + b[1] - a[0] - a[1] for a, b in zip(results[first], results[second])]
    print(f"{second} - {first} total per round (ms):", " ".join(f"{x:+.1f}" for x in paired),
          f"median {statistics.median(paired):+.1f}, lower in {sum(x < 0 for x in paired)} of {len(paired)}")
