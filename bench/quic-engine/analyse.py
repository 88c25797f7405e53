#!/usr/bin/env python3
"""Paired A/B summary of ab.csv: per workload, the median of each variant over the rounds and
the median over rounds of B/A (same round), with the distribution-free 95% CI of that median
(order statistics; n = 10 gives ranks 2 and 9, 97.9% coverage)."""
import csv, math, statistics
from collections import defaultdict

rows = list(csv.DictReader(open('ab.csv')))
vals = defaultdict(dict)
units = {}
loads = []
for r in rows:
    if not r['value']:
        continue
    vals[r['workload']].setdefault(r['variant'], {})[int(r['round'])] = float(r['value'])
    units[r['workload']] = r['unit']
    loads.append(float(r['load1']))

def ci_ranks(n):
    # largest k with P(Binom(n, .5) < k) <= 0.025, so that (x_k, x_{n+1-k}) covers >= 95%
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if tail <= 0.025:
            best = k
    return best

def show(x, unit):
    if unit == 'ns':
        return f'{x / 1000:.2f} us'
    if unit == 'bit/s':
        return f'{x / 1e9:.2f} Gbit/s'
    return f'{x:.0f} /s'

print('| workload | A, median | B, median | B / A, median [95% CI] | n |')
print('|---|---|---|---|---|')
for w in ['pingpong64', 'stream_P1', 'stream_P4', 'idle_wakeups']:
    a, b = vals[w].get('A', {}), vals[w].get('B', {})
    rounds = sorted(set(a) & set(b))
    ratios = sorted(b[r] / a[r] for r in rounds if a[r] > 0)
    n = len(ratios)
    k = ci_ranks(n) if n else None
    ci = f'[{ratios[k - 1]:.3f}, {ratios[n - k]:.3f}]' if k else 'n/a'
    med = f'{statistics.median(ratios):.3f}' if ratios else 'n/a'
    print(f'| {w} | {show(statistics.median(a.values()), units[w])} | '
          f'{show(statistics.median(b.values()), units[w])} | {med} {ci} | {n} |')
print()
print(f'load average (1 min) at the start of each run: min {min(loads):.2f}, median '
      f'{statistics.median(loads):.2f}, max {max(loads):.2f}')
