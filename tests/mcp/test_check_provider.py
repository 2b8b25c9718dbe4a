"""``hostd check-provider --binding mcp``: an MCP server checked the way the host uses it.

The real command line as a child process, against the published ``mcp-server-git``
(its ``git_log`` tool over a repository made here), ``server-everything`` (npm) when
installed, and the SDK servers of these tests: one that passes, one serving a stale
copy of a file, one without the tool, one that finds nothing, and one that needs its
``env``; and ``--provider`` run from a config, held to its deadlines as the daemon is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd._hints import NO_HANDSHAKE
from hostd.config import ConfigError, parse_config
from tests.fixtures.cli import run_hostd

from .test_binding import _everything

# Among the suite's longest: run first (tests/conftest.py).
pytestmark = pytest.mark.slow


def _check(*args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = run_hostd("check-provider", "--binding", "mcp", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done.returncode, {r["check"]: r for r in json.loads(done.stdout)}


def _corpus(root: Path) -> Path:
    root.mkdir()
    (root / "cache.md").write_text("# Cache\n\nThe cache evicts the least recently used entry.\n")
    return root


def test_the_published_git_server_passes(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git (the dev extra) is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        who = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", *who, *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    for i in range(3):
        (repo / f"m{i}.py").write_text(f"x = {i}\n")
        git("add", ".")
        git("commit", "-qm", f"Evict cache entries, step {i}")
    arguments = json.dumps({"repo_path": str(repo), "max_count": 10})
    server = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    code, checks = _check("--goal", "cache", "--tool", "git_log", "--arguments", arguments,
                          "--", *server)  # fmt: skip
    assert code == 0, checks
    assert checks["query"]["detail"].startswith("3 valid frame(s), best first: 'commit ")
    assert {c for c, r in checks.items() if not r["passed"]} == set()
    assert checks["shutdown"]["detail"] == "exited with 0 when stdin closed"


@pytest.fixture(scope="module")
def fixture_server_checked(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[int, dict[str, dict[str, Any]]]:
    """One check of the SDK fixture server over a small corpus, read by each test that
    asks nothing else of it (a check starts two interpreters: this command's and the
    server's; the tests only read its rows)."""
    corpus = _corpus(tmp_path_factory.mktemp("fixture-server") / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    return _check("--goal", "how does the cache evict", "--", *server)


def test_a_fixture_server_passes_with_its_files_matching(
    fixture_server_checked: tuple[int, dict[str, dict[str, Any]]],
) -> None:
    code, checks = fixture_server_checked
    assert code == 0, checks
    assert checks["file sources"]["passed"] and not checks["file sources"]["skipped"]


def test_a_server_serving_a_stale_copy_fails_the_source_check(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "stale", "--root", str(corpus)]
    code, checks = _check("--goal", "cache evicts", "--", *server)
    assert code == 1
    assert not checks["file sources"]["passed"] and checks["file sources"]["rules"] == ["F5"]
    assert checks["query"]["passed"]  # the frames themselves are well formed


def test_a_tool_the_server_does_not_offer_fails_the_handshake_naming_those_it_does(
    tmp_path: Path,
) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    code, checks = _check("--tool", "nope", "--", *server)
    assert code == 1
    # Each check after it is listed as not run, as the other bindings list theirs.
    later = ["tools", "query", "budget honesty", "kinds filter", "file sources", "shutdown"]
    assert list(checks) == ["handshake", *later]
    assert [(checks[n]["not_run"], checks[n]["detail"]) for n in later] == [
        (True, "not run: the handshake failed")
    ] * len(later)
    assert checks["handshake"]["detail"] == (
        "handshake_failed: MCP server offers no tool 'nope'; "
        "it offers 1 tool: search (requires query)"
    )


def test_a_server_with_no_resources_and_no_tool_named_lists_its_tools(tmp_path: Path) -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    config = _config(tmp_path, server, "mcp = { resources = false }")
    code, checks = _check_configured(config)
    assert code == 1
    assert checks["handshake"]["detail"] == (
        "handshake_failed: MCP server offers no resources and no tool is configured; "
        "it offers 3 tools: log (nothing required), plain (nothing required), "
        "show (nothing required)"
    )


def test_a_server_of_tools_alone_checked_without_a_tool_is_told_to_name_one() -> None:
    # It lists no resources (mcp-server-git's shape): no goal finds anything, a tool does.
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    code, checks = _check("--goal", "cache eviction", "--", *server)
    assert code == 0, checks  # a warning alone keeps exit 0
    query = checks["query"]
    assert query["passed"] and query["warning"], query
    assert "pass --goal" not in query["detail"], query
    assert query["detail"] == (
        "the query returned no frame for goal 'cache eviction': check-provider judged "
        "nothing; no goal helps a server that lists no resources, as its tools are called "
        "only when named: pass --tool NAME (the tools row lists them) with --arguments, or "
        "--provider ID to check it as its [[provider]] calls it (it lists no resources)"
    )
    assert checks["tools"]["detail"].startswith("it offers 3 tools: log"), checks["tools"]


def test_the_tools_row_lists_what_the_server_offers(
    fixture_server_checked: tuple[int, dict[str, dict[str, Any]]],
) -> None:
    code, checks = fixture_server_checked
    assert code == 0, checks
    assert checks["tools"] == {
        **checks["tools"],
        "passed": True,
        "detail": "it offers 1 tool: search (requires query)",
    }


def test_the_query_row_lists_its_frames_best_first_with_their_sizes() -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    code, checks = _check("--goal", "budget index", "--tool", "log", "--", *server)
    assert code == 0, checks
    detail = checks["query"]["detail"]
    head, _, listed = detail.partition(", best first: ")
    shown = re.findall(r"'commit (\w+)' \((\d+) tokens, score (\d\.\d\d)\)", listed)
    assert len(shown) == 5 and listed.endswith(f"…and {int(head.split()[0]) - 5} more"), detail
    # First the five commits whose message holds both words (every eighth, log_text).
    both = {(f"{i:04x}" + "ab" * 18)[:7] for i in range(7, 40, 8)}
    assert {sha for sha, _, _ in shown} == both, detail
    scores = [float(score) for _, _, score in shown]
    assert scores == sorted(scores, reverse=True), detail
    assert all(int(tokens) > 0 for _, tokens, _ in shown), detail


def test_the_same_answer_for_an_unrelated_goal_is_warned_only_when_it_was_cut(
    tmp_path: Path,
) -> None:
    """``notes`` answers its three items whatever it is asked, none matching the goal, so
    both goals get its head alone (the first item), the rest left out: the same answer
    cut, a warning naming the argument that carries the goal to the server. ``lookup``
    answers one sentence, matching neither goal: both get it whole, uncut (fewer than
    max_frames, under max_tokens), a corpus served whole, no warning."""
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
    tool = ["--tool", "notes", "--arguments", json.dumps({"query": "{query}"})]
    code, checks = _check("--goal", "zebra", *tool, "--", *server)
    assert code == 0, checks  # a warning alone keeps exit 0
    assert checks["handshake"]["detail"] == "tools-server 1.0; reads tools notes"
    query = checks["query"]
    assert query["passed"] and query["warning"], query
    assert query["detail"].startswith(
        "1 valid frame(s), best first: 'notes (1/3)' (13 tokens, score 0.00); "
    ), query
    assert query["detail"].endswith(
        "; the goal 'zqx vexillology of basalt lighthouses' got the same 1 frame(s): its "
        "answer does not depend on the goal (fine if it serves the same frames whatever is "
        "asked); the goal reaches an MCP server only as {query} or {goal} in a string value "
        'of a tool\'s arguments (docs/mcp.md, "Keys: [provider.mcp]"): here notes.query, '
        "yet the answer was the same whatever it held"
    ), query
    lookup = '{ name = "lookup", arguments = { query = "{query}" } }'
    one = _config(
        tmp_path,
        [sys.executable, "-m", "tests.mcp.mcpserver_app", "env"],
        'env = { CHECK_TOOL = "lookup" }',
        "timeout_ms = 60000",  # a hang guard
        f"mcp = {{ resources = false, tools = [{lookup}] }}",
    )
    code, checks = _check_configured(one, "--goal", "zebra")
    assert code == 0, checks
    query = checks["query"]
    assert query["passed"] and not query["warning"], query
    assert query["detail"].endswith(
        "; served whole: the goal 'zqx vexillology of basalt lighthouses' got the same 1 "
        "frame(s), neither answer cut (fewer than max_frames 8, under max_tokens 400, not "
        "truncated): a corpus that small is served whatever the goal"
    ), query


def test_a_server_that_names_no_version_is_said_to_name_none() -> None:
    """The SDK's ``MCPServer`` sends ``version: ""`` unless given one: the handshake row
    says so in words, not with the ack's stand-in (``unknown``), which reads as a
    fault of the server's."""
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools", "--server-version", ""]
    tool = ["--tool", "notes", "--arguments", json.dumps({"query": "{query}"})]
    code, checks = _check("--goal", "cache", *tool, "--", *server)
    assert code == 0, checks
    assert checks["handshake"]["detail"] == "tools-server (no version given); reads tools notes"


def test_a_query_answered_only_with_empty_json_is_a_warning() -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "empty"]
    tool = ["--tool", "search_nodes", "--arguments", '{"query": "{query}"}']
    code, checks = _check("--goal", "zebra", *tool, "--", *server)
    assert code == 0, checks  # a warning alone keeps exit 0
    query = checks["query"]
    assert query["passed"] and query["warning"], query
    # Why, in the words of the leg's note (`hostd compose`, `hostd status`), and where
    # to look.
    assert query["detail"].startswith("the query returned no frame for goal 'zebra'"), query
    assert query["detail"].endswith(
        "(it lists no resources; its tool found nothing (an empty answer); "
        "check the arguments its tools are given)"
    ), query


def _config(tmp_path: Path, command: list[str], *lines: str) -> Path:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "kg"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        + "".join(f"{line}\n" for line in lines),
        encoding="utf-8",
    )
    return config


