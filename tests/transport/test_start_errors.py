"""A provider that cannot start: its start fails with one line naming the provider, the
command and what to fix, under the ``_reaper`` shim and without it, and nothing of the
shim's own (its exit status, its stderr) after it. A JSON-RPC
handshake that meets silence says so, and names the CGP binding when the provider
answers the envelope handshake instead."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from hostd._hints import NO_HANDSHAKE
from hostd._reaper import supported as reaper_supported
from hostd.errors import ProviderCrashed, ProviderTimeout
from hostd.transport import ProviderConnection
from hostd.transport.process import _process, _shim
from tests.fixtures.procs import ROOT, leftovers, marked_env, python
from tests.fixtures.unstartable import unstartable_files

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["reaper", "no_reaper"])
def reaper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param == "no_reaper":
        monkeypatch.setattr(_shim, "reaper_supported", lambda: False)
    elif not reaper_supported():
        pytest.skip("the reaper shim needs Linux /proc and prctl")
    return request.param == "reaper"


def _unstartable(tmp_path: Path) -> dict[str, tuple[list[str], Path | None, str]]:
    """case → (command, cwd, what its start must say)."""
    files = unstartable_files(tmp_path)
    plain, noformat, badshebang = files["plain"], files["noformat"], files["badshebang"]
    gone = tmp_path / "gone"
    return {
        "not found": (["no-such-provider-cmd", "-x"], None, "was not found on the PATH"),
        "not executable": ([str(plain)], None, f"{plain} is not executable"),
        "exec format": ([str(noformat)], None, "is neither a program nor a script"),
        "bad interpreter": ([str(badshebang)], None, "(/no/such/interpreter) was not found"),
        "cwd missing": ([sys.executable, "-c", "pass"], gone, f"directory {gone} does not exist"),
    }


@pytest.mark.parametrize(
    "case", ["not found", "not executable", "exec format", "bad interpreter", "cwd missing"]
)
async def test_a_start_that_cannot_happen_names_the_provider_command_and_what_to_fix(
    tmp_path: Path, reaper: bool, case: str
) -> None:
    command, cwd, why = _unstartable(tmp_path)[case]
    with anyio.fail_after(60):  # a hang guard: the failure comes at once
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderCrashed) as caught:
                await ProviderConnection.open(
                    "p1", command, task_group=tg, env=marked_env(), cwd=cwd
                )
    message = caught.value.message
    assert message.startswith(f"provider 'p1' cannot start {command[0]}"), message
    assert why in message and "\n" not in message, message
    # The shim's exit status and its stderr are not the provider's: not said after it.
    assert "exited with status" not in message and "stderr:" not in message, message
    assert leftovers() == []


async def test_a_write_to_a_provider_that_never_started_names_why(tmp_path: Path) -> None:
    # The host may write its handshake before it reads the end of the output: the
    # write's broken pipe must give the exec's error too, not "closed its input".
    if not reaper_supported():
        pytest.skip("the exec status pipe is the shim's")
    command, _cwd, why = _unstartable(tmp_path)["exec format"]
    child = await _process.ChildProcess.spawn("p1", command, env=marked_env())
    try:
        with anyio.fail_after(60):  # hang guard only
            await child.process.wait()  # the shim has reported and gone
            with pytest.raises(ProviderCrashed) as caught:
                await child.send(b"{}\n")
        message = caught.value.message
        assert message.startswith(f"provider 'p1' cannot start {command[0]}"), message
        assert why in message, message
    finally:
        await child.aclose()
    assert leftovers() == []


# -- a handshake that meets silence: the wrong binding, or a provider that hangs ------------

_CGP_HINT = (
    "it answers the CGP envelope handshake instead: a provider built with a CGP SDK "
    '(contextgraph-sdk) speaks the envelope wire and needs binding = "cgp" in its [[provider]]'
)


async def _silent_start(command: list[str]) -> str:
    """The message of a start whose JSON-RPC handshake got no reply. The provider never
    answers it, so the bound's length changes nothing (0.3 s: no test waits 30 s)."""
    with anyio.fail_after(60):  # a hang guard: the start deadline and a grace end it
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderTimeout) as caught:
                await ProviderConnection.open(
                    "p1",
                    command,
                    task_group=tg,
                    env=marked_env(),
                    cwd=ROOT,
                    handshake_timeout=0.3,
                    grace=1.0,
                )
    return caught.value.message


async def test_a_cgp_sdk_provider_under_jsonrpc_is_told_its_binding_and_a_hung_one_is_not(
    reaper: bool,
) -> None:
    # Built on the published SDK: it ignores the JSON-RPC handshake (a line it does not
    # understand, as the envelope wire says), and answers the envelope handshake.
    sdk = await _silent_start(python("tests.fixtures.sdk_provider"))
    assert sdk == f"no handshake reply within 300 ms; {_CGP_HINT}", sdk
    # A JSON-RPC provider that never answers its handshake answers no envelope either:
    # it is told the usual causes of a reply that never came.
    hung = await _silent_start(python("tests.fixtures.adversarial_provider", "slow_handshake"))
    assert hung == f"no handshake reply within 300 ms; {NO_HANDSHAKE}", hung
    assert leftovers() == []
