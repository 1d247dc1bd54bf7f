"""Throughput of the Office and grid readers + chunkers on the corpus, and peak memory.

For every PPTX, DOCX, XLSX/XLSM and CSV/TSV of ../shared/corpus/files (hostile files
excluded: they fail in milliseconds), times read_pages + the format's chunker (pptx@1,
docx@1, xlsx@1, delimited@1), best of ``--repeat`` runs per file, and prints pages
(slides, sections, sheets, files) per second per format. Then measures, each in a fresh
subprocess, the peak RSS (VmHWM, minus the interpreter-with-imports baseline) and the
tracemalloc peak of reading + chunking: the largest corpus workbook, the sheet that
declares A1:XFD1048576, the biggest corpus DOCX, and two generated stress documents
(a 200,000-cell workbook and a handbook-sized DOCX of ~9,000 paragraphs and 100 tables).

    .venv/bin/python bench/office_bench.py [--repeat 5] [--no-synthetic]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus" / "files"
HOSTILE = {"calamine__issue252.xlsx", "calamine__pass_protected.xlsx"}
FORMATS = {"pptx": "pptx", "docx": "docx", "xlsx": "xlsx", "csv": "csv/tsv"}

_MEASURE = r"""
import json, sys, time, tracemalloc
from ingest_pipeline import media_types as mt
from ingest_pipeline.readers import read_pages
from ingest_pipeline.chunkers.docx import DocxChunker
from ingest_pipeline.chunkers.pptx import PptxChunker
from ingest_pipeline.chunkers.xlsx import XlsxChunker
from ingest_pipeline.chunkers.delimited import DelimitedChunker
import lxml.etree  # imported up front so the baseline includes it
path = sys.argv[1]
content = open(path, "rb").read()
media_type = mt.detect(content, path)
chunker = {mt.DOCX: DocxChunker, mt.PPTX: PptxChunker, mt.XLSX: XlsxChunker, mt.XLSM: XlsxChunker,
           mt.CSV: DelimitedChunker, mt.TSV: DelimitedChunker}[media_type]()
def vm_hwm_kib():  # this process's own peak; ru_maxrss would carry the parent's peak over the fork
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
base = vm_hwm_kib()
traced_run = sys.argv[2] == "traced"
if traced_run:
    tracemalloc.start()
start = time.perf_counter()
pages = read_pages(content, media_type)
answer = chunker.chunk(content, media_type, pages)
elapsed = time.perf_counter() - start
_, traced = tracemalloc.get_traced_memory() if traced_run else (0, 0)
peak = vm_hwm_kib()
print(json.dumps({"seconds": elapsed, "pages": len(pages), "pieces": sum(len(pc.pieces) for pc in answer),
                  "rss_peak_mib": peak / 1024, "rss_over_baseline_mib": (peak - base) / 1024,
                  "tracemalloc_peak_mib": traced / 2**20, "bytes": len(content)}))
