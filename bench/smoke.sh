#!/usr/bin/env bash
# CI: the benchmark scripts run (one round, one second per run). No timing is asserted here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
python3 bench/peers --smoke > "$out"
python3 bench/peers --smoke --memory >> "$out"
cat "$out"
grep -q "TCP stream, 1 flow" "$out"
grep -q "resident memory" "$out"
rm -f "$out"
