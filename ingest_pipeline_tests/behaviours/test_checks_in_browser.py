"""What a person sees in the Dagster UI after two ingests, in a real browser: a document that
failed is a failed (red) partition of the stages from its failure on, with its reason; a
document's failed check stays failed after a later passing run of another document, with its
failing pages; a partition lists its chunks in full and draws a page other than page 1; an
asset's Overview describes the asset, not the document written last.

The command line ingests (its runs land in the root's DAGSTER_HOME), then ``dagster dev`` on
the same root serves what they recorded, and chromium reads it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ingest_pipeline_tests.assets.test_flagged_page_pictures import CLIPPED_SOURCE, _headed_pdf
from ingest_pipeline_tests.behaviours.test_daemon import (
    BROWSER_ARGS,
    _finished_ingest,
    _open,
    _runs,
    _wait_text,
)
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.dagster_dev import dagster_dev, wait_for

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def _ingest(data: Path, site: Path) -> str:
    out = subprocess.run(
        [CLI, "--data", str(data), "ingest", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stdout


def _markdown(page, label: str, pattern: str) -> str:
    """The page's text once the Markdown metadata ``label`` shows ``pattern``: shown in place
    when short, else behind its row's own "[Show Markdown]" button."""
    text = _wait_text(page, label)
    if not re.search(pattern, text):
        row = page.locator("tr", has_text=label).last
        row.get_by_text("[Show Markdown]").first.click(timeout=60_000)
        text = _wait_text(page, pattern)
    return text


def _recorded(dev, batches: list[dict]) -> bool:
    """Whether the last ingest run's failures have a record run that ended (failed)."""
    from ingest_pipeline.instance.failure_records import RECORD_JOB, RECORD_OF_TAG

    if not batches:
        return False
    last = batches[0]["runId"]  # newest first
    return any(
        r["jobName"] == RECORD_JOB
        and r["status"] == "FAILURE"
        and {"key": RECORD_OF_TAG, "value": last} in r["tags"]
        for r in _runs(dev)
    )


def _document_id(data: Path, name: str) -> str:
    from ingest_pipeline.storage.catalog import query
    from ingest_pipeline.storage.lake import Lake

    rows = query(Lake(str(data / "lake")), "select distinct document_id, path from chunks").to_pylist()
    return next(r["document_id"] for r in rows if r["path"] == name)


def test_a_failed_check_stays_on_its_document_and_its_chunks_and_pages_are_readable(data_dir, tmp_path):
    from playwright.sync_api import sync_playwright

    site = install_distribution(
        tmp_path / "site", "acme_clipped", CLIPPED_SOURCE, {"clipped": "acme_clipped:ClippedChunker"}
    )
    sources = data_dir / "sources"
    (sources / "ledger.pdf").write_bytes(_headed_pdf())
    _ingest(data_dir, site)  # the clipped chunker loses words of every page: the check fails
    (sources / "notes.txt").write_text("Barley was planted early this year.\n", encoding="utf-8")
    (sources / "cut.pdf").write_bytes(_headed_pdf()[:400])  # a PDF cut short: PDFium cannot open it
    _ingest(data_dir, site)  # a later run of other documents: one passes, one fails
    ledger, notes = _document_id(data_dir, "ledger.pdf"), _document_id(data_dir, "notes.txt")
    cut = next(p.stem for p in (data_dir / "lake" / "errors" / "pages").glob("*.parquet"))
    with dagster_dev(data_dir, env={"PYTHONPATH": str(site), "INGEST_SENSOR_INTERVAL": "2"}) as dev:
        # the sensor's first look finds the three files new to it: its run ends before we look
        wait_for(lambda: _finished_ingest(dev, 3), 300, 2, "the sensor's run to end", dev)
        # its batch failed the cut PDF again, and the failed-documents sensor records that
        wait_for(lambda: _recorded(dev, _finished_ingest(dev, 3)), 300, 2, "the record run", dev)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=BROWSER_ARGS
            )
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1400})
                # the failed document's partition of the served chunk map is red, and says why
                _open(page, f"{dev.url}/assets/chunk_map_retrieval?view=partitions")
                _wait_text(page, r"Failed \(1\)\s+Materialized \(2\)")
                page.get_by_text("Materialized (2)", exact=True).click(timeout=60_000)  # only the failed
                listed = _wait_text(page, r"Failed \(1\)[\s\S]*Missing \(0\)\s+" + cut)
                assert ledger not in listed and notes not in listed
                _open(page, f"{dev.url}/assets/chunk_map_retrieval?view=partitions&partition={cut}")
                _wait_text(page, r"failed, and did not materialize this asset")
                told = _wait_text(page, r"status\s+FAILED upstream, in pages: PDFium cannot open it")
                assert told.index("FAILED upstream") < told.index("profile")
                checks = f"{dev.url}/assets/chunk_map_retrieval?view=checks"
                _open(page, f"{checks}&checkDetail=document_processed")
                named = r"document_processed\s+(document_processed\s+)?"
                _wait_text(page, named + "Failed")  # the list's entry: fails if it never says so
                page.get_by_text("Partitions", exact=True).last.click(timeout=60_000)
                _wait_text(page, r"Failed \(1\)[\s\S]*Passed \(2\)")  # the cut PDF red, the others green
                page.locator(f"text={cut} >> visible=true").last.click(timeout=60_000)
                _wait_text(page, r"failures")
                _open(page, f"{dev.url}/assets/chunk_map_default?view=checks&checkDetail=page_text_covered")
                # the check's latest state is the ledger's failure, not the later run's pass
                _wait_text(page, r"page_text_covered\s+(page_text_covered\s+)?Failed")
                page.get_by_text("Partitions", exact=True).last.click(timeout=60_000)
                _wait_text(page, r"Failed \(1\)[\s\S]*Passed \(1\)")  # the ledger red, the note green
                page.locator(f"text={ledger} >> visible=true").last.click(timeout=60_000)
                judged = _wait_text(page, r"pages_below_floor")
                if "harvest ledger confidential" not in judged:  # a long table sits behind a button
                    page.get_by_text("[Show Markdown]").first.click(timeout=60_000)
                    judged = _wait_text(page, r"harvest ledger confidential")
                assert notes not in judged.split("pages_below_floor", 1)[1]

                # every chunk of the served profile in full, and pages past the first drawn
                _open(page, f"{dev.url}/assets/chunk_map_retrieval?view=partitions&partition={ledger}")
                listing = _markdown(page, "all_chunks", r"Barley planted in the dry months\.")
                assert "Barley planted in the rains." in listing
                page.keyboard.press("Escape")
                _open(page, f"{dev.url}/assets/chunk_map_default?view=partitions&partition={ledger}")
                drawn = _markdown(page, "page_picture", r"page 2 \(flagged by page_text_covered\)")
                assert "ledger.pdf, page 1" in drawn
                images = page.locator("img[src^='data:image/png;base64,']")
                images.nth(1).wait_for(timeout=60_000)
                box = images.nth(1).bounding_box()
                assert box and box["width"] > 100 and box["height"] > 100

                # the asset's Overview describes the asset, not the document written last
                _open(page, f"{dev.url}/assets/chunk_map_retrieval?view=overview")
                about = _wait_text(page, r"each_document")
                assert "lake/chunks/retrieval/<document id>.parquet" in about
                assert "where profile = 'retrieval'" in about
                assert not re.search(r"all_chunks|chunkers_used|FAILED", about), about[-3000:]
            finally:
                browser.close()
