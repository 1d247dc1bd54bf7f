"""The ingest's two heaviest kinds of Python work under CPython's default collector
thresholds against ``collector.fewer_collections``.

    .venv/bin/python bench/collector_bench.py DATA_ROOT [--rounds N] [--out FILE]

DATA_ROOT is an ingested project's data directory (``bench/passages_bench.py --keep DIR``
leaves one at DIR/data). Each measurement is a fresh process that loads Dagster and the
project (as a run process has them), sets the thresholds, then does one of two jobs:

- ``claims``: every PDF's claims of pdf@4, pdf@1, pdf@2 and pdf@3, document by document
  through ``claim_document`` as the parse worker makes them (sharing its page memo);
- ``chunk_maps``: every profile's chunk map of every document, rebuilt (``force``), and
  the chunk map checks, as the chunk-map assets run them.

The anchor (Python's thresholds, 700/10/10) and ``fewer_collections`` alternate, the anchor
first in odd rounds. The report gives each job's process CPU seconds, the seconds spent
inside collections (``gc.callbacks``), how many collections ran, and the medians' ratio.
The chunk-map job rewrites every chunk map (the same chunks, stamped with the run id
"bench"), so give it a copy of a root.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

JOBS = ("claims", "chunk_maps")
MODES = ("python", "fewer")


class Collections:
    """The seconds spent inside collections and how many ran, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds, self.count, self._started = 0.0, 0, 0.0
        gc.callbacks.append(self._track)

    def _track(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.count += 1


def _claims(data: str):
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.stages.claims import claim_document
    from ingest_pipeline.stages.pages import load_pages
    from ingest_pipeline.stages.sources import load_source, source_bytes

    p = parts_for(data)
    inputs = []
    for name in sorted(os.listdir(os.path.join(data, "lake", "chunks", p.settings.default_profile))):
        document = name[: -len(".parquet")]
        source, _ = load_source(p.store, document)
        if source["media_type"] != "application/pdf":
            continue
        pages, _ = load_pages(p.store, document)
        inputs.append((source_bytes(source), source["media_type"], tuple(pages)))
    chunkers = [(ref, p.registry.get(ref)) for ref in ("pdf@4", "pdf@1", "pdf@2", "pdf@3")]
    p.embedder.count_tokens(["warm up"])
    return lambda: [
        claim_document(
            chunker,
            content,
            media,
            pages,
            None,
            {
                "document_id": "bench",
                "chunker": ref,
                "config_hash": "bench",
                "source_sha256": "bench",
                "run_id": "bench",
            },
            ref,
            "bench",
            False,
        )
        for content, media, pages in inputs
        for ref, chunker in chunkers
    ]


def _chunk_maps(data: str):
    from ingest_pipeline import stages
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.stages.chunk_checks import chunk_map_findings

    p = parts_for(data)
    p.embedder.count_tokens(["warm up"])

    def run() -> None:
        for prof in p.settings.profiles:
            folder = os.path.join(data, "lake", "chunks", prof.name)
            if not os.path.isdir(folder):
                continue
            documents = sorted(name[: -len(".parquet")] for name in os.listdir(folder))
            outs = [
                stages.build_chunk_map(p.store, p.registry, prof, p.embedder, d, "bench", force=True)
                for d in documents
            ]
            chunk_map_findings(p.store, prof.name, documents, 256, {o.document: o.kept for o in outs})

    return run


def measure(job: str, mode: str, data: str) -> dict:
    import dagster  # noqa: F401 - a run process has Dagster loaded; a full collection walks it too

    import ingest_pipeline.definitions  # noqa: F401
    from ingest_pipeline.runtime.collector import fewer_collections

    run = _claims(data) if job == "claims" else _chunk_maps(data)
    if mode == "fewer":
        fewer_collections()
    threshold = gc.get_threshold()
    collections = Collections()
    started = time.process_time()
    run()
    return {
        "job": job,
        "mode": mode,
        "threshold": list(threshold),
        "cpu_seconds": round(time.process_time() - started, 2),
        "collection_seconds": round(collections.seconds, 2),
        "collections": collections.count,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--job", choices=JOBS)
    parser.add_argument("--mode", choices=MODES)
    args = parser.parse_args()
    if args.job:
        print(json.dumps(measure(args.job, args.mode, args.data)))
        return 0
    runs = []
    for round_ in range(args.rounds):
        modes = MODES if round_ % 2 == 0 else MODES[::-1]
        for job in JOBS:
            for mode in modes:
                out = subprocess.run(
                    [sys.executable, __file__, args.data, "--job", job, "--mode", mode],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    summary = {}
    for job in JOBS:
        median = {
            mode: statistics.median(r["cpu_seconds"] for r in runs if r["job"] == job and r["mode"] == mode)
            for mode in MODES
        }
        summary[job] = {"median_cpu_seconds": median, "ratio": round(median["fewer"] / median["python"], 3)}
    both = {mode: sum(summary[job]["median_cpu_seconds"][mode] for job in JOBS) for mode in MODES}
    report = {
        **provenance(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "jobs": summary,
        "both": {"cpu_seconds": both, "ratio": round(both["fewer"] / both["python"], 3)},
        "runs": runs,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
