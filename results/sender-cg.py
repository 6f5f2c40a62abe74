#!/usr/bin/env python3
# User-space instructions per packet of `streamer send` with a file source (callgrind's Ir: this
# machine has no hardware counters for perf stat), live at FPS (default 30): the first 240 and
# the first 480 frames of a .hevc file, (Ir(480) - Ir(240)) / (packets(480) - packets(240)), so
# start-up cancels out. Under valgrind the ring thread's waits would keep the source's thread
# from running (results/profile.md sections 39 and 41): tools/valgrind-uring-wait.c, built here
# with gcc and preloaded, turns them into polls, whose instructions (its `syscall`, inclusive) are
# taken out of the totals.
# usage: sender-cg.py HEVC NAME=STREAMER[:OPTIONS]...   (OPTIONS: more `streamer send` options for that
# variant, e.g. ":--cc on --bitrate 8M")   env FPS (30), OUT (a directory for the .out files),
# FEEDBACK (1: the sender with its default options, feedback on and its default pace, into a native
# `streamer recv` on CPU 1, RECV its binary, default .build/release/streamer: results/profile.md
# section 45; otherwise `--no-feedback --cc off --pace 2G` into a UDP socket in this script, which
# counts the datagrams). Prints per packet and per frame (the 480-frame run less the 240-frame one).
import json, os, socket, subprocess, sys, tempfile, threading, time
here = os.path.dirname(os.path.abspath(__file__))
hevc = sys.argv[1]; variants = [a.split("=", 1) for a in sys.argv[2:]]
variants = [(name, *(spec.split(":", 1) if ":" in spec else (spec, ""))) for name, spec in variants]
fps = os.environ.get("FPS", "30")
out = os.environ.get("OUT") or tempfile.mkdtemp(prefix="sender-cg-")
os.makedirs(out, exist_ok=True)
shim = os.path.join(out, "valgrind-uring-wait.so")
subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(here, "..", "tools", "valgrind-uring-wait.c"), "-ldl"],
               check=True)

feedback = os.environ.get("FEEDBACK") == "1"
receiverBinary = os.environ.get("RECV", os.path.join(here, "..", ".build", "release", "streamer"))

def counted_sink():
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sink.bind(("127.0.0.1", 0)); sink.settimeout(0.5)
    counted = [0]; done = threading.Event()
    def count():
        while not done.is_set():
            try: sink.recv(65536); counted[0] += 1
            except socket.timeout: pass
    reader = threading.Thread(target=count); reader.start()
    def finish():
        time.sleep(1); done.set(); reader.join(); sink.close()
        return counted[0]
    return sink.getsockname()[1], finish

def native_receiver(frames):
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1] & ~1; probe.close()
    stats = os.path.join(out, f"recv-{port}.json")
    receiver = subprocess.Popen(["taskset", "-c", "1", receiverBinary, "recv", "--listen", f"127.0.0.1:{port}",
                                 "--frames", str(frames), "--quiet", "--stats", stats], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    def finish():
        try: receiver.wait(timeout=20)
        except subprocess.TimeoutExpired: receiver.kill(); receiver.wait()
        packets = json.load(open(stats))["packets"]["received"]; os.unlink(stats)
        return packets
    return port, finish

def one(name, path, extra, frames):
    port, finish = native_receiver(frames) if feedback else counted_sink()
    file = os.path.join(out, f"cgs-{name}-{frames}.out")
    env = dict(os.environ, LD_PRELOAD=shim)
    options = [] if feedback else ["--no-feedback", "--cc", "off", "--pace", "2G"]
    subprocess.run(["taskset", "-c", "0", "valgrind", "--tool=callgrind",
                    f"--callgrind-out-file={file}", path, "send", "--to", f"127.0.0.1:{port}",
                    "--source", hevc, "--fps", fps, "--frames", str(frames), *options, *extra.split(), "--mtu", "1428", "--quiet"],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    packets = finish()
    ir = next(int(line.split()[1]) for line in open(file) if line.startswith(("totals:", "summary:")))
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", file],
                               capture_output=True, text=True, check=True).stdout
    polls = sum(int(line.split()[0].replace(",", "")) for line in annotated.splitlines()
                if ":syscall [" in line and "valgrind-uring-wait.so" in line)
    return ir - polls, packets

for name, path, extra in variants:
    (ir1, p1), (ir2, p2) = one(name, path, extra, 240), one(name, path, extra, 480)
    print(f"{name}: Ir {ir1} ({p1} datagrams) / {ir2} ({p2}): {(ir2 - ir1) / (p2 - p1):.0f} instructions per packet "
          f"({(ir2 - ir1) / 240:.0f} per frame); callgrind files in {out}", flush=True)