def test_provider_gives_an_mcp_server_its_configured_env(tmp_path: Path) -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "env"]
    config = _config(
        tmp_path,
        server,
        'env = { CHECK_TOOL = "lookup" }',
        "timeout_ms = 60000",  # a hang guard
        'mcp = { resources = false, tools = [{ name = "lookup", arguments = { query = "q" } }] }',
    )
    code, checks = _check_configured(config, "--goal", "cache")
    assert code == 0, checks
    assert checks["tools"]["detail"] == "it offers 1 tool: lookup (requires query)"


def test_provider_holds_an_mcp_start_to_start_timeout_s_not_timeout_ms(tmp_path: Path) -> None:
    """As the daemon: the spawn and ``initialize`` have ``start_timeout_s``; a query
    ``timeout_ms`` (1 ms here, which no Python server's start can meet)."""
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    config = _config(tmp_path, server, "timeout_ms = 1", "start_timeout_s = 120")
    _code, checks = _check_configured(config)
    assert checks["handshake"]["passed"], checks["handshake"]
    assert checks["tools"]["detail"] == "it offers 1 tool: search (requires query)"


def test_start_timeout_s_holds_an_mcp_start_as_timeout_ms_holds_its_queries(
    tmp_path: Path,
) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    _code, checks = _check("--timeout-ms", "1", "--start-timeout-s", "120", "--", *server)
    assert checks["handshake"]["passed"], checks["handshake"]


