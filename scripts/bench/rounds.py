#!/usr/bin/env python3
"""Ten-round turns (`read_file` each round, then text) against a fake OpenAI-compatible
server on loopback; the sidecar's own CPU per turn from /proc/<pid>/stat.

usage: rounds.py <outrigger binary> [turns]   (docs/benchmarks.md)

One warm-up turn first. With PAUSE=<seconds> it prints `PID <pid>` after the warm-up and
waits, for `perf record -p`. Stdlib only.
"""
import json, os, socket, statistics, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import sidecar

binary = sys.argv[1]
turns = int(sys.argv[2]) if len(sys.argv) > 2 else 40
ROUNDS = 10
left, lock, served = [0], threading.Lock(), [0]


def chunk(delta, finish=None, usage=None):
    c = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
         "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return "data: " + json.dumps(c) + "\n\n"


def tool_sse(n):
    call = {"index": 0, "id": f"call_{n}", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}
    return (chunk({"role": "assistant", "content": None, "tool_calls": [call]})
            + chunk({}, "tool_calls")
            + chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14})
            + "data: [DONE]\n\n")


TEXT = chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop") + "data: [DONE]\n\n"


class Fake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with lock:
            served[0] += 1
            tool = left[0] > 0
            if tool:
                left[0] -= 1
        body = (tool_sse(served[0]) if tool else TEXT).encode()
        # One write, no Nagle: headers and body in separate segments cost a delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.wfile.flush()


srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=srv.serve_forever, daemon=True).start()
p, ws = sidecar.start(binary)
with open(os.path.join(ws, "notes.txt"), "w") as f:
    f.write("alpha\nbeta\n")

def turn(k):
    left[0] = ROUNDS - 1
    frame = json.dumps({"jsonrpc": "2.0", "id": k, "method": "agent.chat.stream", "params": {
        "provider": "openai_compat", "model": "fake-model",
        "baseUrl": f"http://127.0.0.1:{srv.server_port}/v1", "apiKey": "k",
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
