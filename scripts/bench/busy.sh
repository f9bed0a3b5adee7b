#!/usr/bin/env bash
# usage: busy.sh <command...>: runs it and prints the CPU time all cores spent busy meanwhile
# (user + nice + system + irq + softirq from /proc/stat; steal not counted), e.g.
#   GAP=0 scripts/bench/busy.sh scripts/bench/sandboxed_bash.py target/release/outrigger 1000
set -euo pipefail
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
hz=$(getconf CLK_TCK)
b0=$(busy); t0=$(date +%s%N)
"$@"
b1=$(busy); t1=$(date +%s%N)
echo "busy $(( (b1 - b0) * 1000 / hz )) ms over $(( (t1 - t0) / 1000000 )) ms wall"
