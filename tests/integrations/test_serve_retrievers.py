"""A LangChain or LlamaIndex retriever served as a CGP provider, as real child processes:
``python -m providers.langchain|llama_index --retriever module:factory``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.client import Client
from hostd.protocol import address_line_range, sha256_digest
from tests.providers._stdio import REPO, StdioPeer, child_env

from ._factories import corpus, write_factories

pytestmark = pytest.mark.slow

GOAL = "why does the retry loop give up"
FACTORIES = {"langchain": "lc_factory:build", "llama_index": "li_factory:build"}


def _env(factories: Path) -> dict[str, str]:
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(factories), env["PYTHONPATH"]])
    return env


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    return write_factories(tmp_path / "factories", corpus(tmp_path / "corpus"))


def _run(
    args: list[str], env: dict[str, str], timeout: float = 115
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("framework", sorted(FACTORIES))
def test_a_framework_retriever_passes_check_provider(framework: str, factories: Path) -> None:
    r = _run(
        ["-m", "hostd", "check-provider", "--json", "--goal", GOAL, "--timeout-ms", "100000"]
        + ["--", sys.executable, "-m", f"providers.{framework}"]
        + ["--retriever", FACTORIES[framework]],
        _env(factories),
    )
    results = json.loads(r.stdout)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    failed = [c for c in results if not c["passed"] or c["skipped"]]
    assert failed == []
    checks = {c["check"]: c["detail"] for c in results}
    # Every frame just served re-reads as valid: they carry file provenance.
    assert {"ready", "query", "verify honesty", "shutdown"} <= set(checks)


@pytest.mark.parametrize("framework", sorted(FACTORIES))
@pytest.mark.anyio
async def test_served_frames_quote_the_source_lines_their_provenance_names(
    framework: str, factories: Path
) -> None:
    args = ["-m", f"providers.{framework}", "--retriever", FACTORIES[framework]]
    async with StdioPeer(args, env={"PYTHONPATH": _env(factories)["PYTHONPATH"]}) as peer:
        ack = await peer.handshake()
        assert ack["provider"]["name"] == f"hostd-{framework.replace('_', '-')}"
        query = {"goal": GOAL, "max_frames": 8, "max_tokens": 4000}
        result = await peer.call("context/query", {"query": query})
    _assert_frames_quote_their_lines(result["frames"])


def _assert_frames_quote_their_lines(frames: list[dict[str, Any]]) -> None:
    assert frames
    for frame in frames:
        (prov,) = frame["provenance"]
        data = Path(prov["uri"].removeprefix("file://")).read_bytes()
        addressed = address_line_range(data, prov["range"])
        assert frame["content"].encode() == addressed
        assert prov["digest"] == frame["content_digest"] == sha256_digest(addressed)


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        (
            "lc_factory:broken",
            "RetrieverFailed: --retriever lc_factory:broken: "
            "the factory raised RuntimeError: the index is not there",
        ),
        (
            "lc_factory:nope",
            "RetrieverNotFound: --retriever lc_factory:nope: "
            "module lc_factory has no attribute 'nope'",
        ),
    ],
)
@pytest.mark.anyio
async def test_a_factory_that_fails_or_is_not_there_is_named_on_every_query(
    reference: str, says: str, factories: Path
) -> None:
    """On stdio the module is imported after the handshake (it may take long to import):
    what loading it found is the warm-up's failure, named on stderr and on every query."""
    args = ["-m", "providers.langchain", "--retriever", reference]
    async with StdioPeer(args, env={"PYTHONPATH": _env(factories)["PYTHONPATH"]}) as peer:
        await peer.handshake(wait_ready=False)
        with pytest.raises(AssertionError):
            await peer.wait_ready()  # it ends 'failed', not 'ready'
        assert peer.notes[-1]["state"] == "failed"
        assert peer.notes[-1]["message"] == says
        reply = await peer.request(
            "context/query", {"query": {"goal": GOAL, "max_frames": 4, "max_tokens": 400}}
        )
    assert reply["error"]["data"]["cgp_code"] == "unavailable"
    assert reply["error"]["message"] == f"warm-up failed: {says}"


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        ("lc_factory", "expected MODULE:FACTORY"),
        ("lc factory:build", "expected MODULE:FACTORY"),
    ],
)
def test_a_retriever_reference_of_the_wrong_form_is_a_usage_error(
    reference: str, says: str, factories: Path
) -> None:
    r = _run(["-m", "providers.langchain", "--retriever", reference], _env(factories), 60)
    assert r.returncode == 2 and r.stdout == ""
    assert says in r.stderr and "Traceback" not in r.stderr


