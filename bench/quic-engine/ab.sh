#!/usr/bin/env bash
# Paired A/B of two wirebench release binaries over QUIC (bench/RESULTS.md, "QUIC: shared
# engine or a thread per flow"): pingpong 64 B, stream -P 1 and -P 4, and the engine threads'
# wake-ups per second inside an idle point (a stream paced to one 1 KiB write a second).
# Rounds alternate the order (A B, then B A). Run in a directory holding ./wb-A and ./wb-B;
# writes ab.csv there, which analyse.py summarises. ROUNDS=10 by default.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=ab.csv
echo "round,variant,workload,value,unit,load1" > $out
run() { # variant workload args...
  local v=$1 w=$2; shift 2
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  local val
  val=$(./wb-$v run "$@" -t quic --no-save --json 2>/dev/null | python3 -c '
import json,sys; d=json.load(sys.stdin); h=d["points"][0]["headline"]; print(h["values"][0], h["unit"], sep=",")')
  echo "$r,$v,$w,$val,$load" >> $out
}
idle() { # variant
  local v=$1
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  local val
  val=$("$here/wakeups.py" 1.5 1.0 -- ./wb-$v run stream -s 1K -b 8k -t quic -d 3s --no-save | sed -n 's/^wirebench-quic *threads= *[0-9]* voluntary\/s= *\([0-9]*\) .*/\1/p')
  echo "$r,$v,idle_wakeups,$val,wakeups/s,$load" >> $out
}
for r in $(seq 1 ${ROUNDS:-10}); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for v in $order; do
    run $v pingpong64 pingpong -s 64 -d 3s
    run $v stream_P1 stream -d 3s
    run $v stream_P4 stream -P 4 -d 3s
    idle $v
  done
done
