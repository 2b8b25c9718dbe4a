"""A JSON-RPC provider that leaves processes behind: ``python -m
tests.transport.orphaning_provider MODE PIDFILE``.

Modes:

- ``exit_mid_query``: on a query, start a sleeping grandchild that inherits stdout,
  then exit without answering (its output stays open after it is gone).
- ``setsid``: at start, fork a grandchild that calls ``os.setsid()`` (out of the
  provider's process group and session) and sleeps; then answer every query.

Each grandchild appends its pid to PIDFILE as a line once it is in place.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _grandchild(pidfile: str, *, setsid: bool) -> None:
    """Fork a sleeper (which records its pid), return in the parent once it is recorded."""
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.close(ready_r)
        if setsid:
            os.setsid()
        with open(pidfile, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        os.close(ready_w)
        time.sleep(600)
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)  # EOF once the grandchild wrote its pid
    os.close(ready_r)


def _reply(req_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode, pidfile = sys.argv[1], sys.argv[2]
    if mode == "setsid":
        _grandchild(pidfile, setsid=True)
    for line in sys.stdin:
        msg = json.loads(line)
        method = msg.get("method")
        if method == "context/handshake":
            _reply(
                msg["id"],
                {
                    "protocol_version": "contextgraph/1.0",
                    "provider": {"name": "orphaning", "version": "1"},
                    "capabilities": {},
                },
            )
        elif method == "context/query" and mode == "exit_mid_query":
            _grandchild(pidfile, setsid=False)
            os._exit(4)
        elif method == "context/query":
            _reply(msg["id"], {"frames": []})


if __name__ == "__main__":
    main()
