"""A fake OpenAI-compatible model server on loopback for the bench scripts: every POST gets
`respond()`'s server-sent events in one write. Stdlib only."""
import json, socket, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk(delta, finish=None, usage=None):
    c = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
         "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return "data: " + json.dumps(c) + "\n\n"


def tool_sse(n, name="read_file", arguments='{"path":"notes.txt"}'):
    """One call of `name`, finished, with usage."""
    call = {"index": 0, "id": f"call_{n}", "type": "function",
            "function": {"name": name, "arguments": arguments}}
    return (chunk({"role": "assistant", "content": None, "tool_calls": [call]})
            + chunk({}, "tool_calls")
            + chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14})
            + "data: [DONE]\n\n")


TEXT = chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop") + "data: [DONE]\n\n"


def start(respond):
    """Serves `respond()` (a str) to every POST from a thread; returns the port."""

    class Fake(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = respond().encode()
            # One write, no Nagle: headers and body in separate segments cost a delayed ACK.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.wfile.flush()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_port