#: A package whose own import needs a module that is not there (a dependency missing).
BROKEN_PACKAGE = "import faiss_is_not_installed_here\n"


@pytest.mark.parametrize("framework", sorted(FACTORIES))
@pytest.mark.parametrize(
    ("reference", "says", "code"),
    [
        (
            "no_such_module:build",
            "no module named 'no_such_module' (is it installed in this interpreter, "
            f"{sys.executable}, or in {REPO}?)",
            2,
        ),
        (
            "lc_factory.sub:build",
            "no module named 'lc_factory.sub' (lc_factory is a module, not a package)",
            2,
        ),
        (
            "broken_pkg.rag:build",
            "importing broken_pkg raised ModuleNotFoundError: "
            "No module named 'faiss_is_not_installed_here'",
            1,
        ),
    ],
)
def test_a_retriever_module_that_is_not_there_is_one_line_before_serving(
    framework: str, reference: str, says: str, code: int, factories: Path
) -> None:
    """Checked before the handshake: one line naming the reference, no usage block."""
    (factories / "broken_pkg").mkdir()
    (factories / "broken_pkg" / "__init__.py").write_text(BROKEN_PACKAGE)
    r = _run(["-m", f"providers.{framework}", "--retriever", reference], _env(factories), 60)
    assert (r.returncode, r.stdout) == (code, "")
    assert r.stderr == f"providers.{framework}: --retriever {reference}: {says}\n"


@pytest.mark.parametrize("framework", sorted(FACTORIES))
@pytest.mark.parametrize(
    ("reference", "says", "code"),
    [
        ("lc_factory:nope", "module lc_factory has no attribute 'nope'", 2),
        ("lc_factory:build.nope", "lc_factory:build has no attribute 'nope'", 2),
        ("lc_factory:broken", "the factory raised RuntimeError: the index is not there", 1),
        ("lc_factory:CORPUS", "TypeError: expected a ", 1),
    ],
)
def test_over_https_a_retriever_that_does_not_load_is_one_line(
    framework: str, reference: str, says: str, code: int, factories: Path
) -> None:
    """Over ``--http`` the retriever is loaded before serving: what failed is one line
    naming the reference (a factory's own exception with its type and message), and the
    exit: 2 when it names nothing there, 1 when the code it names raised."""
    args = ["-m", f"providers.{framework}", "--retriever", reference, "--http", "127.0.0.1:0"]
    r = _run(args, _env(factories), 60)
    assert (r.returncode, r.stdout) == (code, "")
    assert r.stderr.startswith(f"providers.{framework}: --retriever {reference}: {says}")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("framework", sorted(FACTORIES))
def test_each_retriever_provider_lists_its_options_with_help(framework: str) -> None:
    r = _run(["-m", f"providers.{framework}", "--help"], child_env(), 60)
    assert r.returncode == 0
    for flag in ("--retriever", "--name", "--kind", "--egress", "--http"):
        assert flag in r.stdout


def test_both_served_retrievers_compose_through_the_daemon(tmp_path: Path, factories: Path) -> None:
    providers = "".join(
        f'\n[[provider]]\nid = "{name}"\n'
        f'command = ["python", "-m", "providers.{name}", "--retriever", "{ref}"]\n'
        f'timeout_ms = 100000\ncwd = "{REPO}"\n'
        for name, ref in sorted(FACTORIES.items())
    )
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'trusted_roots = ["{tmp_path / "corpus"}"]\n\n[log]\nfile = "{tmp_path / "hostd.log"}"\n'
        + providers
    )
    with Client.spawn(config, env=_env(factories), cwd=REPO) as client:
        result = client.compose(GOAL, budget=2000, strategy="round_robin")
    status = {p.provider_id: p.status for p in result.providers}
    assert status == {"langchain": "ok", "llama_index": "ok"}
    cited = {c.frame.provider_id for c in result.citations}
    assert cited <= {"langchain", "llama_index"} and cited
    entries = result.audit.entries
    included = result.audit.included()
    # The host re-read each frame's source under its trusted root (F5, F17).
    states = {e.verification.state if e.verification else None for e in included}
    assert included and states == {"source_verified"}
    assert "retry loop gives up after three attempts" in result.prompt
    # Both serve net.py whole (no blank line splits it): one piece of evidence (D2),
    # the other copy excluded as its duplicate, naming the survivor.
    (dup,) = [e for e in entries if e.reason == "duplicate"]
    assert dup.detail is not None
    kept = dup.detail["kept"]
    assert dup.frame.frame_id == kept["frame_id"] == f"{tmp_path / 'corpus' / 'net.py'}#L1-4"
    assert {dup.frame.provider_id, kept["provider_id"]} == {"langchain", "llama_index"}
