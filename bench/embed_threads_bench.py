"""The embedder's thread and batch settings, chosen by measurement on this machine.

    .venv/bin/python bench/embed_threads_bench.py [--texts N] [--threads T ...] [--batches B ...] [--out FILE]

Embeds the same passages (cut from the corpus Markdown, about 1,000 characters each, so
near the model's 256 tokens like the served passages) with every combination of
onnxruntime intra-op threads and batch size, each in a fresh process so no session or
cache is shared, and reports passages per second, the process's peak memory, and each
setting's time as a ratio to onnxruntime's own thread count with batches of 64 (the
project's default until this measurement; ``embed_batch`` is now 8).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS_MD = ROOT.parent / "shared" / "corpus" / "files" / "md"


def passages(count: int) -> list[str]:
    words = " ".join(p.read_text(errors="replace") for p in sorted(CORPUS_MD.glob("*.md"))).split()
    out, start = [], 0
    while len(out) < count:
        piece, size = [], 0
        while size < 1000:
            word = words[start % len(words)]
            piece.append(word)
            size += len(word) + 1
            start += 1
        out.append(" ".join(piece))
    return out


def one(threads: int, batch: int, count: int) -> dict:
    from ingest_pipeline.embedding import MiniLMEmbedder

    embedder = MiniLMEmbedder(batch_size=batch, threads=threads or None)
    texts = passages(count)
    embedder.embed(texts[:8])  # load the session
    started = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - started
    return {"threads": threads or "onnxruntime default", "batch": batch, "texts": count,
            "seconds": round(seconds, 2), "texts_per_second": round(count / seconds, 2),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--threads", nargs="*", type=int, default=[0, 1, 2], help="0: onnxruntime's default")
    parser.add_argument("--batches", nargs="*", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--out")
    parser.add_argument("--one", nargs=2, type=int, metavar=("THREADS", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.texts)))
        return 0
    rows = []
    for threads in args.threads:
        for batch in sorted(set(args.batches) | {64}):
            out = subprocess.run([sys.executable, __file__, "--one", str(threads), str(batch), "--texts",
                                  str(args.texts)], check=True, capture_output=True, text=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    default = next(r for r in rows if r["batch"] == 64 and r["threads"] == (args.threads[0] or "onnxruntime default"))
    for row in rows:
        row["seconds_over_default"] = round(row["seconds"] / default["seconds"], 3)
    best = min(rows, key=lambda r: r["seconds"])
    report = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "settings": rows, "fastest": best}
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
