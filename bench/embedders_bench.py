"""Retrieval with each built-in local embedder, side by side on the same chunks, in one run.

    .venv/bin/python bench/embedders_bench.py [--sets financebench docugami more] [--keep DIR]
                                             [--no-baselines] [--out FILE]

For each question set a fresh storage root is ingested with the served profile
(``retrieval``, ``minilm@1``) and a twin of it that differs only in its embedder
(``retrieval_int8``: the same chunkers and document context, ``minilm-int8@1``; not
indexed, so ``eval`` embeds it through the cache into a temporary LanceDB table and searches
it the same way, hybrid). ``ingest-pipeline eval`` scores both beside the two baselines;
this script adds, for recall@1/5/10 and MRR@10, the paired difference int8 minus float32
with its 95% bootstrap interval over the questions (the same questions, drawn again
together), which is what says whether a difference is more than noise.

Sets: ``financebench`` (financebench-dev, page-level), ``docugami`` (document-level) and
``more`` (financebench-more, page-level: questions nobody tuned the project on).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

QA = ROOT.parent / "shared" / "qa"
SETS = {"financebench": "financebench", "docugami": "docugami", "more": str(QA / "financebench-more")}
CONFIG = """
[embedder]
use = "minilm@1"  # the served profile in float32, whatever the default

[profiles.retrieval_int8]
chunkers = ["pdf@4", "docx@1", "xlsx@1", "delimited@1", "pptx@1", "markdown@1"]
document_context = true
indexed = false
embedder = "minilm-int8@1"
"""
MEASURES = ("recall@1", "recall@5", "recall@10", "mrr@10")


def run_set(name: str, questions: str, root: Path, baselines: bool = True) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ingest_pipeline.toml").write_text(CONFIG)
    command = [
        str(ROOT / ".venv" / "bin" / "ingest-pipeline"),
        "--data",
        str(root),
        "eval",
        "--questions",
        questions,
        "--profile",
        "retrieval",
        "--profile",
        "retrieval_int8",
        "--json",
        *([] if baselines else ["--no-baselines"]),
    ]
    env = {**os.environ, "INGEST_QA": str(QA)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: eval failed\n{done.stderr[-3000:]}")
    rows = json.loads(done.stdout)
    return {"rows": rows, "paired": paired(rows)}


def paired(rows: list[dict]) -> dict:
    from ingest_pipeline.retrieval.intervals import paired_difference

    by_name = {r["name"]: r for r in rows}
    int8, fp32 = by_name["retrieval_int8"]["first_hits"], by_name["retrieval"]["first_hits"]
    return {m: paired_difference(int8, fp32, m) for m in MEASURES}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--keep", help="keep the storage roots under this folder")
    parser.add_argument("--no-baselines", action="store_true", help="score the two profiles only")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "embedders.json"))
    parser.add_argument("--merge", action="store_true", help="keep the other sets already in --out")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="embedders-bench-") as scratch:
        base = Path(args.keep) if args.keep else Path(scratch)
        for name in args.sets:
            results[name] = {
                **provenance(),  # each set keeps the command and date that measured it
                **run_set(name, SETS[name], base / name, baselines=not args.no_baselines),
            }
            for row in results[name]["rows"]:
                if "unavailable" in row:
                    continue
                print(
                    f"{name:13} {row['name']:24} {row.get('embedder', ''):14} "
                    f"R@5 {row['recall@5']:.3f} {row['intervals']['recall@5']} "
                    f"MRR@10 {row['mrr@10']:.3f} {row['intervals']['mrr@10']}"
                )
            for measure, d in results[name]["paired"].items():
                low, high = d["low"], d["high"]
                print(
                    f"{name:13} int8 - float32 {measure:9} {d['difference']:+.4f} [{low:+.4f}, {high:+.4f}]"
                )
    if args.merge and Path(args.out).exists():
        results = {**json.loads(Path(args.out).read_text())["sets"], **results}
    out = {**provenance(), "sets": results}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
