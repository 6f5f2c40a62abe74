#!/usr/bin/env python3
# The interleaved before/after runs of results/profile.md.
# usage: profile-ab.py ROUNDS send,recv VARIANT,VARIANT...   (round 0 is a warm-up)
# Senders (the floor, then each variant's streamer send) -> bench-floor count; receivers (the
# floor counter, then each variant's streamer recv) fed by the floor sender. A variant V is
# $LP/lp-V/streamer; the file (t.hevc) and its floor records (t.rtp, copied from the directory
# bench peers --frames 2400 works in) are in $LP (default /tmp/lp); bench-floor is $FLOOR.
import os, subprocess, sys, time, statistics, json
LP = os.environ.get("LP", "/tmp/lp")
FLOOR = os.environ.get("FLOOR", "/tmp/lp-before/bench-floor")
RECORDS, HEVC, PACKETS, FRAMES = f"{LP}/t.rtp", f"{LP}/t.hevc", 37833, 2400
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
which = sys.argv[2] if len(sys.argv) > 2 else "send,recv"
variants = sys.argv[3].split(",") if len(sys.argv) > 3 else ["before", "after"]
# Each variant's streamer: $VARIANTS{V}/streamer (VARIANTS default /tmp/lp-).
VARIANTS = os.environ.get("VARIANTS", "/tmp/lp-")
streamers = {v: f"{VARIANTS}{v}/streamer" for v in variants}
port = 41000 + os.getpid() % 1000 * 2
def run(argv, core):
    p = subprocess.Popen(["taskset", "-c", str(core), "nice", "-n", "-10"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p
def reap(p):
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    return ru.ru_utime, ru.ru_stime, status
def start_counter(port, core):
    out = f"{LP}/cnt-{port}.txt"
    p = subprocess.Popen(["taskset", "-c", str(core), "nice", "-n", "-10", FLOOR, "count", str(port), "0"], stdout=open(out, "w"), stderr=subprocess.DEVNULL)
    for _ in range(500):
        time.sleep(0.01)
        if open(out).read().startswith("ready"): break
    return p, out
res = {}
def load(): return open("/proc/loadavg").read().split()[0]
for r in range(rounds + 1):
    if "send" in which:
        for name in ["floor"] + variants:
            port += 2
            c, out = start_counter(port, 1)
            if name == "floor": argv = [FLOOR, "send", RECORDS, str(port), "240"]
            else: argv = [streamers[name], "send", "--to", f"127.0.0.1:{port}", "--source", HEVC, "--fps", "240", "--no-feedback", "--cc", "off", "--pace", "2G", "--mtu", "1428", "--quiet"]
            u, s, st = reap(run(argv, 0))
            c.wait()
            pk = int(open(out).read().split("packets=")[1].split()[0])
            us = (u + s) * 1e6 / max(pk, 1)
            print(f"round {r} send {name}: {pk} pkts user {u*1e6/pk:.2f} sys {s*1e6/pk:.2f} total {us:.2f} us/pkt load {load()}", flush=True)
            if r > 0: res.setdefault("send-" + name, []).append((u*1e6/pk, s*1e6/pk, us))
    if "recv" in which:
        for name in ["floor"] + variants:
            port += 2
            if name == "floor":
                p, out = start_counter(port, 1)
            else:
                # FEEDBACK=1: the receivers send feedback and recover losses (playout buffer, NACK).
                feedback = [] if os.environ.get("FEEDBACK") == "1" else ["--no-feedback"]
                p = run([streamers[name], "recv", "--listen", f"127.0.0.1:{port}", "--frames", str(FRAMES)] + feedback + ["--quiet", "--stats", f"{LP}/recv-{port}.json"], 1)
                time.sleep(0.7)
            sender = run([FLOOR, "send", RECORDS, str(port), "240"], 0); sender.wait()
            deadline = time.time() + 5
            while time.time() < deadline:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid: break
                time.sleep(0.05)
            else:
                p.kill(); pid, status, ru = os.wait4(p.pid, 0)
            u, s = ru.ru_utime, ru.ru_stime
            info = ""
            if name != "floor":
                try: info = "frames=%s" % json.load(open(f"{LP}/recv-{port}.json"))["frames"]["complete"]
                except Exception as e: info = "nostats"
            else: info = open(out).read().split("\n")[-2]
            us = (u + s) * 1e6 / PACKETS
            print(f"round {r} recv {name}: {info} user {u*1e6/PACKETS:.2f} sys {s*1e6/PACKETS:.2f} total {us:.2f} us/pkt load {load()}", flush=True)
            if r > 0: res.setdefault("recv-" + name, []).append((u*1e6/PACKETS, s*1e6/PACKETS, us))
print("medians (user, sys, total us/pkt):")
for k, v in res.items():
    m = [statistics.median(x[i] for x in v) for i in range(3)]
    base = statistics.median(x[2] for x in res["send-floor" if k.startswith("send") else "recv-floor"])
    print(f"  {k}: {m[0]:.2f} {m[1]:.2f} {m[2]:.2f}  x floor {m[2]/base:.2f}  (n={len(v)})")
