#!/usr/bin/env python3
"""Sandboxed `bash -c true` through `tool.invoke`, timed from the host's side.

usage: sandboxed_bash.py <outrigger binary> [calls]   (docs/benchmarks.md)

Env (XENV is read by sidecar.py): GAP seconds between calls (default 0.1; 0 = back to back), CMD the command (default
`true`), XENV extra `KEY=VALUE` settings for the sidecar (space separated). Five warm-up
calls first. Prints median, p90, p99 and min in ms. Run it with TMPDIR away from /tmp
when profiling: files appearing in /tmp change what a prepared spare's Landlock walk saw.
Stdlib only.
"""
import json, os, statistics, sys, time

import sidecar

binary = sys.argv[1]
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 40
gap = float(os.environ.get("GAP", "0.1"))
p, ws = sidecar.start(binary)


def call(i):
    frame = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tool.invoke", "params": {
        "name": "bash", "arguments": {"command": os.environ.get("CMD", "true")},
        "consentGranted": True, "context": {"cwd": ws}}}) + "\n"
    t = time.perf_counter()
    p.stdin.write(frame.encode())
    p.stdin.flush()
    while True:
        r = json.loads(p.stdout.readline())
        if r.get("id") == i:
            break
    d = time.perf_counter() - t
    if not r.get("result", {}).get("success"):
        sys.exit(f"call failed: {r}")
    return d * 1000


for i in range(5):
    call(i)
    time.sleep(gap)
v = []
for i in range(calls):
    time.sleep(gap)
    v.append(call(100 + i))
v.sort()
print(f"median {statistics.median(v):.3f} p90 {v[int(len(v) * .9)]:.3f} "
      f"p99 {v[min(len(v) - 1, int(len(v) * .99))]:.3f} min {v[0]:.3f} ms")
p.stdin.close()
p.wait()
