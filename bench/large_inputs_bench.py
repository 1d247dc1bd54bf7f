"""Large legal inputs (issue 43): a 300,000 × 5 sheet as XLSX (openpyxl write-only) and as CSV
read and cut into table chunks, rows per second and peak memory; a 16 MB nested-quote Markdown
through the chunker and the embedding texts, seconds and tokenizer passes; and each sheet
through the command line's whole ingest (chunk maps written, not embedded), rows per second
and peak memory.

Each figure runs in its own process (peak RSS from getrusage, time from the monotonic clock),
on files this script writes into a temporary folder. The size limit a format's memory
supports is ``--budget-mib`` of memory divided by the memory one MiB of that file took.

    .venv/bin/python bench/large_inputs_bench.py [--rows 300000] [--budget-mib 2048]
    .venv/bin/python bench/large_inputs_bench.py --at-size-limit    (an XLSX just under the
        spreadsheet size limit, whole ingest only; --embedded-only: the XLSX embedded too)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "large_inputs.json"
MiB = 1024 * 1024

SHEET_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.delimited import DelimitedChunker
from ingest_pipeline.chunkers.xlsx import XlsxChunker
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.readers.text import TextReader
from ingest_pipeline.readers.xlsx import XlsxReader
path, kind = sys.argv[1], sys.argv[2]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
content = open(path, "rb").read()
if kind == "xlsx":
    pages = XlsxReader().read(content, mt.XLSX, ReadOptions())
    read = time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = XlsxChunker({{}}).chunk(content, mt.XLSX, pages)
else:
    pages = TextReader().read(content, mt.CSV, ReadOptions())
    read = time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = DelimitedChunker({{}}).chunk(content, mt.CSV, pages)
seconds = time.monotonic() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
pieces = sum(len(a.pieces) for a in answer)
print(json.dumps({{"seconds": seconds, "peak_rss_mib": peak / 1024, "grown_mib": (peak - base) / 1024,
                  "pieces": pieces, "reader_seconds": read[0], "reader_peak_rss_mib": read[1] / 1024}}))
"""


def write_sheet(folder: Path, rows: int) -> tuple[Path, Path]:
    import openpyxl

    header = ["date", "account", "description", "amount", "balance"]

    def row(i: int) -> list:
        return [
            f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
            f"ACC-{i % 997:04d}",
            f"payment {i} for supplies",
            (i % 1000) * 1.25,
            i * 0.5,
        ]

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("ledger")
    sheet.append(header)
    with open(folder / "ledger.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        for i in range(rows):
            sheet.append(row(i))
            out.writerow(row(i))
    book.save(folder / "ledger.xlsx")
    return folder / "ledger.xlsx", folder / "ledger.csv"


def measure_sheet(path: Path, kind: str, rows: int, budget: float) -> dict:
    code = SHEET_CHILD.format(root=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), kind], capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    size = path.stat().st_size / MiB
    per_mib = found["peak_rss_mib"] / size
    return {
        "format": kind,
        "rows": rows,
        "columns": 5,
        "file_mib": round(size, 2),
        "seconds": round(found["seconds"], 1),
        "rows_per_second": round(rows / found["seconds"]),
        "peak_rss_mib": round(found["peak_rss_mib"]),
        "pieces": found["pieces"],
        # the reader alone (the page text, as the parse worker makes it), before the chunker
        "reader_seconds": round(found["reader_seconds"], 1),
        "reader_peak_rss_mib": round(found["reader_peak_rss_mib"]),
        "rss_mib_per_file_mib": round(per_mib, 1),
        "limit_mib_for_budget": int(budget // per_mib),
    }


def measure_markdown(folder: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from ingest_pipeline_tests.behaviours.test_bounded_stages import CHILD, nested_markdown

    path = folder / "deep.md"
    size = nested_markdown(path, 16_000_000)
    data = folder / "data"
    data.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(data)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "bytes": size,
        "seconds": round(found["seconds"], 1),
        "parts": found["parts"],
        "tokenizer_passes": round(found["tokenized"] / found["chars"], 2),
    }


def measure_ingest(path: Path, kind: str, rows: int, embedded: bool = False) -> dict:
    """The command line's whole ingest of the sheet alone in a fresh storage root, its served
    profile's chunk maps written but not embedded (``indexed = false``: the model's time is
    the embedder benches' subject) unless ``embedded``: seconds, rows per second and the peak
    resident set of the ingest process and its parse worker (the larger), from ``wait4``."""
    import time

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "sources").mkdir()
        (data / "sources" / path.name).write_bytes(path.read_bytes())
        settings = "" if embedded else "[profiles.retrieval]\nindexed = false\n"
        (data / "ingest_pipeline.toml").write_text(settings)
        cli = [sys.executable, "-m", "ingest_pipeline.commands.cli", "--data", str(data), "ingest", "--json"]
        started = time.monotonic()
        with open(data / "out.json", "wb") as out:
            process = subprocess.Popen(cli, stdout=out, stderr=subprocess.DEVNULL, cwd=ROOT)
            _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - started
        report = json.loads((data / "out.json").read_text())
    if os.waitstatus_to_exitcode(status) != 0 or report["failed"]:
        raise SystemExit(f"the ingest of {path.name} failed: {report.get('failures')}")
    return {
        "format": kind,
        "rows": rows,
        "file_mib": round(path.stat().st_size / MiB, 2),
        "seconds": round(seconds, 1),
        "rows_per_second": round(rows / seconds),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),
        "chunks": report["chunks"],
    }


