#!/usr/bin/env bash
# CI: the benchmark scripts run (one round, one second per run). No timing is asserted here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
python3 bench/peers --smoke > "$out"
python3 bench/peers --smoke --memory >> "$out"
python3 bench/peers --smoke --scaling --scaling-part flows >> "$out"
# Settings side by side: one round of a wirebench stream and the reference loop.
python3 bench/variants --rounds 1 'wb={wb} run --to {server} --json --no-save stream -d 300ms' \
  'ref={ref} stream 0.3 131072 rcvlowat' >> "$out"
# osu_bw's loop against wirebench mpi stream, where Open MPI is installed (CI installs it).
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  python3 bench/mpi --smoke >> "$out"
  grep -q "wirebench (window 64) / mpi_bw = [0-9]" "$out"
fi
# The attack classes of SECURITY.md against a server, a few cases each: failures must be 0.
python3 bench/attacks --smoke >> "$out"
# README's worked examples, the binary against itself: the A/B harness runs and reads them.
python3 bench/ab --smoke >> "$out"
# The randomised oracle, two lab scenarios without hogs (root; skipped with WIREBENCH_SKIP_LAB).
python3 bench/oracle --smoke >> "$out"
# --trace's cost and completeness, one short round on loopback and a 1 Gbit/s lab (root).
python3 bench/trace-ab --smoke >> "$out"
# The same run twice, compared with the default gate: counts false alarms (one tiny pair here).
python3 bench/compare-noise --smoke >> "$out"
# --path-timing on against off, one short paired round (skipped, saying why, by a binary
# without it).
python3 bench/path-timing-cost --smoke >> "$out"
# A standing agent's CPU and memory, 10 targets for a few seconds.
python3 bench/agent-cost --smoke >> "$out"
cat "$out"
grep -q "TCP stream, 1 flow" "$out"
grep -q "resident memory" "$out"
grep -q "^| 16 | [0-9]" "$out"
grep -q "^| ref | [0-9]" "$out"
grep -q "well-behaved clients at once: cases [0-9]*, failures 0" "$out"
grep -q "^pingpong sweep  t0 (ns, lower)" "$out"
grep -qE "^(oracle skipped|scenarios +figures checked +violations)" "$out"
grep -qE "^(trace-ab skipped|\| loopback, stream -d 300ms \| [0-9])" "$out"
grep -qE "^\| pingpong tcp 64 B, -d 100ms \| [0-9]" "$out"
grep -qE "^  runs saved \(source agent\): [0-9]+ of [0-9]+ due" "$out"
grep -q "^false worse verdicts: [0-9]*; gate failures: [0-9]* in 1 identical pairs" "$out"
rm -f "$out"
