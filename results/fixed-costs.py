#!/usr/bin/env python3
# The fixed per-process costs of streamer builds (results/profile.md section 21): whole-process
# CPU (wait4, user + system) of short runs on CPU 1, interleaved (every case of every build in
# each round, RUNS runs each; round 0 is a warm-up), medians.
# usage: fixed-costs.py ROUNDS RUNS NAME=PATH...   (CASES=version,recv,... picks cases; the
# send cases read $LP/t.hevc, as profile-ab.py does, and send to a socket nobody reads)
import os, subprocess, sys, statistics, socket, tempfile
rounds, runs = int(sys.argv[1]), int(sys.argv[2])
variants = [a.split("=", 1) for a in sys.argv[3:]]
HEVC = os.environ.get("LP", "/tmp/lp") + "/t.hevc"
OUT = tempfile.mkdtemp(prefix="fixed-costs-")
sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
sink.bind(("127.0.0.1", 0)); sink.setblocking(False)
sinkport = sink.getsockname()[1]
port = 43000 + os.getpid() % 500 * 4
def drain():
    try:
        while True: sink.recv(65536)
    except BlockingIOError: pass
cases = {
  "version": lambda b, p: [b, "--version"],
  "recv": lambda b, p: [b, "recv", "--listen", f"127.0.0.1:{p}", "--duration", "0.05", "--no-feedback", "--quiet"],
  "recv+stats": lambda b, p: [b, "recv", "--listen", f"127.0.0.1:{p}", "--duration", "0.05", "--no-feedback", "--quiet", "--stats", f"{OUT}/r-{p}.json"],
  "send24": lambda b, p: [b, "send", "--to", f"127.0.0.1:{sinkport}", "--source", HEVC, "--frames", "24", "--fps", "240", "--no-feedback", "--cc", "off", "--pace", "2G", "--mtu", "1428", "--quiet"],
  "send24+stats": lambda b, p: [b, "send", "--to", f"127.0.0.1:{sinkport}", "--source", HEVC, "--frames", "24", "--fps", "240", "--no-feedback", "--cc", "off", "--pace", "2G", "--mtu", "1428", "--quiet", "--stats", f"{OUT}/s-{p}.json"],
}
only = os.environ.get("CASES")
if only: cases = {k: v for k, v in cases.items() if k in only.split(",")}
res = {}
for r in range(rounds + 1):
    for case, argv in cases.items():
        for name, path in variants:
            for _ in range(runs):
                port += 2
                p = subprocess.Popen(["taskset", "-c", "1"] + argv(path, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                drain()
                if status != 0: print(f"{name} {case}: exit status {status}", flush=True)
                if r > 0: res.setdefault((case, name), []).append((ru.ru_utime * 1e3, ru.ru_stime * 1e3))
    print(f"round {r} done, load {open('/proc/loadavg').read().split()[0]}", flush=True)
print("case, variant: median user, sys, total ms of CPU per process (n)")
for (case, name), v in res.items():
    u = statistics.median(x[0] for x in v); s = statistics.median(x[1] for x in v); t = statistics.median(x[0] + x[1] for x in v)
    print(f"  {case:13s} {name:10s} {u:6.2f} {s:6.2f} {t:6.2f}  (n={len(v)})")
