"""The embedder's session, thread and batch settings, chosen by measurement on this machine.

    .venv/bin/python bench/embed_threads_bench.py [--texts N] [--settings W:T:B ...] [--out FILE]

Embeds the same passages (cut from the corpus Markdown, about 1,000 characters each, so
near the model's 256 tokens like the served passages) with each setting ``W:T:B``: W
onnxruntime sessions side by side (each on a thread of its own, taking the next batch as
it finishes one), T intra-op threads per session (0: onnxruntime's own count, both cores
here) and B texts per model call. Each setting runs in a fresh process, so no session or
cache is shared; the report gives passages per second, the process's peak memory, and each
setting's time as a ratio to one session on onnxruntime's own threads with batches of 8
(the project's setting before this measurement).
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
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

CORPUS_MD = ROOT.parent / "shared" / "corpus" / "files" / "md"
BEFORE = "1:0:8"
SETTINGS = [BEFORE, "1:0:4", "1:0:16", "2:1:2", "2:1:4", "2:1:8", "2:1:16", "1:1:4"]


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


def one(setting: str, count: int) -> dict:
    from ingest_pipeline.embedding.minilm import MiniLMEmbedder

    workers, threads, batch = (int(x) for x in setting.split(":"))
    embedder = MiniLMEmbedder(batch_size=batch, threads=threads or None, workers=workers)
    texts = passages(count)
    embedder.embed(texts[:8])  # load the sessions
    started = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - started
    return {
        "setting": setting,
        "sessions": workers,
        "threads": threads or "onnxruntime default",
        "batch": batch,
        "texts": count,
        "seconds": round(seconds, 2),
        "texts_per_second": round(count / seconds, 2),
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument(
        "--settings",
        nargs="*",
        default=SETTINGS,
        help="sessions:threads:batch (threads 0: onnxruntime's own count)",
    )
    parser.add_argument("--out")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.texts)))
        return 0
    rows = []
    for setting in dict.fromkeys([BEFORE, *args.settings]):
        out = subprocess.run(
            [sys.executable, __file__, "--one", setting, "--texts", str(args.texts)],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    before = next(r for r in rows if r["setting"] == BEFORE)
    for row in rows:
        row["seconds_over_before"] = round(row["seconds"] / before["seconds"], 3)
    best = min(rows, key=lambda r: r["seconds"])
    report = {
        **provenance(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": rows,
        "fastest": best,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
