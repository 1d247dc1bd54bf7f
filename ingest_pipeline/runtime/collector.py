"""How often the cyclic garbage collector runs in the processes that build chunks.

Reading a document allocates a few container objects per glyph, line and piece, and
almost all of them live until the document's claim or chunk map is written. Under
CPython's default threshold the collector runs thousands of times over an ingest and walks
the same survivors again and again, a visible share of the claims' and chunk maps' time.
The ingest's processes raise the first generation's threshold instead. Cycles are still
found, only after more allocations. ``bench/collector_bench.py`` measures the time it
saves and ``bench/passages_bench.py`` the peak memory (``bench/results/collector.json``).
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
