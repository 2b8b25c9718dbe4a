"""A provider that dies as a provider in another language does, for the crash-reason tests.

``python -m tests.transport.foreign_crash KIND [start|query]`` writes to its stderr
what a Node, Go, Rust, Java, shell or Python program writes when it dies (``CRASHES``),
then exits with that runtime's status. ``start`` (the default): at once, before any
handshake. ``query``: it answers the JSON-RPC handshake, then, at the first query,
logs ``QUERY_LOG_LINES`` lines (so the crash is not in the first bytes of the stream)
and dies. No language runtime is needed: the text is recorded here.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

__all__ = ["CRASHES", "QUERY_LOG_LINES", "Crash"]

#: Lines a provider logs to stderr before its crash in ``query`` mode.
QUERY_LOG_LINES = 300


@dataclass(frozen=True)
class Crash:
    stderr: str
    status: int
    #: The line that says what went wrong: the report must carry it.
    error: str


_NODE_STACK = """\
    at wrapSafe (node:internal/modules/cjs/loader:1464:18)
    at Module._compile (node:internal/modules/cjs/loader:1495:20)
    at Module._extensions..js (node:internal/modules/cjs/loader:1623:10)
    at Module.load (node:internal/modules/cjs/loader:1266:32)
    at Module._load (node:internal/modules/cjs/loader:1091:12)
    at Function.executeUserEntryPoint [as runMain] (node:internal/modules/run_main:164:12)
    at node:internal/main/run_main_module:28:49
"""

_GO_DUMP = "".join(
    f"goroutine {n} [select]:\n"
    f"main.worker(0xc000010000, {{0x4b2f00, 0x5}})\n"
    f"\t/home/u/facts/worker.go:{n} +0x1d\n"
    "created by main.main in goroutine 1\n"
    "\t/home/u/facts/main.go:9 +0x45\n\n"
    for n in range(2, 120)
)

CRASHES = {
    "node_syntax": Crash(
        "/tmp/x/facts.js:3\nconst x = ;\n          ^\n\n"
        f"SyntaxError: Unexpected token ';'\n{_NODE_STACK}\nNode.js v20.20.2\n",
        1,
        "SyntaxError: Unexpected token ';'",
    ),
    "node_missing": Crash(
        "node:internal/modules/cjs/loader:1210\n  throw err;\n  ^\n\n"
        "Error: Cannot find module '/tmp/x/facts.js'\n"
        "    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)\n"
        "    at Module._load (node:internal/modules/cjs/loader:1038:27)\n"
        "    at Function.executeUserEntryPoint [as runMain] "
        "(node:internal/modules/run_main:164:12)\n"
        "    at node:internal/main/run_main_module:28:49 {\n"
        "  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n",
        1,
        "Error: Cannot find module '/tmp/x/facts.js'",
    ),
    "node_throw": Crash(
        "/tmp/x/facts.js:12\n"
        '    throw new Error("index is corrupt: run facts --reindex");\n    ^\n\n'
        "Error: index is corrupt: run facts --reindex\n"
        "    at Interface.<anonymous> (/tmp/x/facts.js:12:11)\n"
        "    at Interface.emit (node:events:524:28)\n"
        "    at [_onLine] [as _onLine] (node:internal/readline/interface:416:12)\n"
        "    at Socket.ondata (node:internal/readline/interface:243:23)\n"
        "    at Socket.emit (node:events:524:28)\n"
        "    at addChunk (node:internal/streams/readable:561:12)\n"
        "    at readableAddChunkPushByteMode (node:internal/streams/readable:512:3)\n\n"
        "Node.js v20.20.2\n",
        1,
        "Error: index is corrupt: run facts --reindex",
    ),
    "go": Crash(
        "panic: open /var/lib/facts/index.db: permission denied\n\n"
        "goroutine 1 [running]:\nmain.main()\n\t/home/u/facts/main.go:5 +0x1d\nexit status 2\n",
        2,
        "panic: open /var/lib/facts/index.db: permission denied",
    ),
    # Every goroutine dumped: the panic is in the stream's first bytes only.
    "go_dump": Crash(
        "panic: open /var/lib/facts/index.db: permission denied\n\n"
        "goroutine 1 [running]:\nmain.main()\n\t/home/u/facts/main.go:5 +0x1d\n\n"
        f"{_GO_DUMP}exit status 2\n",
        2,
        "panic: open /var/lib/facts/index.db: permission denied",
    ),
    "rust": Crash(
        "thread 'main' (23807) panicked at src/main.rs:3:23:\n"
        "no index at /var/lib/facts: run facts init\n"
        "stack backtrace:\n"
        "   0: std::panicking::begin_panic::<&str>\n"
        "             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/"
        "panicking.rs:761:5\n"
        "   1: facts::main\n"
        "             at ./src/main.rs:3:23\n"
        "   2: core::ops::function::FnOnce::call_once\n"
        "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose "
        "backtrace.\n",
        101,
        "thread 'main' (23807) panicked at src/main.rs:3:23: | "
        "no index at /var/lib/facts: run facts init",
    ),
    "java": Crash(
        'Exception in thread "main" java.lang.IllegalStateException: no index at /var/lib/facts\n'
        "\tat facts.Index.open(Index.java:41)\n"
        "\tat facts.Index.<init>(Index.java:17)\n"
        "\tat facts.Provider.serve(Provider.java:88)\n"
        "\tat facts.Provider.run(Provider.java:52)\n"
        "\tat facts.Main.main(Main.java:5)\n",
        1,
        'Exception in thread "main" java.lang.IllegalStateException: no index at /var/lib/facts',
    ),
    "sh": Crash("sh: 1: facts-server: not found\n", 127, "sh: 1: facts-server: not found"),
    "python": Crash(
        "Traceback (most recent call last):\n"
        '  File "/tmp/x/provider.py", line 30, in <module>\n    main()\n'
        '  File "/tmp/x/provider.py", line 19, in open_index\n    return Index(path)\n'
        "           ^^^^^^^^^^^\n"
        '  File "/tmp/x/index.py", line 8, in __init__\n    raise ValueError(message)\n'
        "ValueError: index at /var/lib/facts/index.db is from version 1: run reindex\n",
        1,
        "ValueError: index at /var/lib/facts/index.db is from version 1: run reindex",
    ),
}


def _die(crash: Crash) -> None:
    sys.stderr.write(crash.stderr)
    sys.stderr.flush()
    os._exit(crash.status)


def main() -> None:
    crash = CRASHES[sys.argv[1]]
    when = sys.argv[2] if len(sys.argv) > 2 else "start"
    if when == "start":
        _die(crash)
    info = {"name": "foreign", "version": "1", "data_flow": {"reads": True, "egress": False}}
    caps = {"query": {"kinds": []}, "correlation": True, "verify": False}
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method = msg.get("method", "")
        if method == "context/handshake":
            body = {"protocol_version": "contextgraph/1.0-draft", "provider": info}
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {**body, "capabilities": caps}}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
        elif method == "context/query":
            for n in range(QUERY_LOG_LINES):
                sys.stderr.write(f"handled query {n}: 3 frames in 2 ms\n")
            _die(crash)


if __name__ == "__main__":
    main()
