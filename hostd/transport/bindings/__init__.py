"""The binding clients: one per wire (JSON-RPC, CGP envelopes)."""

from ._cgp import CgpClient
from ._jsonrpc import JsonRpcClient, provider_error, validate_reply

__all__ = ["CgpClient", "JsonRpcClient", "provider_error", "validate_reply"]
