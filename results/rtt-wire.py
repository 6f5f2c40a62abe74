#!/usr/bin/env python3
"""The sender's RTT behind a loaded bottleneck, by the lab router's own timestamps (results/profile.md sections 46, 47).

    sudo results/rtt-wire.py STREAMER [OUT]

LabRTTTests' loaded case by hand: a 640x360 clip recorded at 4 Mbit/s, sent at 30 fps paced at
5 Mbit/s (`--report-interval 0.02`) through tools/netlab's 3 Mbit/s tbf (30,000 B queue) to
`streamer recv --feedback-interval 0.005`, ping every 10 ms beside it for 8 s. An AF_PACKET
capture in the router's namespace (this script again, `--capture`) records every IPv4 packet
on both of its interfaces with the kernel's timestamps; then it prints, from those alone:
- each sender report's NTP time against its arrival at the router, each first answer's DLSR
  against the receiver's hold as the router saw it, and the RTT the sender computes (arrival of
  the answer less LSR and DLSR) against the report's round trip at the router;
- the queue's delay as every sender report that reached the router, the answered ones and the
  pings found it against the queue over time (its delay for a packet arriving at 20,000 evenly
  spaced times: until the packet before it left);
- ping's send intervals (its own timestamps in the echo requests).
Needs root, nftables (tools/netlab) and python3. OUT (default /tmp/rtt-wire) keeps the capture.
"""
import bisect, os, select, socket, statistics as st, struct, subprocess, sys, time

