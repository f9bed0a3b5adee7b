#!/usr/bin/env python3
"""Sandboxed `bash -c true` through `tool.invoke`, timed from the host's side.

usage: sandboxed_bash.py <outrigger binary> [calls]   (docs/benchmarks.md)
       sandboxed_bash.py <binary A> <binary B> [pairs]  A/B: calls alternated one by one

Env (XENV is read by sidecar.py): GAP seconds between calls (default 0.1; 0 = back to back), CMD the command (default
`true`), XENV extra `KEY=VALUE` settings for the sidecar (space separated). Five warm-up
calls first. Prints median, p90, p99 and min in ms. Run it with TMPDIR away from /tmp
when profiling: files appearing in /tmp change what a prepared spare's Landlock walk saw.
The A/B form runs both sidecars side by side and alternates single calls (in a random order
within each pair, GAP apart), so a drift of the host lands on both; it prints each side's
median, the sidecar's own CPU per call (alone, and with its spares' and their children's,
counted once reaped) and the median of the per-pair differences (B - A). Stdlib only.
"""
import json, os, random, statistics, sys, time

import sidecar

gap = float(os.environ.get("GAP", "0.1"))


def make_call(p, ws):
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
    return call


def cpu_ms(p):
    """The sidecar's own CPU so far (user + system), and with its reaped children's (the
    spares, whose own children, init and the command, were reaped by them)."""
    with open(f"/proc/{p.pid}/stat") as f:
        t = [int(x) * 1000 / os.sysconf("SC_CLK_TCK")
             for x in f.read().rsplit(")", 1)[1].split()[11:15]]
    return (t[0] + t[1], sum(t))


def summary(v):
    v = sorted(v)
    return (f"median {statistics.median(v):.3f} p90 {v[int(len(v) * .9)]:.3f} "
            f"p99 {v[min(len(v) - 1, int(len(v) * .99))]:.3f} min {v[0]:.3f} ms")


ab = len(sys.argv) > 2 and not sys.argv[2].isdigit()
binaries = sys.argv[1:3] if ab else sys.argv[1:2]
rest = sys.argv[3:] if ab else sys.argv[2:]
calls = int(rest[0]) if rest else 40
procs = [sidecar.start(b) for b in binaries]
sides = [make_call(p, ws) for p, ws in procs]
for i in range(5):
    for call in sides:
        call(i)
        time.sleep(gap)
v = [[] for _ in sides]
cpu0 = [cpu_ms(p) for p, _ in procs]
for i in range(calls):
    order = list(range(len(sides)))
    random.shuffle(order)
    for k in order:
        time.sleep(gap)
        v[k].append(sides[k](100 + i))
cpu = [tuple((x - y) / calls for x, y in zip(cpu_ms(p), c)) for (p, _), c in zip(procs, cpu0)]
cpu = [f"sidecar CPU {own:.3f} ms per call, {kids:.3f} with its spares" for own, kids in cpu]
if ab:
    d = [b - a for a, b in zip(*v)]
    print(f"A {summary(v[0])}, {cpu[0]}")
    print(f"B {summary(v[1])}, {cpu[1]}")
    print(f"B - A: median of {len(d)} pair differences {statistics.median(d):+.3f} ms, "
          f"B faster in {sum(x < 0 for x in d)} of {len(d)}")
else:
    print(f"{summary(v[0])}, {cpu[0]}")
for p, _ in procs:
    p.stdin.close()
    p.wait()
