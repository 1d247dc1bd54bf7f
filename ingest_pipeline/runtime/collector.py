"""How often the cyclic garbage collector runs in the processes that build chunks.

Reading a document allocates a few container objects per glyph, line and piece (pdf@1
alone claims 193,370 lines of FinanceBench's 21 filings), and almost all of them live
until the document's claim or chunk map is written. Under CPython's default threshold
(700 allocations) the collector runs thousands of times over an ingest and walks the
same survivors again and again: over FinanceBench, 7.1 s of the 51.8 s the claims of
pdf@1-4 cost in one process and 3.3 s of the 25.3 s the four chunk maps cost went into
collections (``gc.callbacks``). The ingest's processes raise the first generation's
threshold instead (``bench/collector_bench.py`` measures it). Cycles are still found,
only after more allocations; the FinanceBench ingest's peak memory did not move (1,914 and
1,912 MiB in two runs against 1,915 MiB before, ``bench/passages_bench.py``).
"""

from __future__ import annotations

import gc

FIRST_GENERATION = 10_000  # allocations between collections of the youngest generation


def fewer_collections() -> None:
    """Raise the youngest generation's threshold to ``FIRST_GENERATION`` in this process;
    a higher threshold stays, and a collector switched off (threshold 0) stays off."""
    first, second, third = gc.get_threshold()
    if 0 < first < FIRST_GENERATION:
        gc.set_threshold(FIRST_GENERATION, second, third)
