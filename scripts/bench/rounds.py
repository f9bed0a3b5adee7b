#!/usr/bin/env python3
"""Ten-round turns (`read_file` each round, then text) against a fake OpenAI-compatible
server on loopback; the sidecar's own CPU per turn from /proc/<pid>/stat.

usage: rounds.py <outrigger binary> [turns]   (docs/benchmarks.md)

One warm-up turn first. With PAUSE=<seconds> it prints `PID <pid>` after the warm-up and
waits, for `perf record -p`. Stdlib only.
"""
import json, os, statistics, sys, threading, time

import fake_provider
import sidecar

binary = sys.argv[1]
turns = int(sys.argv[2]) if len(sys.argv) > 2 else 40
ROUNDS = 10
left, lock, served = [0], threading.Lock(), [0]


def respond():
    with lock:
        served[0] += 1
        tool = left[0] > 0
        if tool:
            left[0] -= 1
    return fake_provider.tool_sse(served[0]) if tool else fake_provider.TEXT


port = fake_provider.start(respond)
p, ws = sidecar.start(binary)
with open(os.path.join(ws, "notes.txt"), "w") as f:
    f.write("alpha\nbeta\n")

def turn(k):
    left[0] = ROUNDS - 1
    frame = json.dumps({"jsonrpc": "2.0", "id": k, "method": "agent.chat.stream", "params": {
        "provider": "openai_compat", "model": "fake-model",
        "baseUrl": f"http://127.0.0.1:{port}/v1", "apiKey": "k",
        "chatId": f"c{k}", "streamId": f"s{k}", "cwd": ws,
        "messages": [{"role": "user", "content": "read notes ten times"}]}}) + "\n"
    t = time.perf_counter()
    p.stdin.write(frame.encode())
    p.stdin.flush()
    answered = done = False
    while not (answered and done):
        r = json.loads(p.stdout.readline())
        if r.get("id") == k:
            answered = True
            if "error" in r:
                sys.exit(f"turn refused: {r}")
        elif r.get("method") == "stream.done":
            done = True
            if r["params"]["status"] != "completed":
                sys.exit(f"turn did not complete: {r}")
        elif r.get("method") == "stream.error":
            sys.exit(f"stream.error: {r}")
    return (time.perf_counter() - t) * 1000


def cpu_ticks():
    with open(f"/proc/{p.pid}/stat") as f:
        return sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])


turn(0)
if os.environ.get("PAUSE"):
    print("PID", p.pid, flush=True)
    time.sleep(float(os.environ["PAUSE"]))
c0 = cpu_ticks()
walls = [turn(k) for k in range(1, turns + 1)]
ms_per_tick = 1000 / os.sysconf("SC_CLK_TCK")
print(f"turn median {statistics.median(walls):.2f} ms, "
      f"sidecar CPU {(cpu_ticks() - c0) * ms_per_tick / turns:.2f} ms per turn")
p.stdin.close()
p.wait()
