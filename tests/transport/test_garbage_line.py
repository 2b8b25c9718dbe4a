"""A line on a provider's stdout that is not a protocol message: what the fault says.

A line that is not JSON at all is most often the provider's own print (a debug line, a
banner) on the stream that carries the protocol: the fault says what to do instead of
what JSON parser expected. A line that starts as JSON and breaks later keeps the parse
error and its position. Either way the line's bytes are never quoted (logs C8).
"""

from __future__ import annotations

import sys

import anyio
import pytest

from hostd.errors import ProtocolFault
from hostd.transport import ProviderConnection
from hostd.transport.bindings import CgpCodec, Fault, JsonRpcCodec
from tests.fixtures.procs import ROOT, marked_env

pytestmark = pytest.mark.anyio

#: The fault's whole message for a line of ``n`` bytes.
PRINTED = (
    "garbage line from provider ({n} bytes, not quoted): "
    "not JSON; a provider writes only protocol messages to stdout (log to stderr)"
)

#: Lines a provider prints by mistake; each holds a word that must not be quoted.
_PRINTED_LINES = [
    b"fetching index from /var/lib/SECRET ok",  # "expected 'false' at position 0"
    b"  SECRET: 3 frames",  # blank first: position 2
    b"[debug] SECRET",  # starts as a JSON array would
    b"12 SECRET",  # starts as a JSON number would
    b"null SECRET",
]


@pytest.mark.parametrize("codec", [JsonRpcCodec("p"), CgpCodec("p")], ids=["jsonrpc", "cgp"])
@pytest.mark.parametrize("line", _PRINTED_LINES)
def test_a_line_that_is_not_json_at_all_says_stdout_is_for_the_protocol(
    codec: JsonRpcCodec | CgpCodec, line: bytes
) -> None:
    fault = codec.read(line)
    assert isinstance(fault, Fault), fault
    assert fault.error.message == PRINTED.format(n=len(line))


@pytest.mark.parametrize("codec", [JsonRpcCodec("p"), CgpCodec("p")], ids=["jsonrpc", "cgp"])
@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "result": {"SECRET', "unexpected end of data at position"),
        (
            b'  {"type": "frames", "SECRET": }',
            "unexpected character, expected a JSON value at position 31",
        ),
        (b'{"id": 1}} SECRET', "unexpected content after document at position 9"),
    ],
)
def test_a_line_that_starts_as_json_keeps_its_parse_error_and_position(
    codec: JsonRpcCodec | CgpCodec, line: bytes, why: str
) -> None:
    fault = codec.read(line)
    assert isinstance(fault, Fault), fault
    message = fault.error.message
    assert message.startswith(f"garbage line from provider ({len(line)} bytes, not quoted): ")
    assert f"not JSON: {why}" in message, message
    assert "SECRET" not in message and "stdout" not in message, message


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_provider_printing_before_its_handshake_is_told_to_log_to_stderr(
    binding: str,
) -> None:
    # A real child that prints a debug line to stdout, then waits for its input to end.
    said = "fetching index from /var/lib/facts ok"
    script = f"import sys; print({said!r}, flush=True); sys.stdin.read()"
    with anyio.fail_after(60):  # a hang guard: the fault comes with its first line
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProtocolFault) as caught:
                await ProviderConnection.open(
                    "p1",
                    [sys.executable, "-c", script],
                    binding=binding,
                    task_group=tg,
                    env=marked_env(),
                    cwd=ROOT,
                )
    message = caught.value.message
    assert PRINTED.format(n=len(said.encode())) in message, message
    assert "fetching" not in message
