"""The text of the walkthrough's design document: billing sections that say nothing of
the cache, and one about its eviction of about 140 tokens (served by
``mcpserver_app design``, cut in ``test_frames_pieces``)."""

FILLER = (
    "Invoices are generated nightly from the usage ledger. Credit notes are issued when"
    " an invoice is disputed. Tax rates are looked up per region before it is finalised.\n"
)
EVICTION = (
    "## Storage: cache eviction\n\n"
    "The cache eviction watermark is the heart of the storage tier. When resident memory"
    " crosses the high watermark of 85 percent, the evictor thread starts removing the"
    " least recently used entries in batches of 512 until memory falls below the low"
    " watermark of 70 percent. Entries pinned by an open transaction are skipped, and an"
    " eviction never blocks a reader. To tune eviction, change cache.high_watermark and"
    " cache.low_watermark in settings.toml; setting them closer together makes eviction"
    " run more often in smaller bursts.\n"
)
