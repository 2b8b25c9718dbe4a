"""hostd: an async context host for long-running agents.

It fans a query out to Context Graph Protocol providers, audits and verifies
what comes back, and composes it into fenced, cited, byte-stable evidence.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
