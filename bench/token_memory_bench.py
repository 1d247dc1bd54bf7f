"""Peak memory of cutting one huge text page to the embedder's token limit (issue 13).

Each figure runs in its own process (peak RSS from getrusage), on the same generated page
of prose (sentences of plain words):

* anchor: the whole page tokenized in one call (what the splitter did before), on a page
  of ``--anchor-mb`` MB (20 MB took 4.3 GB, so the anchor is kept smaller);
* windowed: ``split_to_limit`` (tokenizing window by window) on the same page;
* windowed at ``--mb`` MB: the page the issue names.

    .venv/bin/python bench/token_memory_bench.py [--mb 20] [--anchor-mb 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import resource, sys, time
sys.path.insert(0, {root!r})
from ingest_pipeline.embedding.minilm import default_embedder
from ingest_pipeline.contract import ChunkPiece
from ingest_pipeline.embedding.token_limits import split_to_limit
mb, mode = float(sys.argv[1]), sys.argv[2]
sentence = "The irrigation valve in zone seven opens at dawn and closes before noon. "
text = sentence * int(mb * 1024 * 1024 / len(sentence))
embedder = default_embedder()
embedder.token_offsets("warm up")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if mode == "whole":
    parts = len(embedder.token_offsets(text))
else:
    parts = len(split_to_limit(ChunkPiece(text=text, bbox_reason="no_geometry"), embedder.token_offsets,
                               embedder.max_tokens))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{{peak / 1024:.0f}} {{(peak - base) / 1024:.0f}} {{time.perf_counter() - started:.1f}} {{parts}}")
"""


def measure(mb: float, mode: str) -> dict:
    code = CHILD.format(root=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code, str(mb), mode], capture_output=True, text=True, check=True
    )
    peak, grown, seconds, count = out.stdout.split()
    return {
        "mb": mb,
        "mode": mode,
        "peak_rss_mib": int(peak),
        "grown_mib": int(grown),
        "seconds": float(seconds),
        "result": int(count),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--anchor-mb", type=float, default=2.0)
    args = parser.parse_args()
    anchor = measure(args.anchor_mb, "whole")
    same = measure(args.anchor_mb, "windowed")
    big = measure(args.mb, "windowed")
    print(
        json.dumps(
            {
                "anchor_whole": anchor,
                "windowed_same_page": same,
                "windowed_big_page": big,
                "memory_growth_ratio_same_page": round(same["grown_mib"] / max(anchor["grown_mib"], 1), 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
