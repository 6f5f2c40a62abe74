#!/usr/bin/env python3
# The sender's CPU thread by thread beside the floor sender (results/profile.md section 47): each
# round, in random order, `bench-floor send RECORDS P FPS` and `streamer send --to 127.0.0.1:P
# --source HEVC --fps FPS --frames FRAMES --no-feedback --cc off --pace 2G --mtu 1428 --quiet`
# on CPU 0, each into `bench-floor count P PACKETS` on CPU 1. Each thread's CPU is its
# /proc/PID/task/TID/schedstat, read every 20 ms until the process ends (a thread's last
# reading); the engine thread is the sender's busiest, the file source's read-ahead thread the
# next. Prints each round and the medians, per packet, and the sender against the floor paired.
# usage: sender-threads.py ROUNDS [LABEL=STREAMER ...]   (several: each build in the same rounds, in
# random order with the floor, each paired with its round's floor)   env STREAMER (.build/release/streamer), FLOOR
# (.build/release/bench-floor), HEVC (bench peers' clip, test.hevc), RECORDS (the floor's records
# of the same frames, as `bench peers` writes them, test.rtp), FPS (240), FRAMES (1440),
# PACKETS (22782, the datagrams of those frames)
import os, sys, glob, random, subprocess, time, statistics
STREAMER = os.environ.get("STREAMER", ".build/release/streamer"); FLOOR = os.environ.get("FLOOR", ".build/release/bench-floor")
HEVC = os.environ.get("HEVC", "test.hevc"); RECORDS = os.environ.get("RECORDS", "test.rtp")
FPS = os.environ.get("FPS", "240"); FRAMES = os.environ.get("FRAMES", "1440"); PACKETS = int(os.environ.get("PACKETS", "22782"))
rounds = int(sys.argv[1])
builds = dict(a.split("=", 1) for a in sys.argv[2:]) or {"streamer": STREAMER}

def run(kind):
    """Each thread's CPU (ns), busiest first, and whether the counter got every datagram."""
    port = 30000 + 2 * random.randrange(5000)
    counter = subprocess.Popen(["taskset", "-c", "1", FLOOR, "count", str(port), str(PACKETS)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    if kind == "floor":
        command = [FLOOR, "send", RECORDS, str(port), FPS]
    else:
        command = [builds[kind], "send", "--to", f"127.0.0.1:{port}", "--source", HEVC, "--fps", FPS, "--frames", FRAMES,
                   "--no-feedback", "--cc", "off", "--pace", "2G", "--mtu", "1428", "--quiet"]
    sender = subprocess.Popen(["taskset", "-c", "0", *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = {}
    while sender.poll() is None:
        for task in glob.glob(f"/proc/{sender.pid}/task/*"):
            try:
                last[task] = int(open(task + "/schedstat").read().split()[0])
            except OSError:
                pass  # the thread ended between the listing and the read
        time.sleep(0.02)
    out, _ = counter.communicate(timeout=60)
    complete = f"packets={PACKETS} " in out
    return sorted(last.values(), reverse=True), complete

floor = []
engine, source, total = ({b: [] for b in builds} for _ in range(3))
for r in range(rounds):
    for kind in random.sample(["floor", *builds], 1 + len(builds)):
        threads, complete = run(kind)
        if not complete:
            sys.exit(f"round {r}: {kind} did not deliver all {PACKETS} datagrams")
        per = [ns / 1e3 / PACKETS for ns in threads]
        if kind == "floor":
            floor.append(sum(per))
        else:
            engine[kind].append(per[0]); source[kind].append(per[1] if len(per) > 1 else 0); total[kind].append(sum(per))
    print(f"{r} floor {floor[-1]:.3f}" + "".join(f"  {b} engine {engine[b][-1]:.3f} source {source[b][-1]:.3f} all {total[b][-1]:.3f}" for b in builds) + " us/packet", flush=True)
print(f"load {open('/proc/loadavg').read().split()[:3]}")
print(f"median floor {statistics.median(floor):.3f} us/packet")
for b in builds:
    print(f"{b}: median engine {statistics.median(engine[b]):.3f}  source {statistics.median(source[b]):.3f}  all {statistics.median(total[b]):.3f} us/packet; "
          f"paired x the floor: engine thread {statistics.median(e / f for e, f in zip(engine[b], floor)):.3f}, all threads {statistics.median(t / f for t, f in zip(total[b], floor)):.3f}")
if len(builds) > 1:
    first = next(iter(builds))
    for b in list(builds)[1:]:
        pairs = [t / u for t, u in zip(total[b], total[first])]
        print(f"{b} / {first}, all threads, paired: median {statistics.median(pairs):.3f}, lower in {sum(p < 1 for p in pairs)} of {len(pairs)}")
