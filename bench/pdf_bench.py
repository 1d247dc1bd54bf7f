"""PDF throughput: pdf@1 against PDFium's bare get_text_range, OCR seconds per page,
pdf@2 and pdf@3 pages per second, over every PDF of ../shared/corpus/files/pdf.

The floor opens each document and, per page, loads the page and its text page and calls
get_text_range. Each chunker gets the pages the readers give (the text reader, then OCR
on image-only pages, so pdf@1 disclaims those and renders only what OCR could not read).
Times are CPU seconds (time.process_time) of the best of ``--repeat`` runs, so other work
on the machine does not count; OCR is also shown in wall seconds.

    .venv/bin/python bench/pdf_bench.py [--repeat 3] [DIR]
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import time
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "files" / "pdf"


def passwords(pdf_dir: Path) -> dict[str, str]:
    facts = pdf_dir.parents[1] / "FACTS.tsv"
    out: dict[str, str] = {}
    if facts.exists():
        with open(facts, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                data = json.loads(row["facts_json"])
                if data.get("password"):
                    out[row["relpath"].rsplit("/", 1)[-1]] = data["password"]
    return out


def floor(docs) -> int:
    import pypdfium2 as pdfium

    pages = 0
    for content, password, _ in docs:
        pdf = pdfium.PdfDocument(content, password=password)
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            textpage.get_text_range()
            textpage.close()
            page.close()
            pages += 1
        pdf.close()
    return pages


def run_chunker(chunker, docs) -> int:
    from ingest_pipeline import media_types as mt
    from ingest_pipeline.contract import SourceBytes

    pieces = 0
    for content, password, pages in docs:
        for pc in chunker.chunk(SourceBytes(content, password), mt.PDF, pages):
            pieces += len(pc.pieces)
    return pieces


def best(fn, docs, repeat: int) -> tuple[float, int]:
    times = []
    result = 0
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        result = fn(docs)
        times.append(time.process_time() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("pdf_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()

    from ingest_pipeline import media_types as mt
    from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
    from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker
    from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
    from ingest_pipeline.readers import read_pages
    from ingest_pipeline.readers.base import ReadOptions
    from ingest_pipeline.readers.ocr import needs_ocr, ocr_pdf_pages
    from ingest_pipeline.readers.pdf import DocumentError, PdfTextReader

    secrets = passwords(args.pdf_dir)
    docs = []
    ocr_pages = 0
    ocr_cpu = ocr_wall = 0.0
    skipped = []
    for path in sorted(args.pdf_dir.glob("*.pdf")):
        content = path.read_bytes()
        options = ReadOptions(name=path.name, password=secrets.get(path.name))
        try:
            text_pages = PdfTextReader().read(content, mt.PDF, options)
        except DocumentError as exc:
            skipped.append(f"{path.name}: {exc}")
            continue
        todo = sum(1 for p in text_pages if needs_ocr(p))
        if todo:
            cpu, wall = time.process_time(), time.perf_counter()
            pages = ocr_pdf_pages(content, text_pages, options)
            ocr_cpu += time.process_time() - cpu
            ocr_wall += time.perf_counter() - wall
            ocr_pages += todo
        else:
            pages = read_pages(content, mt.PDF, options)
        docs.append((content, options.password, pages))

    total_pages = sum(len(p) for _, _, p in docs)
    t_floor, n = best(floor, docs, args.repeat)
    assert n == total_pages
    rows = [("get_text_range (floor)", t_floor, None)]
    for label, chunker in (
        ("pdf@1", PdfLinesChunker()),
        ("pdf@2", PdfParagraphsChunker()),
        ("pdf@3", PdfTablesChunker()),
    ):
        seconds, pieces = best(lambda d, c=chunker: run_chunker(c, d), docs, args.repeat)
        rows.append((label, seconds, pieces))

    print(f"{len(docs)} PDFs, {total_pages} pages (CPU seconds, best of {args.repeat})")
    for name in skipped:
        print(f"  not opened: {name}")
    print(f"{'':24} {'seconds':>8} {'pages/s':>9} {'vs floor':>9} {'pieces':>7}")
    for label, seconds, pieces in rows:
        rate = total_pages / seconds if seconds else float("inf")
        ratio = t_floor / seconds if seconds else float("inf")
        print(f"{label:24} {seconds:8.3f} {rate:9.1f} {ratio:9.2f} {pieces if pieces is not None else '':>7}")
    if ocr_pages:
        print(
            f"OCR: {ocr_pages} pages, {ocr_cpu / ocr_pages:.2f} CPU s/page, "
            f"{ocr_wall / ocr_pages:.2f} wall s/page (render + recognize)"
        )


if __name__ == "__main__":
    main()
