# Outrigger run_code driver, protocol v1. Run as: python3 -u -B driver.py PROGRAM_FILE
# The program is the body of a function; its return value is the result's value. It talks to
# the sidecar with JSON lines: log / call / done to stdout, replies on stdin. Not a security
# boundary (the sandbox is): the import guard keeps honest programs to the allowed modules.
import builtins
import io
import json
import sys
import tokenize

ALLOWED = (
    "json", "math", "datetime", "re", "collections", "itertools", "functools", "decimal",
    "statistics", "textwrap", "string", "unicodedata", "html", "typing", "operator", "copy",
    "numbers",
)
PROGRAM = "__run_code__"

_out = sys.stdout
_in = sys.stdin


def _send(msg):
    msg["v"] = 1
    _out.write(json.dumps(msg, allow_nan=False) + "\n")
    _out.flush()


class _Log:
    """print() in the program becomes log messages."""

    def __init__(self):
        self._buf = ""

    def write(self, s):
        self._buf += str(s)
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            _send({"type": "log", "text": line})
        return len(s)

    def flush(self):
        if self._buf:
            _send({"type": "log", "text": self._buf})
            self._buf = ""


class ToolError(Exception):
    """A tool call that failed (its error is the message)."""


_calls = 0


def _call(name, arguments):
    global _calls
    _calls += 1
    _send({"type": "call", "id": _calls, "tool": str(name), "arguments": arguments})
    line = _in.readline()
    if not line:
        raise ToolError("the sidecar closed the connection")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise ToolError(reply.get("error") or "the tool call failed")
    return reply.get("result")


class _Tools:
    """tools.call("read_file", path="a") or tools.read_file(path="a")."""

    def call(self, name, **arguments):
        return _call(name, arguments)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda **arguments: _call(name, arguments)


for _m in ALLOWED:
    __import__(_m)
_real_import = builtins.__import__


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    # An import statement in the program (a function body: locals is None) or a bare
    # __import__ call is checked; modules' own imports, and C code importing for itself
    # (datetime.strptime: locals is globals), are not.
    caller = (globals or {}).get("__name__", PROGRAM)
    from_c = globals is not None and locals is globals
    if caller != PROGRAM or from_c or level != 0 or name.split(".")[0] in ALLOWED:
        return _real_import(name, globals, locals, fromlist, level)
    raise ImportError(
        "import of '%s' is not allowed in run_code; allowed modules: %s. Use tools.<name>(...) "
        "for files and commands" % (name, ", ".join(ALLOWED))
    )


def _indent(body):
    """The body indented into a function, except lines inside a multi-line string (their text
    must not change)."""
    lines = body.splitlines() or ["pass"]
    inside = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(body + "\n").readline):
            if tok.start[0] != tok.end[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass  # compile() reports the real error
    return "".join(
        ("" if i + 1 in inside else "    ") + line + "\n" for i, line in enumerate(lines)
    )


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        body = f.read()
    source = "def __run_code_main__(tools):\n" + _indent(body)
    scope = {"__name__": PROGRAM, "__builtins__": builtins, "ToolError": ToolError}
    log = _Log()
    sys.stdout = log
    builtins.__import__ = _guarded_import
    try:
        exec(compile(source, "<run_code>", "exec"), scope)
        value = scope["__run_code_main__"](_Tools())
    except BaseException as e:  # noqa: BLE001 - every failure is reported to the sidecar
        builtins.__import__ = _real_import
        log.flush()
        _send({"type": "done", "ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        return
    builtins.__import__ = _real_import
    log.flush()
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        _send({"type": "done", "ok": False,
               "error": "TypeError: the return value is a %s, which is not JSON (%s); return "
                        "dicts, lists, strings, numbers, booleans or None" % (type(value).__name__, e)})
        return
    _send({"type": "done", "ok": True, "value": value})


main()
