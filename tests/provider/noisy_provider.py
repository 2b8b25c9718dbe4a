"""A provider whose own code writes to stdout, for the stdio runtime's wire tests.

``python -m tests.provider.noisy_provider --print | --raw``: on every query it prints a
line of about 1 KiB with plain ``print`` (no flush; ``--print``, once before
``run_stdio`` too) or writes a line straight to descriptor 1 with ``os.write``
(``--raw``), as debug output or a C library would. None of it may reach the wire.
"""

from __future__ import annotations

import argparse
import os

from hostd.protocol import ContextQuery, ContextQueryResult
from hostd.provider import run_stdio
from tests.fixtures.healthy_provider import HealthyProvider

PRINTED = "printed by the provider " + "p" * 1000
RAW = b"written to descriptor 1 by the provider\n"


class NoisyProvider(HealthyProvider):
    def __init__(self, raw: bool) -> None:
        super().__init__(name="noisy")
        self.raw = raw

    def noise(self) -> None:
        if self.raw:
            os.write(1, RAW)
        else:
            print(PRINTED)

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        self.noise()
        return await super().query(query)


def main() -> None:
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--print", action="store_false", dest="raw")
    mode.add_argument("--raw", action="store_true", dest="raw")
    raw = parser.parse_args().raw
    if not raw:
        print(PRINTED)  # still in sys.stdout's buffer when the runtime starts
    run_stdio(NoisyProvider(raw))


if __name__ == "__main__":
    main()