def measure_at_size_limit(rows: int) -> dict:
    """The whole ingest of a sheet grown to 98% of the spreadsheet size limit: ``rows`` rows
    are written once to learn their size, then as many as fit."""
    from ingest_pipeline.settings import DEFAULT_MAX_BYTES

    limit = DEFAULT_MAX_BYTES["spreadsheet"]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sample").mkdir()
        (Path(tmp) / "at_limit").mkdir()
        sample, _ = write_sheet(Path(tmp) / "sample", rows)
        fitting = int(rows * 0.98 * limit / sample.stat().st_size)
        xlsx, _ = write_sheet(Path(tmp) / "at_limit", fitting)
        if xlsx.stat().st_size >= limit:
            raise SystemExit(f"{fitting} rows make {xlsx.stat().st_size} bytes, over the limit {limit}")
        found = measure_ingest(xlsx, "xlsx", fitting)
    return {**found, "size_limit_mib": round(limit / MiB, 2)}


def _add_to_result(key: str, found: dict, flag: str) -> None:
    """One measure's figures, with its command and date, into the existing result file."""
    found["command"] = f".venv/bin/python bench/large_inputs_bench.py {flag}"
    found["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result = json.loads(RESULT.read_text())
    result[key] = found
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(found, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--budget-mib", type=float, default=2048.0)
    parser.add_argument(
        "--embedded-only",
        action="store_true",
        help="measure only the whole ingest of the XLSX with its served profile embedded and "
        "indexed, added to the existing result file as ingest_xlsx_embedded",
    )
    parser.add_argument(
        "--at-size-limit",
        action="store_true",
        help="measure only the whole ingest (not embedded) of an XLSX just under the spreadsheet "
        "size limit, added to the existing result file as ingest_xlsx_at_limit",
    )
    args = parser.parse_args()
    if args.at_size_limit:
        found = measure_at_size_limit(args.rows)
        _add_to_result("ingest_xlsx_at_limit", found, "--at-size-limit")
        return
    if args.embedded_only:
        with tempfile.TemporaryDirectory() as tmp:
            xlsx, _ = write_sheet(Path(tmp), args.rows)
            found = measure_ingest(xlsx, "xlsx", args.rows, embedded=True)
        _add_to_result("ingest_xlsx_embedded", found, f"--rows {args.rows} --embedded-only")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        xlsx, csv_path = write_sheet(folder, args.rows)
        result = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": f".venv/bin/python bench/large_inputs_bench.py --rows {args.rows} "
            f"--budget-mib {args.budget_mib:g}",
            "budget_mib": args.budget_mib,
            "xlsx": measure_sheet(xlsx, "xlsx", args.rows, args.budget_mib),
            "csv": measure_sheet(csv_path, "csv", args.rows, args.budget_mib),
            "nested_markdown": measure_markdown(folder),
            "ingest_xlsx": measure_ingest(xlsx, "xlsx", args.rows),
            "ingest_csv": measure_ingest(csv_path, "csv", args.rows),
        }
    kept = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    for key in ("ingest_xlsx_embedded", "ingest_xlsx_at_limit"):  # measured alone, with their dates
        if key in kept:
            result[key] = kept[key]
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
