#!/usr/bin/env python3
"""The work whose code the link order keeps together, run under a profiler.

usage: workload.py boot|work <command...>   (scripts/linkorder/regen.sh runs it)

`boot`: spawn, wait for ready and for the warm sandbox spares to start (SETTLE seconds), one
`system.ping`, close stdin; twice, the second time over the store the first one made.
`work`: once, with what a host does next after the ping: `tool.list`, a sandboxed `bash`
through `tool.invoke`, three ten-round turns (`read_file` each round, then text) and TURNS
(100) one-round turns against a fake OpenAI-compatible server on loopback; then two boots with
a plugin manifest (the first parses it and writes its cache entry, the second reads it). The
command is the sidecar's, prefixed by the profiler (`valgrind --tool=callgrind ...`), so every
wait is generous. Stdlib only.
"""
import atexit, json, os, shutil, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import fake_provider  # noqa: E402

phase, cmd = sys.argv[1], sys.argv[2:]
ROUNDS = 10
left, lock = [0], threading.Lock()


def respond():
    with lock:
        tool = left[0] > 0
        left[0] -= tool
    return fake_provider.tool_sse(1) if tool else fake_provider.TEXT


home, ws = tempfile.mkdtemp(prefix="oh"), tempfile.mkdtemp(prefix="ow")
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in (home, ws)])
with open(os.path.join(ws, "notes.txt"), "w") as f:
    f.write("alpha\nbeta\n")
env = dict(os.environ, OUTRIGGER_HOME=home, OUTRIGGER_WORKSPACE_ROOT=ws)
p = None


def call(k, method, params, until=None):
    """Sends one request; reads until its response (and `until`'s notification, if named)."""
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": k, "method": method,
                               "params": params}) + "\n").encode())
    p.stdin.flush()
    answered, done = False, until is None
    while not (answered and done):
        line = p.stdout.readline()
        if not line:
            sys.exit(f"the sidecar closed stdout during {method}")
        r = json.loads(line)
        if r.get("id") == k:
            answered = True
            if "error" in r:
                sys.exit(f"{method} refused: {r['error']}")
        elif r.get("method") == until:
            done = True
            if r["params"].get("status", "completed") != "completed":
                sys.exit(f"{method} ended {r['params']['status']}: {r['params']}")


def turn(k, port, content):
    call(k, "agent.chat.stream", {
        "provider": "openai_compat", "model": "fake-model",
        "baseUrl": f"http://127.0.0.1:{port}/v1", "apiKey": "k",
        "chatId": f"c{k}", "streamId": f"s{k}", "cwd": ws,
        "messages": [{"role": "user", "content": content}]}, until="stream.done")


def session(work, extra_env=None):
    global p
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ws,
                         env=dict(env, **(extra_env or {})))
    if json.loads(p.stdout.readline()).get("method") != "lifecycle.ready":
        sys.exit("no lifecycle.ready")
    time.sleep(float(os.environ.get("SETTLE", "8")))  # the spares start after ready
    call(1, "system.ping", {})
    if work:
        port = fake_provider.start(respond)
        call(2, "tool.list", {})
        call(3, "tool.invoke", {"name": "bash", "arguments": {"command": "true"},
                                "consentGranted": True, "context": {"cwd": ws}})
        for k in range(4, 7):
            left[0] = ROUNDS - 1
            turn(k, port, "read notes ten times")
        for k in range(7, 7 + int(os.environ.get("TURNS", "100"))):  # one-round turns
            turn(k, port, "hi")
    p.stdin.close()
    if p.wait() != 0:
        sys.exit(f"the sidecar exited with {p.returncode}")


def plugin_dir():
    d = tempfile.mkdtemp(prefix="op")
    atexit.register(lambda: shutil.rmtree(d, ignore_errors=True))
    exe = os.path.join(d, "tool.sh")
    with open(exe, "w") as f:
        f.write("#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true,\"result\":null}'\n")
    os.chmod(exe, 0o755)
    schema = '{"type":"object","properties":{"query":{"type":"string"}}}'
    with open(os.path.join(d, "suite.toml"), "w") as f:
        for n in range(3):
            f.write(f'[[tools]]\nname = "list_rows_{n}"\ndescription = "Rows {n}"\n'
                    f'exec = "tool.sh"\ntimeout = "30s"\nmode = "read"\n'
                    f"parameters = '''{schema}'''\n\n")
    return {"OUTRIGGER_PLUGIN_DIR": d}


for work in ([False, False] if phase == "boot" else [True]):
    session(work)
if phase != "boot":
    plugins = plugin_dir()
    session(False, plugins)  # parses the manifest, writes the cache entry
    session(False, plugins)  # reads it back
