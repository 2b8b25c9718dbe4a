"""``[reranker]``: a process (``command``) or a standard rerank server (``url``), never both;
a server's URL obeys the remote rules (C7, C8) and each kind refuses the other's keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.config import RERANK_SERVER_TIMEOUT_MS, ConfigError, parse_config


def test_a_rerank_server_loads_with_its_api_model_and_credential(tmp_path: Path) -> None:
    cfg = parse_config(
        "[reranker]\nurl = 'https://rerank.example/v1'\napi = 'tei'\nmodel = 'bge-reranker'\n"
        "token_file = 'secrets/rerank.token'\nca_file = 'ca.pem'\nbatch_size = 32\n"
        "timeout_ms = 900\nmax_candidates = 40\n",
        source="x.toml",
        base=tmp_path,
    )
    r = cfg.reranker
    assert (r.url, r.api, r.model, r.batch_size) == (
        "https://rerank.example/v1",
        "tei",
        "bge-reranker",
        32,
    )
    assert (r.command, r.cwd) == (None, None)  # no process: no working directory either
    assert r.token_file == tmp_path / "secrets" / "rerank.token"
    assert r.ca_file == tmp_path / "ca.pem"


def test_a_rerank_servers_deadline_defaults_to_seconds_a_processs_stays_short() -> None:
    server = parse_config("[reranker]\nurl = 'http://127.0.0.1:7997'\n").reranker
    assert server.timeout_ms == RERANK_SERVER_TIMEOUT_MS == 10_000
    process = parse_config("[reranker]\ncommand = ['r']\n").reranker
    assert process.timeout_ms == 1500
    # A deadline the file gives is kept, for either.
    given = parse_config("[reranker]\nurl = 'http://127.0.0.1:7997'\ntimeout_ms = 900\n")
    assert given.reranker.timeout_ms == 900


def test_the_api_defaults_to_cohere_and_loopback_may_be_plaintext() -> None:
    r = parse_config("[reranker]\nurl = 'http://127.0.0.1:7997'\n").reranker
    assert (r.api, r.model, r.token_env) == ("cohere", None, None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("command = ['r']\nurl = 'https://r.example'\n", "give command or url, not both"),
        ("url = 'http://rerank.example'\n", "not loopback"),
        ("url = 'https://user:pw@rerank.example'\n", "credential may not be part of the URL"),
        ("url = 'ftp://rerank.example'\n", "scheme must be https"),
        ("url = 'https://r.example'\napi = 'jina'\n", "'cohere' or 'tei'"),
        ("url = 'https://r.example'\nenv = {A = '1'}\n", "env: only for a reranker process"),
        ("url = 'https://r.example'\ncwd = '.'\n", "cwd: only for a reranker process"),
        (
            "url = 'https://r.example'\nstart_timeout_ms = 5\n",
            "start_timeout_ms: only for a reranker process",
        ),
        ("command = ['r']\nmodel = 'm'\n", "model: only for a rerank server (url)"),
        ("command = ['r']\napi = 'tei'\n", "api: only for a rerank server (url)"),
        ("command = ['r']\ntoken_env = 'T'\n", "token_env: only for a rerank server (url)"),
        ("model = 'm'\n", "model: only for a rerank server (url)"),
        (
            "url = 'https://r.example'\ntoken_file = 't'\ntoken_env = 'T'\n",
            "token_file or token_env, not both",
        ),
        ("url = 'https://r.example'\nclient_cert = 'c.pem'\n", "go together"),
        ("url = 'https://r.example'\nbatch_size = 0\n", "greater than or equal to 1"),
    ],
)
def test_reranker_keys_that_do_not_fit_are_refused(body: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("[reranker]\n" + body)
    assert problem in err.value.message
    assert err.value.data["key"].startswith("reranker")