def capture(interfaces, seconds, path):
    """In the router's namespace: every IPv4 packet on `interfaces` with its kernel timestamp."""
    sockets = {}
    for name in interfaces:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3))  # ETH_P_ALL: sent ones too
        s.bind((name, 0))
        s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
        s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
        sockets[s.fileno()] = (s, name[-2:])
    end = time.time() + seconds
    with open(path, 'w') as out:
        while time.time() < end:
            ready, _, _ = select.select([s for s, _ in sockets.values()], [], [], 0.2)
            for s in ready:
                while True:
                    try:
                        data, ancillary, _, address = s.recvmsg(2048, 64, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    if address[1] != 0x0800 or not ancillary:
                        continue
                    seconds_, nanoseconds = struct.unpack('qq', ancillary[0][2][:16])
                    header = (data[0] & 15) * 4
                    payload = data[header + 8:]
                    key, info = None, ''
                    if data[9] == 1 and data[header] in (0, 8):  # echo request / reply
                        ident, seq = struct.unpack('!HH', data[header + 4:header + 8])
                        key = f"{'echo' if data[header] == 8 else 'reply'}:{ident}:{seq}"
                        if data[header] == 8 and len(payload) >= 16:
                            sent, micro = struct.unpack('<qq', payload[:16])
                            info = f'{sent + micro / 1e6:.6f}'
                    elif data[9] == 17 and len(payload) >= 8 and payload[0] >> 6 == 2:
                        if payload[1] == 200:
                            key = 'sr:' + payload[8:16].hex()
                        elif payload[1] == 201 and payload[0] & 31 and len(payload) >= 32:
                            lsr, dlsr = struct.unpack('!II', payload[24:32])
                            key = f'rr:{lsr}:{dlsr}'
                        elif payload[1] & 0x7f < 72 or payload[1] & 0x7f > 79:
                            key = 'media:' + payload[:12].hex()
                    if key:
                        out.write(f'{seconds_ + nanoseconds / 1e9:.6f} {sockets[s.fileno()][1]} {address[2]} {key} {info}\n')

def run(streamer, out):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    netlab = os.path.join(root, 'tools/netlab')
    os.makedirs(out, exist_ok=True)
    subprocess.run([netlab, 'up', '--name', 'rttw', '--rate', '3mbit', '--queue', '30000'], check=True, stdout=subprocess.DEVNULL)
    try:
        clip = os.path.join(out, 'clip.hevc')
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(('127.0.0.1', 0))
        subprocess.run([streamer, 'send', '--to', f'127.0.0.1:{sink.getsockname()[1]}', '--size', '640x360', '--bitrate', '4M',
                        '--frames', '420', '--fast', '--no-feedback', '--quiet', '--record', clip], check=True, stderr=subprocess.DEVNULL)
        sink.close()
        ns = lambda host: ['ip', 'netns', 'exec', f'sl-rttw-{host}']
        receiver = subprocess.Popen(ns('rcv') + [streamer, 'recv', '--listen', '5004', '--duration', '25', '--quiet',
                                                 '--feedback-interval', '0.005'], stderr=subprocess.DEVNULL)
        time.sleep(1)
        capturer = subprocess.Popen(ns('rtr') + [sys.executable, os.path.abspath(__file__), '--capture',
                                                 'sl-rttw-rs,sl-rttw-rr', '16', os.path.join(out, 'capture.txt')])
        sender = subprocess.Popen(ns('snd') + [streamer, 'send', '--to', '10.77.2.2:5004', '--duration', '13', '--pace', '5M',
                                               '--report-interval', '0.02', '--quiet', '--source', clip, '--fps', '30'], stderr=subprocess.DEVNULL)
        time.sleep(2)
        with open(os.path.join(out, 'ping.txt'), 'w') as pings:
            subprocess.run(ns('snd') + ['ping', '-D', '-n', '-i', '0.01', '-c', '800', '10.77.2.2'], stdout=pings, check=True)
        sender.wait(); capturer.wait(); receiver.terminate(); receiver.wait()
    finally:
        subprocess.run([netlab, 'down', '--name', 'rttw'], stdout=subprocess.DEVNULL)

def analyze(out):
    seen = {}
    for line in open(os.path.join(out, 'capture.txt')):
        t, side, kind, key, *info = line.split()
        seen.setdefault(key, []).append((float(t), side, int(kind), info))
    def at(key, side, kind):  # kind 0: arriving at the router, 4: leaving it
        return next((t for t, s, k, _ in seen.get(key, []) if s == side and k == kind), None)
    # Toward the receiver: arrival from the sender (rs) and departure after the tbf (rr).
    through = sorted((at(k, 'rs', 0), at(k, 'rr', 4), k) for k in seen
                     if k.split(':')[0] in ('media', 'sr', 'echo') and at(k, 'rs', 0) and at(k, 'rr', 4))
    entered = [p[0] for p in through]
    def queue(t):  # ms, for a packet arriving at t: until the packet before it left
        i = bisect.bisect_left(entered, t) - 1
        return max(through[i][1] - t, 0) * 1e3 if i >= 0 else None
    reports = {}
    for t_in, t_out, k in through:
        if k.startswith('sr:'):
            hi, lo = int(k[3:11], 16), int(k[11:19], 16)
            reports[((hi & 0xffff) << 16) | (lo >> 16)] = (t_in, t_out, hi - 2208988800 + lo / 2**32)
    answers = {}
    for k in seen:
        if k.startswith('rr:'):
            lsr, dlsr = map(int, k.split(':')[1:])
            left, arrived = at(k, 'rs', 4), at(k, 'rr', 0)
            if left and arrived and (lsr not in answers or left < answers[lsr][0]):
                answers[lsr] = (left, arrived, dlsr / 65536)
    stamp, dlsr_error, rtt_error, report_queue = [], [], [], []
    for lsr, (left, arrived, dlsr) in answers.items():
        if lsr not in reports: continue
        t_in, t_out, ntp = reports[lsr]
        stamp.append((t_in - ntp) * 1e3)
        dlsr_error.append((dlsr - (arrived - t_out)) * 1e3)
        rtt_error.append(((left - ntp - dlsr) - ((left - t_in) - (arrived - t_out))) * 1e3)
        report_queue.append(queue(t_in))
    first, last = min(reports[l][0] for l in answers if l in reports), max(reports[l][0] for l in answers if l in reports)
    over_time = [q for q in (queue(first + (last - first) * j / 20000) for j in range(20000)) if q is not None]
    ping_queue = [q for q in (queue(t_in) for t_in, _, k in through if k.startswith('echo:') and first <= t_in <= last) if q is not None]
    report_queue = [q for q in report_queue if q is not None]
    def line(name, values):
        d = st.quantiles(values, n=10)
        print(f'{name}: median {st.median(values):+.3f}, mean {st.mean(values):+.3f}, deciles 1/9 {d[0]:+.3f} / {d[-1]:+.3f} (n {len(values)})')
    line('sender report: router arrival - its NTP time (ms)', stamp)
    line('first answer: DLSR - the hold the router saw (ms)', dlsr_error)
    line("sender's RTT from LSR/DLSR - the report's round trip at the router (ms)", rtt_error)
    median = st.median(over_time)
    print(f'queue delay over time: median {median:.3f} ms, mean {st.mean(over_time):.3f}')
    arrived = [t for t in (at(k, 'rs', 0) for k in seen if k.startswith('sr:')) if t is not None and first <= t <= last]
    every_queue = [q for q in (queue(t) for t in arrived) if q is not None]
    print(f'as every report that reached the router found it: median {st.median(every_queue) - median:+.3f} ms from it, mean {st.mean(every_queue) - st.mean(over_time):+.3f} (n {len(every_queue)})')
    print(f'as the answered reports found it: median {st.median(report_queue) - median:+.3f} ms from it, mean {st.mean(report_queue) - st.mean(over_time):+.3f} (n {len(report_queue)})')
    print(f'as the pings found it:   median {st.median(ping_queue) - median:+.3f} ms from it, mean {st.mean(ping_queue) - st.mean(over_time):+.3f}')
    sent = sorted(float(i[0]) for k, v in seen.items() if k.startswith('echo:') for t, s, kind, i in v if s == 'rs' and kind == 0 and i)
    gaps = [(b - a) * 1e3 for a, b in zip(sent, sent[1:])]
    print('ping send intervals (ms, its own timestamps): quartiles', [round(x, 2) for x in st.quantiles(gaps, n=4)])

if __name__ == '__main__':
    if sys.argv[1] == '--capture':
        capture(sys.argv[2].split(','), float(sys.argv[3]), sys.argv[4])
    else:
        out = sys.argv[2] if len(sys.argv) > 2 else '/tmp/rtt-wire'
        run(os.path.abspath(sys.argv[1]), out)
        analyze(out)