"""


def chunker_for(media_type: str):
    from ingest_pipeline import media_types as mt
    from ingest_pipeline.chunkers.delimited import DelimitedChunker
    from ingest_pipeline.chunkers.docx import DocxChunker
    from ingest_pipeline.chunkers.pptx import PptxChunker
    from ingest_pipeline.chunkers.xlsx import XlsxChunker

    return {
        mt.DOCX: DocxChunker,
        mt.PPTX: PptxChunker,
        mt.XLSX: XlsxChunker,
        mt.XLSM: XlsxChunker,
        mt.CSV: DelimitedChunker,
        mt.TSV: DelimitedChunker,
    }[media_type]()


def throughput(repeat: int) -> dict[str, dict[str, float]]:
    from ingest_pipeline import media_types as mt
    from ingest_pipeline.readers import read_pages

    results: dict[str, dict[str, float]] = {}
    for folder, label in FORMATS.items():
        files = sorted(p for p in (CORPUS / folder).glob("*") if p.is_file() and p.name not in HOSTILE)
        pages = pieces = 0
        seconds = 0.0
        for path in files:
            content = path.read_bytes()
            media_type = mt.detect(content, path.name)
            chunker = chunker_for(media_type)
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                outputs = read_pages(content, media_type)
                answer = chunker.chunk(content, media_type, outputs)
                best = min(best, time.perf_counter() - start)
            pages += len(outputs)
            pieces += sum(len(pc.pieces) for pc in answer)
            seconds += best
        results[label] = {
            "files": len(files),
            "pages": pages,
            "pieces": pieces,
            "seconds": seconds,
            "pages_per_second": pages / seconds if seconds else 0.0,
        }
    return results


def measure(path: Path) -> dict:
    """Time and RSS from a plain run; the Python-heap peak from a second, traced run."""
    rows = []
    for mode in ("plain", "traced"):
        result = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path), mode],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        if result.returncode != 0:
            return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"}
        rows.append(json.loads(result.stdout))
    plain, traced = rows
    plain["tracemalloc_peak_mib"] = traced["tracemalloc_peak_mib"]
    return plain


def synthetic_workbook(path: Path, rows: int = 20_000, cols: int = 10) -> None:
    import openpyxl

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("Data")
    ws.append([f"column {c}" for c in range(cols)])
    for r in range(rows):
        ws.append([r * cols + c if c % 2 else f"text {r}-{c}" for c in range(cols)])
    wb.save(path)


def synthetic_handbook(path: Path, paragraphs: int = 9_000, tables: int = 100) -> None:
    import docx

    doc = docx.Document()
    sentence = "The maintenance handbook describes inspection intervals, torque values and safety wiring. "
    per_table = paragraphs // tables
    for t in range(tables):
        doc.add_heading(f"Chapter {t + 1}", level=1)
        for p in range(per_table):
            doc.add_paragraph(sentence * (1 + p % 4))
        table = doc.add_table(rows=12, cols=4)
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row.cells):
                cell.text = f"r{r} c{c} value {t}"
    doc.save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-synthetic", action="store_true")
    args = parser.parse_args()

    print(f"Throughput (read_pages + chunker, best of {args.repeat} per file):")
    print(f"{'format':10} {'files':>5} {'pages':>6} {'pieces':>7} {'seconds':>9} {'pages/s':>9}")
    for label, row in throughput(args.repeat).items():
        print(
            f"{label:10} {row['files']:>5} {row['pages']:>6} {row['pieces']:>7} {row['seconds']:>9.4f} "
            f"{row['pages_per_second']:>9.1f}"
        )

    targets = {
        "largest corpus workbook": max(
            (CORPUS / "xlsx").glob("*.xls*"), key=lambda p: p.stat().st_size if p.name not in HOSTILE else -1
        ),
        "sheet declaring A1:XFD1048576": CORPUS / "xlsx" / "calamine__issue_174.xlsx",
        "biggest corpus DOCX": max((CORPUS / "docx").glob("*.docx"), key=lambda p: p.stat().st_size),
    }
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_synthetic:
            book = Path(tmp) / "synthetic_200k_cells.xlsx"
            synthetic_workbook(book)
            targets["generated 200,000-cell workbook"] = book
            handbook = Path(tmp) / "synthetic_handbook.docx"
            synthetic_handbook(handbook)
            targets["generated handbook DOCX (~9,000 paragraphs)"] = handbook
        print(
            "\nPeak memory, one fresh process each (RSS over the import baseline; tracemalloc = Python heap):"
        )
        for label, path in targets.items():
            row = measure(path)
            if "error" in row:
                print(f"  {label} ({path.name}): ERROR {row['error']}")
                continue
            print(
                f"  {label} ({path.name}, {row['bytes'] / 1024:.0f} KiB): {row['seconds']:.2f} s, "
                f"{row['pages']} pages, {row['pieces']} pieces, RSS peak {row['rss_peak_mib']:.0f} MiB "
                f"(+{row['rss_over_baseline_mib']:.0f} MiB), "
                f"tracemalloc peak {row['tracemalloc_peak_mib']:.1f} MiB"
            )


if __name__ == "__main__":
    main()
