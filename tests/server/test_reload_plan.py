"""``reload_plan``: which changed keys a reload applies and which wait for a restart."""

from __future__ import annotations

from hostd.config import parse_config
from hostd.server._reload import NEEDS_RESTART, reload_plan

BASE = """
[host]
socket = "/run/a.sock"
default_budget = 3000

[tcp]
port = 7000

[log]
audit = "summary"
file = "/var/log/a.log"

[reranker]
command = ["rr"]
max_candidates = 50
"""


def test_per_request_keys_are_applied_and_start_time_keys_keep_the_running_value() -> None:
    loaded = parse_config(BASE)
    new = parse_config(
        BASE.replace("default_budget = 3000", "default_budget = 5000")
        .replace('socket = "/run/a.sock"', 'socket = "/run/b.sock"')
        .replace("port = 7000", "port = 7001")
        .replace('audit = "summary"', 'audit = "entries"')
        .replace('file = "/var/log/a.log"', 'file = "/var/log/b.log"')
        .replace('command = ["rr"]', 'command = ["rr2"]')
        .replace("max_candidates = 50", "max_candidates = 60")
    )

    plan = reload_plan(loaded, loaded, new)

    assert plan.applied == ["host.default_budget", "log.audit", "reranker.max_candidates"]
    assert plan.needs_restart == ["host.socket", "log.file", "reranker.command", "tcp.port"]
    cfg = plan.config
    assert (cfg.host.default_budget, cfg.log.audit, cfg.reranker.max_candidates) == (
        5000,
        "entries",
        60,
    )
    assert str(cfg.host.socket) == "/run/a.sock" and cfg.tcp.port == 7000
    assert str(cfg.log.file) == "/var/log/a.log" and cfg.reranker.command == ["rr"]
    assert all(
        key.split(".")[0] in NEEDS_RESTART or key in NEEDS_RESTART for key in plan.needs_restart
    )


def test_a_command_line_override_is_kept_and_not_named_when_the_file_left_it() -> None:
    loaded = parse_config(BASE)  # the file; the daemon runs with --socket and --tcp-port
    running = loaded.model_copy(
        update={
            "host": loaded.host.model_copy(update={"socket": "/run/cli.sock"}),
            "tcp": loaded.tcp.model_copy(update={"port": 9999}),
        }
    )

    plan = reload_plan(loaded, running, parse_config(BASE))

    assert plan.needs_restart == [] and plan.applied == []
    assert str(plan.config.host.socket) == "/run/cli.sock" and plan.config.tcp.port == 9999


def test_the_providers_are_the_new_files() -> None:
    one = BASE + '\n[[provider]]\nid = "a"\ncommand = ["x"]\n'
    two = one + '\n[[provider]]\nid = "b"\ncommand = ["y"]\n'
    plan = reload_plan(parse_config(one), parse_config(one), parse_config(two))
    assert [p.id for p in plan.config.provider] == ["a", "b"]
    assert plan.applied == [] and plan.needs_restart == []


def test_the_tcp_token_keys_are_applied_and_the_listener_keys_wait_for_a_restart() -> None:
    # The token is checked at each authentication, from the config in force: a reload
    # that names another token (or file) is in force at once; the listener is bound once.
    tcp = BASE.replace("port = 7000", 'port = 7000\ntoken_file = "/etc/a.token"')
    new = tcp.replace("/etc/a.token", "/etc/b.token").replace("port = 7000", "port = 7001")
    loaded = parse_config(tcp)

    plan = reload_plan(loaded, loaded, parse_config(new))

    assert plan.applied == ["tcp.token_file"] and plan.needs_restart == ["tcp.port"]
    assert str(plan.config.tcp.token_file) == "/etc/b.token" and plan.config.tcp.port == 7000


def test_hostd_reload_says_a_changed_or_unusable_tcp_token() -> None:
    from hostd.cli._daemon import reload_lines

    changed = reload_lines({"tcp_token": {"state": "changed", "closed": 2}})
    assert (
        changed[-1]
        == "tcp-token: changed; the old one is refused (2 connections opened with it closed)"
    )
    unusable = reload_lines(
        {"tcp_token": {"state": "unusable", "error": "No such file", "closed": 0}}
    )
    assert unusable[-1].startswith("tcp-token: none usable (No such file); every TCP")
    assert not any(
        "tcp-token" in line for line in reload_lines({"tcp_token": {"state": "unchanged"}})
    )


def test_every_key_of_the_restart_policy_waits_for_a_restart() -> None:
    """The provider pool's restart policy is built once, at start (``restart_policy``):
    a reload that said it applied one of its keys would be wrong."""
    loaded = parse_config(BASE)
    new = parse_config(
        BASE.replace(
            "default_budget = 3000",
            "default_budget = 3000\nrestart_backoff_s = 1\nrestart_backoff_max_s = 9\n"
            "restart_attempts = 7\nretry_failed_after_s = 30\nretry_failed_max_s = 900",
        )
    )
    plan = reload_plan(loaded, loaded, new)
    assert plan.applied == []
    assert plan.needs_restart == [
        "host.restart_attempts",
        "host.restart_backoff_max_s",
        "host.restart_backoff_s",
        "host.retry_failed_after_s",
        "host.retry_failed_max_s",
    ]
    assert plan.config.host.restart_attempts == 5 and plan.config.host.restart_backoff_max_s == 5
