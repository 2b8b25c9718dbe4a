"""Adapters for agent frameworks, both ways (docs/integrations.md).

Forward, hostd as a framework's retriever: ``hostd.integrations.langchain`` and
``hostd.integrations.llama_index`` (each needs its extra, ``langchain`` or
``llama-index``, and is imported by name). Backward, a framework's retriever as a
CGP provider: ``RetrieverProvider`` serves any ``Search`` (query text in,
``Retrieved`` documents out) on the provider runtime, and each framework module's
``retriever_search`` makes one from a retriever; ``python -m providers.langchain``
and ``python -m providers.llama_index`` run them. This package imports no
framework: the framework modules do, when imported. The forward adapters read the typed
``hostd.client.ComposeResult`` (``retriever.last_composition``); one made with
``on_degraded="raise"`` raises ``DegradedComposition`` for a composition short of
what was asked.

Layers: a client of the client API (``hostd.client``) and of the provider runtime
(``hostd.provider``); it never imports the host side (engine, server, compose).
"""

from ._evidence import DegradedComposition
from ._frames import Retrieved
from ._provider import RetrieverProvider, Search

__all__ = ["DegradedComposition", "Retrieved", "RetrieverProvider", "Search"]
