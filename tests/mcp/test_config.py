"""The ``binding = "mcp"`` keys: validated with the rest of the config, named when wrong."""

from __future__ import annotations

import pytest

from hostd.config import parse_config
from hostd.errors import ConfigError

BASE = '[[provider]]\nid = "m"\ncommand = ["srv"]\n'


def test_the_mcp_table_reaches_the_engine_spec_with_its_defaults() -> None:
    cfg = parse_config(BASE + 'binding = "mcp"\nmcp = {tool = "search", egress = true}\n')
    (spec,) = cfg.provider_specs()
    assert spec.binding == "mcp"
    assert spec.options["tool"] == "search" and spec.options["egress"] is True
    assert spec.options["kind"] == "doc" and spec.options["resources"] is True


def test_an_mcp_binding_without_a_table_reads_resources() -> None:
    (spec,) = parse_config(BASE + 'binding = "mcp"\n').provider_specs()
    assert spec.options["resources"] is True and spec.options["tool"] is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (BASE + "mcp = {tool = 'x'}\n", "provider[0]"),
        (BASE + 'binding = "mcp"\nmcp = {tools = "x"}\n', "provider[0].mcp.tools"),
        (BASE + 'binding = "mcp"\nmcp = {kind = ""}\n', "provider[0].mcp.kind"),
    ],
)
def test_a_bad_mcp_table_names_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="t.toml")
    assert caught.value.data["key"] == key, caught.value


def _fetch(url: str, *, egress: bool = False) -> str:
    arguments = f'{{url = "{url}", max_length = 5000}}'
    return (
        BASE.replace('"m"', '"web"')
        + 'binding = "mcp"\n[provider.mcp]\nresources = false\n'
        + f"egress = {str(egress).lower()}\n"
        + f'tools = [{{name = "now"}}, {{name = "fetch", arguments = {arguments}}}]\n'
    )


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://www.google.com/search?q={query}", "www.google.com"),
        ("https://user:s3cret@[2001:db8::1]:8443/find?text={goal}", "[2001:db8::1]"),
        ("http://wiki.internal/?q={query}", "wiki.internal"),
    ],
)
def test_a_url_template_that_sends_the_query_off_the_machine_needs_egress(
    url: str, host: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_fetch(url), source="t.toml")
    said = str(caught.value)
    assert caught.value.data["key"] == "provider[0]"
    assert "mcp.tools[1].arguments.url" in said and f"a URL to {host}," in said
    assert "set egress = true" in said and "hostd consent grant web egress" in said
    assert "s3cret" not in said  # the URL's credential is never shown
    (spec,) = parse_config(_fetch(url, egress=True)).provider_specs()
    assert spec.options["egress"] is True


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8080/search?q={query}",  # a server on this machine
        "http://127.0.0.1/search?q={goal}",
        "http://[::1]:9000/?q={query}",
        "file:///srv/notes/{query}.md",  # no host: a file here
        "https://docs.python.org/3/",  # no query in it
    ],
)
def test_a_url_that_keeps_the_query_on_the_machine_needs_no_egress(url: str) -> None:
    (spec,) = parse_config(_fetch(url)).provider_specs()
    assert spec.options["egress"] is False


def test_the_query_given_to_a_tool_beside_a_url_is_no_egress_by_itself() -> None:
    # A local docs search told where its links point: hostd cannot tell where a server
    # sends what it gets, only where a URL template does.
    text = (
        BASE
        + 'binding = "mcp"\n'
        + 'mcp = {tool = "search", arguments = {q = "{query}", base = "https://docs.example/"}}\n'
    )
    (spec,) = parse_config(text).provider_specs()
    assert spec.options["egress"] is False
