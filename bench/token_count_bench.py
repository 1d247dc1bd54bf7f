"""Counting a lake's chunk texts: the tokenizer on each whole text against ``WordCounter``.

    .venv/bin/python bench/token_count_bench.py DATA_ROOT [--rounds N] [--out FILE]

DATA_ROOT is an ingested project's data directory (``bench/passages_bench.py --keep DIR``
leaves one at DIR/data). Every profile's chunk map texts (the embedding text when there is
one, as the chunk map counts it; texts over 4,096 characters are left out, the chunk map
counts those window by window) are counted per document, one call a document as the chunk
map does: once by the tokenizer on whole texts (``encode_batch_fast``, the way counting
worked before ``WordCounter``), once by a fresh ``WordCounter``, in alternating rounds. The
report gives each way's CPU seconds (process time, both threads of the tokenizer's pool
included; ``TOKENIZERS_PARALLELISM`` is left as the caller set it), their ratio, and
whether every count agreed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)


def documents(data: Path) -> dict[str, list[list[str]]]:
    import pyarrow.parquet as pq

    out = {}
    for folder in sorted((data / "lake" / "chunks").iterdir()):
        docs = []
        for path in sorted(folder.glob("*.parquet")):
            table = pq.read_table(path, columns=["text", "embed_text"])
            texts = [
                e or t
                for t, e in zip(table.column("text").to_pylist(), table.column("embed_text").to_pylist())
            ]
            docs.append([t for t in texts if t and len(t) <= 4096])
        out[folder.name] = docs
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from ingest_pipeline.chunkers.pdf.packing import model_tokenizer
    from ingest_pipeline.embedding.word_counts import WordCounter

    tokenizer = model_tokenizer()
    by_profile = documents(args.data)
    docs = [d for profile in by_profile.values() for d in profile]

    def whole() -> list[list[int]]:
        return [[len(e.ids) for e in tokenizer.encode_batch_fast(d, add_special_tokens=False)] for d in docs]

    def words() -> list[list[int]]:
        counter = WordCounter(tokenizer)
        return [counter.counts(d) for d in docs]

    seconds: dict[str, list[float]] = {"whole": [], "words": []}
    answers = {}
    for _ in range(args.rounds):
        for name, way in (("whole", whole), ("words", words)):
            started = time.process_time()
            answers[name] = way()
            seconds[name].append(round(time.process_time() - started, 3))
    mean = {k: sum(v) / len(v) for k, v in seconds.items()}
    report = {
        **provenance(),
        "data": str(args.data),
        "profiles": {k: sum(len(d) for d in v) for k, v in by_profile.items()},
        "texts": sum(len(d) for d in docs),
        "characters": sum(len(t) for d in docs for t in d),
        "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"),
        "cpu_seconds": seconds,
        "words_over_whole": round(mean["words"] / mean["whole"], 3),
        "counts_agree": answers["whole"] == answers["words"],
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
