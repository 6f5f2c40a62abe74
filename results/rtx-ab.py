#!/usr/bin/env python3
# Interleaved runs of two (or more) streamer builds through tools/rtx-table's lab run (50 ms RTT
# unless DELAY_MS says otherwise, nft random loss on the media port, 640x360 x265 at 2 Mbit/s,
# --cc off, 300 frames, the derived playout latency, RTX on), the order alternating by round;
# one JSON row per run on stdout (rtx-table's fields, and build and round). Needs root.
# usage: results/rtx-ab.py ROUNDS LOSS DELAY_MS NAME=STREAMER NAME=STREAMER ...
import importlib.machinery, importlib.util, json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
loader = importlib.machinery.SourceFileLoader("rtx_table", os.path.join(ROOT, "tools", "rtx-table"))
spec = importlib.util.spec_from_loader("rtx_table", loader)
rtx_table = importlib.util.module_from_spec(spec)
loader.exec_module(rtx_table)
rounds, loss, delay = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
builds = [argument.split("=", 1) for argument in sys.argv[4:]]
try:
    for round_ in range(rounds):
        for name, path in (builds if round_ % 2 == 0 else builds[::-1]):
            row = rtx_table.run(path, 300, loss, None, True, False, delay)
            row.update(build=name, round=round_)
            print(json.dumps(row), flush=True)
finally:
    rtx_table.netlab("down")
