"""Served search against the search before documents had records, side by side in one run.

    .venv/bin/python bench/search_bench.py --root financebench=DIR --root more=DIR \\
        --root docugami=DIR [--out bench/results/search.json]

Each root is a storage root that holds (or is given by ``eval``) the set's documents. For each
set, ``evaluate`` scores the served profile twice over the same index: ``served`` (the documents
a question names first, one result per page: what `search` returns) and ``passages`` (one
result per passage, no document pass: the method before), beside the two baselines, with 95%
bootstrap intervals, document-level recall beside page-level, and the paired difference
served minus passages for every measure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

QA = ROOT.parent / "shared" / "qa"
SETS = {"financebench": "financebench", "docugami": "docugami", "more": str(QA / "financebench-more")}
MEASURES = ("recall@1", "recall@5", "recall@10", "mrr@10")


def run_set(name: str, root: str) -> dict:
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.retrieval.evaluation import evaluate, paired_difference, question_set

    parts = parts_for(os.path.abspath(root))
    questions = question_set(SETS[name], parts.settings.data)
    rows = evaluate(parts, questions, [parts.settings.default_profile], methods=("served", "passages"))
    served, passages = rows[0]["first_hits"], rows[1]["first_hits"]
    return {
        "questions": len(questions.questions),
        "rows": rows,
        "served_minus_passages": {m: paired_difference(served, passages, m) for m in MEASURES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", action="append", default=[], help="SET=DIR (financebench, more, docugami)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "search.json"))
    args = parser.parse_args()
    os.environ.setdefault("INGEST_QA", str(QA))
    results = {}
    for item in args.root:
        name, _, folder = item.partition("=")
        results[name] = run_set(name, folder)
        row = results[name]["rows"][0]
        print(f"{name}: served R@5 {row['recall@5']:.3f} MRR@10 {row['mrr@10']:.3f}", file=sys.stderr)
    out = {**provenance(), "sets": results}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
