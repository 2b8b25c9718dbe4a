"""hostd as a LangChain and a LlamaIndex retriever, against a real daemon whose bundled
providers (``files``, ``memory``) run as child processes."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hostd.protocol import address_line_range, sha256_digest
from providers.memory import MemoryStore
from tests.fixtures.procs import ServeChild
from tests.providers._stdio import REPO, child_env
from tests.server.conftest import marked_processes

pytestmark = pytest.mark.slow

GOAL = "why does the retry loop give up"
FACT = "the retry loop gives up after three attempts"
METADATA = {
    "citation_label",
    "provider_id",
    "vouched_by",
    "frame_id",
    "uri",
    "range",
    "verification",
    "request_id",
    "degraded",
    "degraded_reasons",
}


def _config(workdir: Path, *, extra: str = "") -> Path:
    tree = workdir / "tree"
    tree.mkdir()
    (tree / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up after three attempts\n"
        "    for _ in range(attempts):\n        pass\n"
    )
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three tries.\n")
    db = workdir / "memory.db"
    with MemoryStore(db) as store:
        store.add("fact", "retries", FACT)
    providers = "".join(
        f'\n[[provider]]\nid = "{pid}"\ncommand = {json.dumps(cmd)}\n'
        f'timeout_ms = 100000\ncwd = "{REPO}"\n'
        for pid, cmd in [
            ("files", ["python", "-m", "providers.files", "--root", str(tree), "--no-cache"]),
            ("memory", ["python", "-m", "providers.memory", "--db", str(db)]),
        ]
    )
    path = workdir / "hostd.toml"
    path.write_text(
        f'[host]\nstate_dir = "{workdir / "state"}"\nsocket = "{workdir / "run" / "s.sock"}"\n'
        f'trusted_roots = ["{tree}"]\n' + providers + extra
    )
    return path


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ha-"))  # short: AF_UNIX path limit
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


class Daemon:
    """``hostd serve`` on a socket, started (again) on demand; ``start`` returns once it
    logs ``host.serving``."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.socket = config.parent / "run" / "s.sock"
        self.child = ServeChild(config, cwd=REPO, env=child_env())

    def start(self) -> None:
        if not self.child.start(120):  # a hang guard
            raise AssertionError("hostd serve did not log host.serving")

    def stop(self) -> None:
        code = self.child.stop()
        assert code in (None, 0)


@pytest.fixture
def daemon(workdir: Path) -> Iterator[Daemon]:
    config = _config(workdir)
    d = Daemon(config)
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _assert_provider_bytes(page: str, meta: dict[str, Any]) -> None:
    """The content is the provider's own: the file's lines for ``files``, the stored fact
    for ``memory``; never the fenced text of the prompt."""
    assert METADATA <= set(meta)
    if meta["provider_id"] == "files":
        data = Path(meta["uri"].removeprefix("file://")).read_bytes()
        assert page.encode() == address_line_range(data, meta["range"])
        assert meta["content_digest"] == sha256_digest(page.encode())
    else:
        assert meta["provider_id"] == "memory" and page == FACT


# -- LangChain ----------------------------------------------------------------------------