def test_a_start_past_its_deadline_names_the_bound_and_how_to_allow_more() -> None:
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # never answers
    code, checks = _check("--start-timeout-s", "1", "--", *silent)
    assert code == 1
    assert checks["handshake"]["detail"] == (
        "timeout: no handshake reply within 1000 ms (the start_timeout_s asked for; "
        f"start_timeout_s in its [[provider]], or --start-timeout-s); {NO_HANDSHAKE}"
    )


def _check_configured(config: Path, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = run_hostd("--config", str(config), "check-provider", "--provider", "kg", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done.returncode, {r["check"]: r for r in json.loads(done.stdout)}


def test_tool_flags_belong_to_the_mcp_binding() -> None:
    done = run_hostd("check-provider", "--tool", "x", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2 and "--binding mcp" in done.stderr


def test_a_url_template_sending_the_goal_off_the_machine_is_refused_as_the_config_is(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    # ``python``: hostd's own interpreter, as in a config; the check knows it by that name.
    server = ["python", "-c", f"open({str(marker)!r}, 'w')"]
    arguments = json.dumps({"url": "https://www.google.com/search?q={query}"})
    done = run_hostd(
        "check-provider", "--binding", "mcp", "--tool", "now", "--tool", "fetch",
        "--arguments", "{}", "--arguments", arguments, "--", *server,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert not marker.exists()  # refused before the server is started
    said = done.stderr.strip().removeprefix("hostd check-provider: ")
    assert said.startswith("mcp.tools[1].arguments.url puts {query} into a URL to www.google.com")
    # The config's load refuses the same provider in the same words.
    config = '[[provider]]\nid = "python"\nbinding = "mcp"\ncommand = ["python"]\n' + (
        'mcp = {tools = [{name = "now"}, {name = "fetch", arguments = '
        '{url = "https://www.google.com/search?q={query}"}}]}\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(config, source="t.toml")
    assert said in str(caught.value)


def test_a_url_template_to_this_machine_is_checked(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    arguments = json.dumps({"query": "http://localhost:9/?q={query}"})
    _, checks = _check("--tool", "search", "--arguments", arguments, "--", *server)
    assert checks["handshake"]["passed"], checks


def test_an_empty_tool_name_is_a_usage_error() -> None:
    done = run_hostd("check-provider", "--binding", "mcp", "--tool", "", "--", "true")
    assert done.returncode == 2
    assert "--tool, --arguments: mcp.tools.0.name:" in done.stderr


def test_the_published_everything_server_passes() -> None:
    command = _everything()
    if command is None:
        pytest.skip(
            "@modelcontextprotocol/server-everything is not installed: "
            "npm install -g @modelcontextprotocol/server-everything (or set MCP_SERVER_EVERYTHING)"
        )
    code, checks = _check("--goal", "how does the server start up", "--", *command)
    assert code == 0, checks
    assert checks["query"]["detail"].split()[0] != "0", checks["query"]


def test_a_failed_query_lists_each_check_it_kept_from_running_as_not_run() -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
    done = run_hostd("check-provider", "--binding", "mcp", "--goal", "cache",
                     "--tool", "always_fails", "--arguments", '{"query": "{query}"}',
                     "--", *server)  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    table = done.stdout[done.stdout.index("check ") :].splitlines()
    rows = [tuple(re.split(r"\s{2,}", line, maxsplit=2)) for line in table[1:-1]]
    why = (
        "not run: the query check's well-formed query was answered provider_error, "
        "as each of this check's would be"
    )
    assert [row[:2] for row in rows] == [
        ("handshake", "pass"),
        ("tools", "pass"),
        ("query", "FAIL"),
        ("budget honesty", "-"),
        ("kinds filter", "-"),
        ("file sources", "-"),
        ("shutdown", "pass"),
    ]
    assert rows[2][2].startswith("query failed: provider_error: MCP tool 'always_fails'")
    assert [row[2] for row in rows[3:6]] == [why] * 3
    assert table[-1] == "3/7 passed, 3 not run"


def test_a_query_that_lost_a_tool_s_results_says_so_as_a_warning() -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
    # hang never answers: cancelled at its deadline, within the query's (2000 ms).
    each = ["--arguments", json.dumps({"query": "{query}"})]
    code, checks = _check("--goal", "cache ttl", "--tool", "hang", *each, "--tool", "notes",
                          *each, "--", *server)  # fmt: skip
    assert code == 0, checks
    query = checks["query"]
    assert query["warning"] and query["passed"], query
    assert query["detail"].startswith("3 valid frame(s), best first: ")
    assert query["detail"].endswith(
        "; it lost part of its answer: 1 of 2 tools gave no results: hang (timeout)"
    )
