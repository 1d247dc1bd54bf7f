"""Word coverage of the served profile over every corpus PDF: for each page its reader read,
the share of its words found in the served chunks of that page or in the lines the chunker
left out on purpose and said so (``meta.left_out``), as the ``page_text_covered`` check
counts them; every page under the check's floor with its missing words.

    .venv/bin/python bench/coverage_bench.py [--pdfs DIR] [--out FILE]

The PDFs are ingested by the command line into a fresh storage root with the project's
``data/ingest_pipeline.toml`` (the served profile, ``retrieval``, as users get it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

DEFAULT_PDFS = ROOT.parent / "shared" / "corpus" / "files" / "pdf"
RESULT = ROOT / "bench" / "results" / "coverage.json"


def measure(data: Path) -> dict:
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.stages.chunk_checks import COVERAGE_FLOOR, page_coverage

    parts = parts_for(str(data))
    profile = parts.settings.default_profile
    store = parts.store
    pages_seen, low = [], []
    documents = sorted(store.inventory())
    for doc in documents:
        rows = store.chunk_rows(profile, doc)
        pages = [
            r
            for r in store.page_rows(doc, columns=["document_id", "page", "status", "text", "reader"])
            if r["status"] == "read" and r["text"]
        ]
        readers = {r["page"]: r["reader"] for r in pages}
        path = rows[0]["path"] if rows else doc
        for page in page_coverage(pages, rows):
            pages_seen.append(page["covered"])
            if page["covered"] < COVERAGE_FLOOR:
                low.append(
                    {
                        "path": path,
                        "page": page["page"],
                        "covered": round(page["covered"], 3),
                        "reader": readers.get(page["page"]),
                        "missing": page["missing"],
                    }
                )
    return {
        "profile": profile,
        "documents": len(documents),
        "pages": len(pages_seen),
        "mean_covered": round(statistics.mean(pages_seen), 4) if pages_seen else None,
        "floor": COVERAGE_FLOOR,
        "pages_under_floor": len(low),
        "under_floor": sorted(low, key=lambda p: (p["path"], p["page"])),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdfs", default=str(DEFAULT_PDFS))
    parser.add_argument("--out", default=str(RESULT))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        shutil.copy(ROOT / "data" / "ingest_pipeline.toml", data / "ingest_pipeline.toml")
        cli = str(Path(sys.executable).parent / "ingest-pipeline")
        done = subprocess.run(
            [cli, "--data", str(data), "ingest", args.pdfs],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if done.returncode != 0:
            raise SystemExit(f"ingest failed:\n{done.stderr[-3000:]}")
        report = {**provenance(), **measure(data)}
    Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "under_floor"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
