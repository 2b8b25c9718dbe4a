"""Remote provider keys in the config file: C7 judged at load, one of command or url,
keys that belong together, paths resolved against the file's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.config import ConfigError, parse_config


def _provider(body: str) -> str:
    return f'[[provider]]\nid = "r"\n{body}\n'


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "http://10.1.2.3:8080/",
        "http://localhost.example.com/",
        "http://127.0.0.1.example.com/",
        "http://[2001:db8::1]/",
        "http://0.0.0.0:80/",
    ],
)
def test_plaintext_to_a_host_that_is_not_loopback_is_refused_at_load(url: str) -> None:
    with pytest.raises(ConfigError, match="C7") as err:
        parse_config(_provider(f'url = "{url}"'))
    assert err.value.data["key"] == "provider[0].url"


@pytest.mark.parametrize(
    "url",
    [
        "https://search.example.com/cgp",
        "http://127.0.0.1:8080/",
        "http://127.9.9.9/",
        "http://localhost:9/",
        "http://[::1]:9/",
    ],
)
def test_https_anywhere_and_plaintext_to_loopback_load(url: str) -> None:
    spec = parse_config(_provider(f'url = "{url}"')).provider_specs()[0]
    assert spec.url == url and spec.remote and spec.command == ()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('url = "https://user:pw@example.com/"', "credential may not be part of the URL"),
        ('url = "ftp://example.com/"', "scheme must be https"),
        ('url = "https://example.com/"\ncommand = ["x"]', "exactly one of command or url"),
        ("", "exactly one of command or url"),
        ('command = ["x"]\ntoken_env = "T"', "only for a remote provider"),
        ('url = "https://e.com/"\ntoken_env = "T"\ntoken_file = "t"', "token_file or token_env"),
        ('url = "https://e.com/"\nclient_cert = "c.pem"', "client_cert and client_key go together"),
        ('url = "https://e.com/"\nbinding = "ndjson"', "binding"),
        ('url = "https://e.com/"\nverify = false', "unknown key"),
    ],
)
def test_remote_keys_that_do_not_fit_are_refused(body: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(_provider(body))


def test_remote_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    text = _provider(
        'url = "https://e.com/"\nbinding = "cgp"\ntoken_file = "secrets/token"\n'
        'ca_file = "ca.pem"\nclient_cert = "c.pem"\nclient_key = "/abs/k.pem"\n'
        "max_connections = 4"
    )
    spec = parse_config(text, base=tmp_path).provider_specs()[0]
    assert spec.binding == "cgp"
    assert spec.token_file == tmp_path / "secrets" / "token"
    assert spec.ca_file == tmp_path / "ca.pem"
    assert spec.client_cert == tmp_path / "c.pem"
    assert spec.client_key == Path("/abs/k.pem")
    assert spec.max_connections == 4


def test_a_config_holds_the_token_file_path_never_the_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-3b9e1d\n")
    cfg = parse_config(_provider(f'url = "https://e.com/"\ntoken_file = "{token}"'))
    assert "tok-3b9e1d" not in repr(cfg) + repr(cfg.provider_specs())
