"""The ``hostd`` command line: --help everywhere, one-shot compose/providers/consent,
and check-provider's pass/fail table against real provider processes."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pytest

from hostd.cli import build_parser, main
from hostd.config import HostSettings, ProviderSettings
from tests.fixtures.cli import run_hostd as _hostd

ROOT = Path(__file__).resolve().parents[2]

HELP = [
    [],
    ["serve"],
    ["compose"],
    ["providers"],
    ["consent"],
    ["consent", "grant"],
    ["consent", "revoke"],
    ["consent", "list"],
    ["check-provider"],
]


@pytest.mark.parametrize("words", HELP, ids=lambda w: " ".join(w) or "hostd")
def test_every_command_has_help(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*words, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hostd") and "--help" in out


def _compose_parser() -> argparse.ArgumentParser:
    (subparsers,) = (
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    parser: argparse.ArgumentParser = subparsers.choices["compose"]
    return parser


def _stems(text: str) -> list[str]:
    return [w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower())]


def test_every_compose_flag_says_more_than_its_own_name() -> None:
    # ``--placement  placement`` tells a user nothing: each help says what the flag does
    # in at least three words besides the flag's own name.
    terse = []
    for action in _compose_parser()._actions:
        name = set(_stems(" ".join(action.option_strings) or action.dest))
        if len([w for w in _stems(action.help or "") if w not in name]) < 3:
            terse.append(f"{'/'.join(action.option_strings) or action.dest}: {action.help!r}")
    assert terse == []


def test_compose_placement_help_says_what_each_order_is() -> None:
    (placement,) = (a for a in _compose_parser()._actions if "--placement" in a.option_strings)
    assert placement.choices and placement.help
    for choice in placement.choices:
        # the choice, then what it does: not only the list the usage line already shows
        assert re.search(rf"\b{choice}\b( \(default\))? \w+", placement.help), choice


def _flag_help(help_text: str, flag: str) -> str:
    """What ``--help`` says of ``flag``: the text after its line's option, up to the next
    option, on one line."""
    start = help_text.index(f"\n  {flag} ") + len(flag) + 3
    end = help_text.find("\n  --", start)
    return " ".join(help_text[start:end].split())


def test_compose_help_says_what_applies_without_timeout_ms_or_overfetch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["compose", "--help"])
    out = capsys.readouterr().out
    timeout = ProviderSettings.model_fields["timeout_ms"].default
    assert _flag_help(out, "--timeout-ms").endswith(
        f"(one shot: after it has started; default: each provider's own timeout_ms in its "
        f"[[provider]], {timeout} unless set)"
    ), out
    overfetch = HostSettings.model_fields["overfetch"].default
    assert _flag_help(out, "--overfetch").endswith(
        "(default: the strategy's own, as [reranker] overfetch for rerank, else [host] "
        f"overfetch, {overfetch} unless set)"
    ), out


def _config(tmp_path: Path, providers: str) -> Path:
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n{providers}',
        encoding="utf-8",
    )
    return path


def _provider(pid: str, *extra: str) -> str:
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", pid, *extra]
    return (
        f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"  # generous: the leg's deadline includes a lazy start
    )


def test_compose_one_shot_prints_the_prompt_and_an_audit_line(tmp_path: Path) -> None:
    config = _config(tmp_path, _provider("alpha") + _provider("beta"))
    done = _hostd("--config", str(config), "compose", "what is here", "--budget", "300")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("<frame ") == 6
    assert "6 offered, 6 included" in done.stderr
    done = _hostd(
        "--config",
        str(config),
        "compose",
        "x",
        "--json",
        "--strategy",
        "rrf",
        "--placement",
        "canonical",
        "--providers",
        "beta",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["provider_id"] for p in result["providers"]] == ["beta"]
    assert result["audit"]["policy"]["placement"] == "canonical"
    assert {"prompt", "citations", "audit", "providers", "usage", "request_id"} <= set(result)
    # Each citation says how it ranked, as hostd mcp's do: its audit entry's rank.
    ranks = {
        e["frame"]["frame_id"]: e["rank"]
        for e in result["audit"]["entries"]
        if e["disposition"] == "included"
    }
    cited = {c["frame"]["frame_id"]: c["rank"] for c in result["citations"]}
    assert cited == ranks and sorted(cited.values()) == list(range(len(cited)))


def test_compose_one_shot_failure_is_one_line_with_its_reason(tmp_path: Path) -> None:
    config = _config(tmp_path, _provider("alpha"))
    done = _hostd("--config", str(config), "compose", "x", "--providers", "nope")
    assert done.returncode == 1
    assert "unknown provider 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_providers_and_consent_one_shot(tmp_path: Path) -> None:
    config = _config(
        tmp_path, _provider("alpha") + _provider("cloud", "--egress-scope", "api.example.com")
    )
    done = _hostd("--config", str(config), "providers")
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["alpha", "cloud"]
    done = _hostd("--config", str(config), "consent", "grant", "cloud", "api.example.com")
    assert done.returncode == 0, done.stderr
    # One line for a person; --json for a script.
    assert done.stdout.startswith("granted cloud api.example.com (receipt ")
    assert done.stdout.endswith(", by cli)\n")
    done = _hostd("--config", str(config), "consent", "list")
    assert "cloud\tapi.example.com\tcli" in done.stdout and "active" in done.stdout
    done = _hostd("--config", str(config), "consent", "revoke", "cloud", "api.example.com")
    assert done.returncode == 0 and done.stdout.startswith("revoked cloud api.example.com ")
    done = _hostd("--config", str(config), "consent", "revoke", "cloud", "api.example.com")
    assert done.returncode == 0
    assert done.stdout == "no live receipt for cloud api.example.com: nothing revoked\n"
    done = _hostd("--config", str(config), "consent", "list", "cloud", "--json")
    assert json.loads(done.stdout)["receipts"][0]["active"] is False


def test_check_provider_passes_an_honest_provider(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.md").write_text(
        "# Configuration\n\nThe configuration is loaded from hostd.toml at start.\n"
    )
    done = _hostd(
        "check-provider", "--", sys.executable, "-m", "providers.files", "--root", str(corpus)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for check in (
        "handshake",
        "query",
        "budget honesty",
        "kinds filter",
        "malformed input",
        "verify honesty",
        "shutdown",
    ):
        assert any(
            line.startswith(check) and " pass " in line for line in done.stdout.splitlines()
        ), (check, done.stdout)


def test_check_provider_names_what_a_provider_gets_wrong() -> None:
    done = _hostd(
        "check-provider", "--json", "--", sys.executable, "-m", "tests.fixtures.healthy_provider"
    )
    assert done.returncode == 1
    results = {r["check"]: r for r in json.loads(done.stdout)}
    assert results["handshake"]["passed"] and results["shutdown"]["passed"]
    # The fixture ignores the kinds filter and vouches for any digest.
    assert not results["kinds filter"]["passed"] and "Q1" in results["kinds filter"]["detail"]
    assert not results["verify honesty"]["passed"]


def test_check_provider_reports_a_provider_that_dies() -> None:
    done = _hostd("check-provider", "--", sys.executable, "-c", "pass")
    assert done.returncode == 1
    assert "handshake" in done.stdout and "FAIL" in done.stdout
    assert "Traceback" not in done.stderr


def test_check_provider_passes_an_sdk_provider_that_verifies_under_its_own_name() -> None:
    done = _hostd(
        "check-provider",
        "--binding",
        "cgp",
        "--",
        sys.executable,
        "-m",
        "tests.fixtures.sdk_named_provider",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(
        line.startswith("verify honesty") and " pass " in line for line in done.stdout.splitlines()
    ), done.stdout


def test_check_provider_drives_the_cgp_binding_with_a_real_sdk_peer() -> None:
    done = _hostd(
        "check-provider",
        "--binding",
        "cgp",
        "--json",
        "--",
        sys.executable,
        "-m",
        "tests.fixtures.sdk_provider",
    )
    results = {r["check"]: r for r in json.loads(done.stdout)}
    assert results["handshake"]["passed"], results
    assert "sdk-docs" in results["handshake"]["detail"]
    assert results["query"]["passed"] and results["budget honesty"]["passed"]
    # That peer dies on a query without max_frames: named, not hidden (R1), and the
    # checks after it say they could not run.
    assert not results["malformed input"]["passed"]
    assert results["shutdown"]["detail"] == "not run: the provider had already exited"
    assert done.returncode == 1
