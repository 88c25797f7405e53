#!/usr/bin/env bash
# CI: the benchmark scripts run (tiny durations, one round). No timing is asserted here.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 bench/peers --smoke > /tmp/wirebench-bench-smoke.txt
cat /tmp/wirebench-bench-smoke.txt
grep -q "TCP stream, 1 flow" /tmp/wirebench-bench-smoke.txt
