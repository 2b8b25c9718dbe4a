"""Serving a provider over HTTPS (``run_http``, ``--http``) and a daemon composing from
a remote provider beside a local one, all as real processes on loopback."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.provider._http import serve_asgi
from tests.engine._helpers import query
from tests.fixtures.procs import ROOT, marked_env
from tests.remote._servers import TOKEN, consented, make_tls, provider_app, serving


@contextmanager
def served(module: str, tmp_path: Path, *args: str) -> Iterator[tuple[str, Path]]:
    """``python -m <module> --http 127.0.0.1:0`` with TLS and a token file; yields the URL
    (read from its stderr) and the CA file that verifies it."""
    tls = make_tls(tmp_path, module.rsplit(".", 1)[-1])
    token = tmp_path / "served-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)  # as a credential file should be: check-provider warns otherwise
    argv = [sys.executable, "-m", module, *args, "--http", "127.0.0.1:0"]
    argv += ["--certfile", str(tls.cert_file), "--keyfile", str(tls.key_file)]
    argv += ["--token-file", str(token)]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=marked_env(), stderr=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:  # EOF ends it should the child fail to start
            if line.startswith("serving "):
                url = line.split()[1]
                break
        assert url is not None and url.startswith("https://127.0.0.1:"), "no URL announced"
        yield url, tls.ca_file
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()


def _hostd(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,
        check=False,
        env={**marked_env(), "PATH": "/usr/bin:/bin"},
    )


def test_a_daemon_composes_from_a_remote_files_provider_and_a_local_one(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "retry.md").write_text(
        "# Retry policy\n\nThe retry loop gives up after five tries.\n"
    )
    with served("providers.files", tmp_path, "--root", str(corpus)) as (url, ca_file):
        local = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "local"]
        config = tmp_path / "hostd.toml"
        config.write_text(
            f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
            f'[[provider]]\nid = "team-search"\nurl = "{url}"\nca_file = "{ca_file}"\n'
            f'token_file = "{tmp_path}/served-token"\ntimeout_ms = 60000\n\n'
            f'[[provider]]\nid = "local"\ncommand = {json.dumps(local)}\ncwd = "{ROOT}"\n'
            "timeout_ms = 60000\n"
        )
        refused = _hostd(config, "compose", "retry loop gives up", "--json")
        granted = _hostd(config, "consent", "grant", "team-search", "egress")
        composed = _hostd(config, "compose", "retry loop gives up", "--json")
        listed = _hostd(config, "providers")
    for done in (refused, granted, composed, listed):
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr
    before = {p["provider_id"]: p["status"] for p in json.loads(refused.stdout)["providers"]}
    assert before == {"local": "ok", "team-search": "no_consent"}
    result = json.loads(composed.stdout)
    after = {p["provider_id"]: p["status"] for p in result["providers"]}
    assert after == {"local": "ok", "team-search": "ok"}
    assert "gives up after five tries" in result["prompt"]
    assert "local frame" in result["prompt"]
    row = next(line for line in listed.stdout.splitlines() if line.startswith("team-search"))
    assert url in row and "bearer <redacted>" in row


@pytest.mark.anyio
async def test_the_memory_provider_serves_over_https(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    argv = [sys.executable, "-m", "providers.memory", "--db", str(db), "add"]
    argv += ["--title", "deploy", "deploys go out on Tuesdays"]
    added = await anyio.run_process(argv, cwd=ROOT, env=marked_env(), check=False)
    assert added.returncode == 0, added.stderr.decode()
    with served("providers.memory", tmp_path, "--db", str(db)) as (url, ca_file):
        spec = ProviderSpec(
            "memory", url=url, ca_file=ca_file, token_file=tmp_path / "served-token"
        )
        async with Host([spec], consent=consented(tmp_path, "memory")) as host:
            fan = await host.query_all(query(goal="when do deploys go out"), 1000)
    assert fan.reports["memory"].status is LegStatus.OK, fan.reports["memory"]
    assert any("Tuesdays" in (f.content or "") for _, f in fan.accepted)


@pytest.mark.anyio
async def test_the_served_endpoint_wants_the_token_and_bounds_the_body(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    hello = {"type": "handshake", "protocol_version": "contextgraph/1.0"}
    async with serving(provider_app(), tls) as (url, _):
        trust = ssl.create_default_context(cafile=str(tls.ca_file))
        async with httpx.AsyncClient(verify=trust) as client:
            no_token = await client.post(url, json=hello)
            wrong = await client.post(url, json=hello, headers={"authorization": "Bearer no"})
            auth = {"authorization": f"Bearer {TOKEN}"}
            ack = await client.post(url, json=hello, headers=auth)
            huge = await client.post(url, content=b"x" * (9 << 20), headers=auth)
            garbage = await client.post(url, content=b"{oops", headers=auth)
    assert (no_token.status_code, wrong.status_code) == (401, 401)
    assert no_token.content == b"" and TOKEN not in wrong.text
    assert ack.status_code == 200 and ack.json()["type"] == "handshake_ack"
    assert huge.status_code == 413
    assert garbage.status_code == 200 and garbage.json()["error"]["code"] == -32700


@pytest.mark.anyio
async def test_plaintext_serving_off_loopback_is_refused() -> None:
    with pytest.raises(ValueError, match="not loopback"):
        await serve_asgi(provider_app(), host="0.0.0.0")
