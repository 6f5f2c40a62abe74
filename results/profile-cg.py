#!/usr/bin/env python3
# User-space instructions per packet of streamer recv --no-feedback (callgrind's Ir: where the
# machine has no hardware counters for perf stat), fed by the floor sender at 120 fps;
# (Ir(960 frames) - Ir(240 frames)) / (packets(960) - packets(240)) takes out start-up.
# usage: profile-cg.py ROUNDS VARIANT,VARIANT...   (variants alternately; results/profile.md 15.2)
# RECV_ARGS: streamer recv's options besides these (default --no-feedback; "" for the default
# receiver, with feedback and loss recovery: results/profile.md section 31)
# LP, FLOOR and VARIANTS as for results/profile-ab.py; the callgrind files stay in $LP (cg-V-N.out).
import os, subprocess, sys, time, json, statistics
LP = os.environ.get("LP", "/tmp/lp")
FLOOR = os.environ.get("FLOOR", "/tmp/lp-before/bench-floor")
VARIANTS = os.environ.get("VARIANTS", "/tmp/lp-")
RECV_ARGS = os.environ.get("RECV_ARGS", "--no-feedback").split()
rounds=int(sys.argv[1]); variants=sys.argv[2].split(",")
port=45000+os.getpid()%400*2
def one(v, frames):
    global port
    port+=2
    out=f"{LP}/cg-{v}-{frames}.out"; st=f"{LP}/cgs-{port}.json"
    p=subprocess.Popen(["taskset","-c","1","valgrind","--tool=callgrind",f"--callgrind-out-file={out}",f"{VARIANTS}{v}/streamer","recv","--listen",f"127.0.0.1:{port}","--frames",str(frames),*RECV_ARGS,"--quiet","--stats",st],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    time.sleep(4)
    s=subprocess.Popen(["taskset","-c","0",FLOOR, "send",f"{LP}/t.rtp",str(port),"120"],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    p.wait(); s.kill(); s.wait()
    ir=None
    for line in open(out):
        if line.startswith("totals:") or line.startswith("summary:"): ir=int(line.split()[1])
    d=json.load(open(st))
    return ir, d["packets"]["received"], d["frames"]["complete"]
res={}
for r in range(rounds):
    for v in variants:
        a=one(v,240); b=one(v,960)
        per=(b[0]-a[0])/(b[1]-a[1])
        res.setdefault(v,[]).append(per)
        print(f"round {r} {v}: Ir {a[0]} ({a[1]} pkts, {a[2]} frames) / {b[0]} ({b[1]} pkts, {b[2]} frames): {per:.0f} instructions per packet, load {open('/proc/loadavg').read().split()[0]}",flush=True)
for v,x in res.items(): print(f"median {v}: {statistics.median(x):.0f} instructions:u per packet (n={len(x)})")
