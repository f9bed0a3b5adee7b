"""Starting the sidecar for the bench scripts: a fresh home and workspace, `XENV` settings
(space-separated `KEY=VALUE`), stderr drained once the ready marker is seen. Both
directories are removed when the script exits: left behind, they pile up in `$TMPDIR`, and a
sandboxed command's spare lists that directory (the sidecar's home and temp dirs are hidden
inside it), so every later run would pay for the runs before it."""
import atexit, os, shutil, subprocess, tempfile, threading


def start(binary, env_extra=None):
    """Returns (process, workspace) once `__SIDECAR_READY__` was printed."""
    home, ws = tempfile.mkdtemp(prefix="bh"), tempfile.mkdtemp(prefix="bw")
    for d in (home, ws):
        atexit.register(shutil.rmtree, d, ignore_errors=True)
    env = dict(os.environ, OUTRIGGER_HOME=home, OUTRIGGER_WORKSPACE_ROOT=ws)
    for kv in os.environ.get("XENV", "").split():
        k, v = kv.split("=", 1)
        env[k] = v
    env.update(env_extra or {})
    p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ws, env=env)
    while True:
        line = p.stderr.readline()
        if not line or line.startswith(b"__SIDECAR_READY__"):
            break
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, ws