def test_a_langchain_chain_and_agent_use_hostd_as_their_retriever(daemon: Daemon) -> None:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import (
        FakeListChatModel,
        GenericFakeChatModel,
    )
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.tools import create_retriever_tool

    from hostd.integrations.langchain import HostdRetriever

    class Seen(BaseCallbackHandler):
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def on_chat_model_start(
            self, serialized: Any, messages: list[list[BaseMessage]], **kw: Any
        ) -> None:
            self.prompts += [str(m.content) for batch in messages for m in batch]

    with HostdRetriever(connect=daemon.socket, budget=2000, strategy="round_robin") as retriever:
        docs = retriever.invoke(GOAL)
        assert {d.metadata["provider_id"] for d in docs} == {"files", "memory"}
        for doc in docs:
            _assert_provider_bytes(doc.page_content, doc.metadata)
        assert len({d.metadata["request_id"] for d in docs}) == 1
        composition = retriever.last_composition
        assert composition is not None and composition.request_id == docs[0].metadata["request_id"]
        # Best first, whatever the placement; the prompt's order is kept in metadata.
        assert [d.metadata["rank"] for d in docs] == list(range(len(docs)))
        labels = [d.metadata["citation_label"] for d in docs]
        in_prompt = sorted(docs, key=lambda d: d.metadata["prompt_position"])
        assert [d.metadata["citation_label"] for d in in_prompt] == sorted(
            labels, key=composition.prompt.index
        )

        # A chain: retrieve, stuff, ask a (fake) chat model.
        prompt = ChatPromptTemplate.from_messages(
            [("system", "Answer from this context:\n{context}"), ("human", "{question}")]
        )
        seen = Seen()
        chain = (
            {
                "context": retriever | (lambda ds: "\n\n".join(d.page_content for d in ds)),
                "question": RunnablePassthrough(),
            }
            | prompt
            | FakeListChatModel(responses=["after three attempts"])
            | StrOutputParser()
        )
        assert chain.invoke(GOAL, config={"callbacks": [seen]}) == "after three attempts"
        assert any(FACT in p for p in seen.prompts)

        # An agent: the model calls the retriever as a tool, then answers. The tool is
        # made as docs/integrations.md shows, so each document keeps its citation label.
        tool = create_retriever_tool(
            retriever,
            "search_context",
            "Search the project.",
            document_prompt=PromptTemplate.from_template("[{citation_label}]\n{page_content}"),
        )
        model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        "", tool_calls=[{"name": tool.name, "args": {"query": GOAL}, "id": "c1"}]
                    ),
                    AIMessage("It gives up after three attempts."),
                ]
            )
        )
        messages: list[BaseMessage] = [HumanMessage(GOAL)]
        while True:
            reply = model.invoke(messages)
            messages.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                break
            for call in reply.tool_calls:
                messages.append(tool.invoke(call))
        (observation,) = [m for m in messages if isinstance(m, ToolMessage)]
        assert FACT in str(observation.content)
        assert messages[-1].content == "It gives up after three attempts."
        # The model reads every document under its label, the best first (the same
        # query composes the same evidence).
        by_rank = sorted(docs, key=lambda d: d.metadata["rank"])
        assert observation.content == "\n\n".join(
            f"[{d.metadata['citation_label']}]\n{d.page_content}" for d in by_rank
        )


@pytest.mark.anyio
async def test_the_langchain_retriever_is_async_too(daemon: Daemon) -> None:
    from hostd.integrations.langchain import HostdRetriever

    with HostdRetriever(connect=daemon.socket, budget=2000) as retriever:
        sync = retriever.invoke(GOAL)
        both = [await retriever.ainvoke(GOAL), await retriever.ainvoke(GOAL)]
    # The same input composes the same evidence; each call is its own request.
    for docs in both:
        assert [(d.page_content, d.metadata["frame_id"]) for d in docs] == [
            (d.page_content, d.metadata["frame_id"]) for d in sync
        ]
    ids = {docs[0].metadata["request_id"] for docs in [sync, *both]}
    assert len(ids) == 3


def _adapter_records(caplog: pytest.LogCaptureFixture, module: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == f"hostd.integrations.{module}"]


