#!/usr/bin/env python3
"""Ten-round turns (`read_file` each round, then text) against a fake OpenAI-compatible
server on loopback; the sidecar's own CPU per turn from /proc/<pid>/stat.

usage: rounds.py <outrigger binary> [turns]             (docs/benchmarks.md)
       rounds.py <binary A> <binary B> [pairs]           A/B: turns alternated one by one

One warm-up turn first. With PAUSE=<seconds> it prints `PID <pid>` after the warm-up and
waits, for `perf record -p`. The A/B form runs both sidecars side by side and alternates
single turns (in a random order within each pair), so a drift of the host (which moves a
whole run by 20-50 % here) lands on both; it reports each side's median and the median of
the per-pair differences. Stdlib only.
"""
import json, os, random, statistics, sys, threading, time

import fake_provider
import sidecar

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


class Side:
    def __init__(self, binary):
        self.p, self.ws = sidecar.start(binary)
        with open(os.path.join(self.ws, "notes.txt"), "w") as f:
            f.write("alpha\nbeta\n")
        self.k = 0

    def turn(self):
        """One ten-round turn; returns its wall time in ms and the sidecar's CPU ticks."""
        self.k += 1
        k, p = self.k, self.p
        left[0] = ROUNDS - 1
        frame = json.dumps({"jsonrpc": "2.0", "id": k, "method": "agent.chat.stream",
                            "params": {
            "provider": "openai_compat", "model": "fake-model",
            "baseUrl": f"http://127.0.0.1:{port}/v1", "apiKey": "k",
            "chatId": f"c{k}", "streamId": f"s{k}", "cwd": self.ws,
            "messages": [{"role": "user", "content": "read notes ten times"}]}}) + "\n"
        c = self.cpu_ticks()
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
        return (time.perf_counter() - t) * 1000, self.cpu_ticks() - c

    def cpu_ticks(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            return sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])

    def close(self):
        self.p.stdin.close()
        self.p.wait()


MS_PER_TICK = 1000 / os.sysconf("SC_CLK_TCK")


def single(binary, turns):
    s = Side(binary)
    s.turn()
    if os.environ.get("PAUSE"):
        print("PID", s.p.pid, flush=True)
        time.sleep(float(os.environ["PAUSE"]))
    runs = [s.turn() for _ in range(turns)]
    print(f"turn median {statistics.median(w for w, _ in runs):.2f} ms, "
          f"sidecar CPU {sum(c for _, c in runs) * MS_PER_TICK / turns:.2f} ms per turn")
    s.close()


def paired(a_bin, b_bin, pairs):
    a, b = Side(a_bin), Side(b_bin)
    a.turn(), b.turn()
    ra, rb = [], []
    for _ in range(pairs):
        if random.random() < 0.5:
            ra.append(a.turn()); rb.append(b.turn())
        else:
            rb.append(b.turn()); ra.append(a.turn())
    diffs = [y[0] - x[0] for x, y in zip(ra, rb)]
    for name, r in (("A", ra), ("B", rb)):
        print(f"{name}: turn median {statistics.median(w for w, _ in r):.3f} ms, "
              f"sidecar CPU {sum(c for _, c in r) * MS_PER_TICK / pairs:.2f} ms per turn")
    faster = sum(d < 0 for d in diffs)
    print(f"B - A per pair: median {statistics.median(diffs):+.3f} ms; "
          f"B faster in {faster} of {pairs}")
    a.close(), b.close()


if len(sys.argv) > 2 and not sys.argv[2].isdigit():
    paired(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 200)
else:
    single(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
