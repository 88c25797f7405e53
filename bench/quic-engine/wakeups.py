#!/usr/bin/env python3
"""Wake-ups per second per thread of a wirebench run, inside its timed point.

Usage: wakeups.py DELAY WINDOW -- CMD...
Starts CMD, waits DELAY s (past setup and warm-up), reads every thread's context-switch
counters from /proc, waits WINDOW s, reads them again: a thread that sleeps and is woken
counts one voluntary switch per wake-up. Prints per thread name: count, voluntary/s,
involuntary/s."""
import os, subprocess, sys, time
from collections import defaultdict

def snap(pid):
    out = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            comm = open(f'/proc/{pid}/task/{tid}/comm').read().strip()
            st = open(f'/proc/{pid}/task/{tid}/status').read().split('\n')
            v = int([l for l in st if l.startswith('voluntary_ctxt_switches')][0].split()[1])
            n = int([l for l in st if l.startswith('nonvoluntary_ctxt_switches')][0].split()[1])
            out[tid] = (comm, v, n)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return out

delay, window = float(sys.argv[1]), float(sys.argv[2])
cmd = sys.argv[sys.argv.index('--') + 1:]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(delay)
a = snap(p.pid)
t0 = time.monotonic()
time.sleep(window)
b = snap(p.pid)
dt = time.monotonic() - t0
p.wait()
agg = defaultdict(lambda: [0, 0, 0])
for tid, (comm, v, n) in b.items():
    if tid in a:
        agg[comm][0] += 1
        agg[comm][1] += v - a[tid][1]
        agg[comm][2] += n - a[tid][2]
if os.environ.get("PER_THREAD"):
    for tid, (comm, v, n) in sorted(b.items()):
        if tid in a and comm.startswith(os.environ["PER_THREAD"]):
            print(f"  {comm} tid {tid}: voluntary/s={(v - a[tid][1])/dt:.0f}")
tot = [0, 0]
for comm, (k, v, n) in sorted(agg.items()):
    print(f'{comm:20s} threads={k:2d} voluntary/s={v/dt:9.0f} involuntary/s={n/dt:7.0f}')
    tot[0] += v; tot[1] += n
print(f'{"TOTAL":20s}            voluntary/s={tot[0]/dt:9.0f} involuntary/s={tot[1]/dt:7.0f}  rc={p.returncode}')
