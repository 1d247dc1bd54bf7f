"""Served search against the search before documents had records, side by side in one run.

    .venv/bin/python bench/search_bench.py --root financebench=DIR --root more=DIR \\
        --root docugami=DIR [--crowd DIR] [--out bench/results/search.json]

Each root is a storage root that holds (or is given by ``eval``) the set's documents. For each
set, ``evaluate`` scores the served profile twice over the same index: ``served`` (the documents
a question names first, one result per page: what `search` returns) and ``passages`` (one
result per passage, no document pass: the method before), beside the two baselines, with 95%
bootstrap intervals, document-level recall beside page-level, and the paired difference
served minus passages for every measure. ``financebench+more`` joins the two FinanceBench sets'
questions, each asked over its own filings, into one figure with its interval. ``--crowd`` names
a root holding every filing of both sets and the distractors: both sets' questions are asked of
all of it at once.
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


def run_set(name: str, root: str, crowd: bool = False, baselines: bool = True) -> dict:
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.retrieval.evaluation import evaluate, question_set, together
    from ingest_pipeline.retrieval.intervals import paired_difference

    parts = parts_for(os.path.abspath(root))
    names = ["financebench", "more"] if crowd else [name]
    questions = together([question_set(SETS[n], parts.settings.data) for n in names])
    rows = evaluate(
        parts,
        questions,
        [parts.settings.default_profile],
        methods=("served", "passages"),
        crowd=crowd,
        baselines=baselines,
    )
    served, passages = rows[0]["first_hits"], rows[1]["first_hits"]
    return {
        "questions": len(questions.questions),
        "rows": rows,
        "served_minus_passages": {m: paired_difference(served, passages, m) for m in MEASURES},
    }


def joined(results: dict) -> dict:
    """financebench and more as one set of questions, each asked over its own filings."""
    from ingest_pipeline.retrieval.intervals import bootstrap_intervals, paired_difference, per_question

    out = {}
    for index, method in enumerate(("served", "passages")):
        firsts = [f for name in ("financebench", "more") for f in results[name]["rows"][index]["first_hits"]]
        means = {m: round(float(v.mean()), 4) for m, v in per_question(firsts).items()}
        out[method] = {
            "questions": len(firsts),
            **means,
            "intervals": bootstrap_intervals(firsts),
            "first_hits": firsts,
        }
    out["served_minus_passages"] = {
        m: paired_difference(out["served"]["first_hits"], out["passages"]["first_hits"], m) for m in MEASURES
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", action="append", default=[], help="SET=DIR (financebench, more, docugami)")
    parser.add_argument("--crowd", help="a root with every FinanceBench filing and the distractors")
    parser.add_argument("--no-crowd-baselines", action="store_true", help="skip the baselines in the crowd")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "search.json"))
    args = parser.parse_args()
    os.environ.setdefault("INGEST_QA", str(QA))
    results = {}
    for item in args.root:
        name, _, folder = item.partition("=")
        results[name] = run_set(name, folder)
        row = results[name]["rows"][0]
        print(f"{name}: served R@5 {row['recall@5']:.3f} MRR@10 {row['mrr@10']:.3f}", file=sys.stderr)
    if "financebench" in results and "more" in results:
        results["financebench+more"] = joined(results)
    if args.crowd:
        results["crowd"] = run_set("crowd", args.crowd, crowd=True, baselines=not args.no_crowd_baselines)
    out = {**provenance(), "sets": results}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
