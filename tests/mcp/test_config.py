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
