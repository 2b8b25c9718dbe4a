"""A provider that cannot start: its start fails with one line naming the provider, the
command and the OS error, under the ``_reaper`` shim and without it."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from hostd.errors import ProviderCrashed
from hostd.transport import ProviderConnection, _process
from tests.fixtures.procs import leftovers, marked_env
from tests.fixtures.unstartable import unstartable_files

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["reaper", "no_reaper"])
def reaper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param == "no_reaper":
        monkeypatch.setattr(_process, "reaper_supported", lambda: False)
    elif not _process.reaper_supported():
        pytest.skip("the reaper shim needs Linux /proc and prctl")
    return request.param == "reaper"


def _unstartable(tmp_path: Path) -> dict[str, tuple[list[str], Path | None, str]]:
    """case → (command, cwd, the OS error its start must name)."""
    files = unstartable_files(tmp_path)
    plain, noformat = files["plain"], files["noformat"]
    return {
        "not found": (["no-such-provider-cmd", "-x"], None, "No such file or directory"),
        "not executable": ([str(plain)], None, "Permission denied"),
        "exec format": ([str(noformat)], None, "Exec format error"),
        "cwd missing": ([sys.executable, "-c", "pass"], tmp_path / "gone", str(tmp_path / "gone")),
    }


@pytest.mark.parametrize("case", ["not found", "not executable", "exec format", "cwd missing"])
async def test_a_start_that_cannot_happen_names_the_provider_command_and_os_error(
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
    assert leftovers() == []