def test_documents_and_nodes_come_best_first_whatever_the_placement(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    from hostd.integrations.langchain import HostdRetriever
    from hostd.integrations.llama_index import HostdRetriever as LlamaIndexRetriever

    with HostdRetriever(connect=daemon.socket, budget=2000, strategy="rrf") as retriever:
        docs = retriever.invoke(GOAL)
        composition = retriever.last_composition
    assert composition is not None and len(docs) >= 3
    # The default placement (edges) puts the best at both ends of the prompt …
    in_prompt = [e.rank if e.rank is not None else -1 for e in composition.evidence]
    assert in_prompt != sorted(in_prompt)
    # … the documents come best first, each with its place in the prompt.
    assert [d.metadata["rank"] for d in docs] == sorted(in_prompt)
    for doc in docs:
        placed = composition.evidence[doc.metadata["prompt_position"]]
        assert (placed.frame_id, placed.content) == (doc.metadata["frame_id"], doc.page_content)

    with LlamaIndexRetriever(connect=daemon.socket, budget=2000, strategy="rrf") as li:
        nodes = li.retrieve(GOAL)
    assert [n.node.metadata["frame_id"] for n in nodes] == [d.metadata["frame_id"] for d in docs]
    scores = [n.get_score() for n in nodes]
    assert scores == sorted(scores, reverse=True)
    # A whole composition is no news.
    assert not _adapter_records(caplog, "langchain") + _adapter_records(caplog, "llama_index")


def test_documents_and_nodes_name_every_provider_that_served_the_same_lines(
    workdir: Path,
) -> None:
    from hostd.integrations.langchain import HostdRetriever
    from hostd.integrations.llama_index import HostdRetriever as LlamaIndexRetriever

    # A second files provider over the same tree: each region comes twice, one copy kept
    # (D2), and the document of it names both providers, not only the kept copy's.
    cmd = ["python", "-m", "providers.files", "--root", str(workdir / "tree"), "--no-cache"]
    mirror = (
        f'\n[[provider]]\nid = "mirror"\ncommand = {json.dumps(cmd)}\n'
        f'timeout_ms = 100000\ncwd = "{REPO}"\n'
    )
    d = Daemon(_config(workdir, extra=mirror))
    d.start()
    try:
        with HostdRetriever(connect=d.socket, budget=2000, strategy="round_robin") as retriever:
            docs = retriever.invoke(GOAL)
            composition = retriever.last_composition
        with LlamaIndexRetriever(connect=d.socket, budget=2000, strategy="round_robin") as li:
            nodes = li.retrieve(GOAL)
    finally:
        d.stop()
    assert composition is not None and docs
    duplicates = [e for e in composition.audit.entries if e.reason == "duplicate"]
    assert duplicates  # the same lines came from both files providers
    for metas in ([doc.metadata for doc in docs], [n.node.metadata for n in nodes]):
        by = {(m["provider_id"], m["frame_id"]): m["vouched_by"] for m in metas}
        assert {pid for pid, _ in by} <= {"files", "mirror", "memory"}
        for (pid, _), vouched in by.items():
            assert vouched == (["memory"] if pid == "memory" else ["files", "mirror"])
        assert "memory" in {pid for pid, _ in by}
        assert any(pid != "memory" for pid, _ in by)
    # The metadata is the audit's account of each included frame.
    audited = {
        (e.frame.provider_id, e.frame.frame_id): e.vouched_by for e in composition.audit.included()
    }
    assert {
        (m["provider_id"], m["frame_id"]): m["vouched_by"] for m in (x.metadata for x in docs)
    } == audited


def test_a_short_composition_is_a_warning_an_error_or_nothing_as_asked(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hostd.integrations.langchain import HostdRetriever
    from hostd.integrations.llama_index import HostdRetriever as LlamaIndexRetriever

    # Its warm-up gate is never made: the provider is warming up for the whole test.
    cmd = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", str(workdir / "no")]
    slow = f'\n[[provider]]\nid = "slow"\ncommand = {json.dumps(cmd)}\ncwd = "{REPO}"\n'
    d = Daemon(_config(workdir, extra=slow))
    d.start()
    options: dict[str, Any] = {"providers": ["slow"], "timeout_ms": 1000}
    ask: dict[str, Any] = {"connect": d.socket, "compose_options": options}
    try:
        with HostdRetriever(**ask) as retriever:
            assert retriever.invoke(GOAL) == []
            composition = retriever.last_composition
        assert composition is not None
        (record,) = _adapter_records(caplog, "langchain")  # once per call
        said = record.getMessage()
        assert record.levelno == logging.WARNING and composition.request_id in said
        assert "gave 0 document(s)" in said and "provider_warming (slow: " in said
        assert "call the retriever again" in said
        (leg,) = composition.providers
        if leg.error is not None and leg.error.message:  # the provider's progress: not quoted
            assert leg.error.message not in said

        from hostd.integrations import DegradedComposition

        with (
            HostdRetriever(**ask, on_degraded="raise") as strict,
            pytest.raises(DegradedComposition, match="provider_warming") as raised,
        ):
            strict.invoke(GOAL)
        assert raised.value.result is strict.last_composition

        caplog.clear()
        with HostdRetriever(**ask, on_degraded="ignore") as quiet:
            assert quiet.invoke(GOAL) == []
        with LlamaIndexRetriever(**ask) as li:
            assert li.retrieve(GOAL) == []
        assert not _adapter_records(caplog, "langchain")
        (record,) = _adapter_records(caplog, "llama_index")
        assert "provider_warming (slow: " in record.getMessage()
        with pytest.raises(ValueError, match="on_degraded must be one of warn, raise, ignore"):
            LlamaIndexRetriever(connect=d.socket, on_degraded="loud")  # type: ignore[arg-type]  # the wrong value under test
    finally:
        d.stop()


def test_a_rerank_fallback_says_what_to_fix_where_the_user_looks(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hostd.integrations.langchain import HostdRetriever
    from hostd.integrations.llama_index import HostdRetriever as LlamaIndexRetriever

    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    d = Daemon(_config(workdir, extra=f'\n[reranker]\nurl = "http://127.0.0.1:{port}"\n'))
    d.start()
    refused = f"connection refused at 127.0.0.1:{port}: is the server running, on that port?"
    try:
        with HostdRetriever(connect=d.socket, budget=2000, strategy="rerank") as retriever:
            docs = retriever.invoke(GOAL)
        with LlamaIndexRetriever(connect=d.socket, budget=2000, strategy="rerank") as li:
            nodes = li.retrieve(GOAL)
    finally:
        d.stop()
    assert docs and nodes  # composed all the same, by the fallback policy
    for meta in [d.metadata for d in docs] + [n.node.metadata for n in nodes]:
        (reason,) = meta["degraded_reasons"]
        assert (reason["reason"], reason["detail"]) == ("rerank_fallback", "unavailable")
        assert refused in reason["message"]
    for module in ("langchain", "llama_index"):
        (record,) = _adapter_records(caplog, module)
        assert f"rerank_fallback (unavailable: ConnectError: {refused}" in record.getMessage()


def test_the_retriever_waits_for_a_daemon_that_restarts(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    from hostd.integrations.langchain import HostdRetriever

    waiting = threading.Event()

    class Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("waiting up to 120 s for a hostd daemon at "):
                waiting.set()

    log = logging.getLogger("hostd.integrations.langchain")
    handler = Waiting()
    log.addHandler(handler)
    caplog.set_level(logging.INFO, logger=log.name)
    try:
        with (
            HostdRetriever(connect=daemon.socket, budget=500, wait=120) as retriever,
            ThreadPoolExecutor(1) as pool,
        ):
            first = retriever.invoke(GOAL)
            daemon.stop()
            call = pool.submit(retriever.invoke, GOAL)  # the daemon is down: it waits
            call.add_done_callback(lambda _: waiting.set())
            assert waiting.wait(120)  # a hang guard: the event is the log line, or the end
            assert not call.done(), call.exception()
            daemon.start()
            again = call.result(timeout=120)  # a hang guard
    finally:
        log.removeHandler(handler)
    assert [d.page_content for d in again] == [d.page_content for d in first]


@pytest.mark.parametrize("module", ["langchain", "llama_index"])
def test_no_daemon_at_the_socket_is_a_connection_error_naming_it(
    workdir: Path, module: str
) -> None:
    import importlib

    adapter = importlib.import_module(f"hostd.integrations.{module}")
    socket = workdir / "none.sock"

    def ask(wait: float) -> None:
        with adapter.HostdRetriever(connect=socket, wait=wait) as retriever:
            if module == "langchain":
                retriever.invoke(GOAL)
            else:
                retriever.retrieve(GOAL)

    with pytest.raises(ConnectionError) as exc:
        ask(0)
    assert str(socket) in str(exc.value) and "hostd serve" in str(exc.value)
    assert "waited" not in str(exc.value)
    with pytest.raises(ConnectionError, match=r"; waited 0\.2 s$"):  # a wait that ran out
        ask(0.2)


def test_connect_and_config_together_are_refused() -> None:
    from hostd.integrations.langchain import HostdRetriever

    with pytest.raises(ValueError, match="not both"):
        HostdRetriever(connect="a.sock", config="hostd.toml")
    with pytest.raises(ValueError, match="budgte"):
        HostdRetriever(budgte=100)  # type: ignore[call-arg]  # a typo is an error, not ignored


def test_a_provider_that_is_down_is_reported_with_the_documents(workdir: Path) -> None:
    from hostd.integrations.langchain import HostdRetriever

    broken = '\n[[provider]]\nid = "broken"\ncommand = ["python", "-c", "raise SystemExit(3)"]\n'
    config = _config(workdir, extra=broken)
    spawn = {"env": child_env(), "cwd": REPO, "stderr": subprocess.DEVNULL}
    with HostdRetriever(config=config, budget=2000, spawn_options=spawn) as retriever:
        docs = retriever.invoke(GOAL)
        composition = retriever.last_composition
    assert composition is not None and docs
    assert {d.metadata["provider_id"] for d in docs} == {"files", "memory"}
    status = {p.provider_id: p.status for p in composition.providers}
    assert status["broken"] != "ok" and status["files"] == status["memory"] == "ok"
    for doc in docs:
        meta = doc.metadata
        assert meta["degraded"] is True and composition.degraded is True
        assert "broken" in {r.get("provider") for r in meta["degraded_reasons"]}


# -- LlamaIndex ---------------------------------------------------------------------------


def test_a_llama_index_query_engine_uses_hostd_as_its_retriever(workdir: Path) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from hostd.integrations.llama_index import SCORE_BASIS, HostdRetriever

    config = _config(workdir)
    spawn = {"env": child_env(), "cwd": REPO, "stderr": subprocess.DEVNULL}
    with HostdRetriever(config=config, budget=2000, spawn_options=spawn) as retriever:
        # MockLLM answers with the prompt it was given: what the model saw.
        engine = RetrieverQueryEngine.from_args(retriever=retriever, llm=MockLLM())
        response = engine.query(GOAL)
        nodes = response.source_nodes
        assert {n.node.metadata["provider_id"] for n in nodes} == {"files", "memory"}
        for scored in nodes:
            meta = scored.node.metadata
            _assert_provider_bytes(scored.node.get_content(), meta)
            # F10: the score is the composition's rank, labelled so.
            assert meta["score_basis"] == SCORE_BASIS
            assert scored.score == 1.0 / (meta["rank"] + 1)
        text = str(response)
        assert FACT in text
        labels = [n.node.metadata["citation_label"] for n in nodes]
        assert all(label in text for label in labels)
        # Only the label of a node's metadata reaches the model.
        assert "provider_score" not in text and "request_id" not in text
        assert retriever.last_composition is not None
        assert {n.node.node_id for n in nodes} == {
            f"hostd:{m['provider_id']}/{m['frame_id']}" for m in (n.node.metadata for n in nodes)
        }


@pytest.mark.anyio
async def test_the_llama_index_retriever_is_async_too(workdir: Path) -> None:
    from hostd.integrations.llama_index import HostdRetriever

    config = _config(workdir)
    spawn = {"env": child_env(), "cwd": REPO, "stderr": subprocess.DEVNULL}
    retriever = HostdRetriever(config=config, budget=2000, spawn_options=spawn)
    try:
        nodes = await retriever.aretrieve(GOAL)
        again = retriever.retrieve(GOAL)
    finally:
        retriever.close()
    assert [n.node.get_content() for n in nodes] == [n.node.get_content() for n in again]
    assert {n.node.metadata["provider_id"] for n in nodes} == {"files", "memory"}


def test_closing_a_retriever_stops_the_daemon_it_spawned(workdir: Path) -> None:
    from hostd.integrations.llama_index import HostdRetriever

    config = _config(workdir)
    spawn = {"env": child_env(), "cwd": REPO, "stderr": subprocess.DEVNULL}
    retriever = HostdRetriever(config=config, budget=500, spawn_options=spawn)
    retriever.retrieve(GOAL)
    assert marked_processes(str(config))
    retriever.close()
    assert marked_processes(str(config)) == []
