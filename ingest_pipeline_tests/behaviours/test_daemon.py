"""The Dagster path people run: `dagster dev`, its daemon, the real sensor launching runs with
the job's real executor, and a backfill launched the way the UI launches one.

These start the webserver and the daemon on a temporary DAGSTER_HOME with the project's
dagster.yaml, drop files into the source root, and wait (bounded) until the chunks are in
DuckDB and LanceDB. Every process they start is stopped, and one left alive fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from ingest_pipeline.samples import write_samples
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.conftest import CORPUS
from ingest_pipeline_tests.dagster_dev import cmdline, dagster_dev, wait_for

# Three corpus PDFs and a deck beside the samples: the mix a new user tried (8 documents).
CORPUS_FILES = (
    "pdf/pypdf-samples__multicolumn.pdf",
    "pdf/docling__code_and_formula.pdf",
    "pdf/docling__2305.03393v1-pg9.pdf",
    "pptx/docling__docling_arch.pptx",
)

RUNS = """query Runs { runsOrError(limit: 50) { ... on Runs { results {
  runId jobName status tags { key value } } } } }"""

BACKFILL = """mutation Backfill($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  } }"""


STALL_SOURCE = '''
import time


class Stall:
    """Answers nothing, and hangs on a document that asks it to."""

    id = "stall"
    version = 1
    summary = "hangs on request"

    def chunk(self, content, media_type, pages):
        if b"PLEASE STALL" in content:
            time.sleep(900)
        return ()
'''

TERMINATE = """mutation Terminate($runId: String!) { terminateRun(runId: $runId) { __typename
  ... on PythonError { message } } }"""


def _runs(dev) -> list[dict]:
    return dev.graphql(RUNS)["runsOrError"]["results"]


def _catalog_count(data: Path, sql: str) -> int | None:
    """A count from the catalog file itself, read-only (None while it is absent or being written)."""
    import duckdb

    path = data / "catalog.duckdb"
    if not path.exists():
        return None
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        return con.execute(sql).fetchall()[0][0]
    except duckdb.Error:
        return None
    finally:
        con.close()


def _lancedb_documents(data: Path, profile: str) -> set[str]:
    import lancedb

    try:
        table = lancedb.connect(str(data / "lancedb")).open_table(f"chunks_{profile}")
    except Exception:
        return set()
    return set(table.to_arrow().column("document_id").to_pylist())


def _our_leftovers(dev) -> list[str]:
    """Run workers and parse workers still alive below dagster dev."""
    left = []
    for pid in dev.processes():
        line = cmdline(pid)
        if "execute_run" in line or "execute_step" in line or "spawn_main" in line:
            left.append(f"{pid} {line[:160]}")
    return left


def _drop(sources: Path, names) -> list[str]:
    sources.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(CORPUS / "files" / name, sources / Path(name).name)
    return [Path(n).name for n in names]


def _finished_ingest(dev, expected_runs: int = 1) -> list[dict]:
    runs = [r for r in _runs(dev) if r["jobName"] == "ingest_documents"]
    if len(runs) < expected_runs or any(r["status"] not in ("SUCCESS", "FAILURE", "CANCELED") for r in runs):
        return []
    return runs


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """dagster dev over the samples and four corpus documents, once the sensor's runs ended."""
    if not (CORPUS / "files").is_dir():
        pytest.fail("../shared/corpus is not present") if os.environ.get("CI") else pytest.skip("no corpus")
    base = tmp_path_factory.mktemp("ui")
    data = base / "data"
    sources = data / "sources"
    write_samples(str(sources))
    dropped = _drop(sources, CORPUS_FILES)
    # A third-party chunker that stalls on one document, installed as a package would be; a
    # cancelled run is not asked again here (run_retries = 0), so the give-up path shows.
    site = install_distribution(base / "site", "acme_stall", STALL_SOURCE, {"stall": "acme_stall:Stall"})
    (data / "ingest_pipeline.toml").write_text("[dagster]\nrun_retries = 0\n")
    with dagster_dev(data, env={"INGEST_SENSOR_INTERVAL": "2", "PYTHONPATH": str(site)}) as dev:
        runs = wait_for(lambda: _finished_ingest(dev), 600, 2, "the sensor's ingest runs to end", dev)
        dev.documents = 4 + len(dropped)
        dev.first_runs = runs
        yield dev


def test_the_sensor_under_dagster_dev_ingests_dropped_files_and_a_ui_backfill_adds_a_version(ui):
    dev, data = ui, ui.data
    runs = dev.first_runs
    assert {r["status"] for r in runs} == {"SUCCESS"}, runs
    tags = {t["key"]: t["value"] for t in runs[0]["tags"]}
    assert tags.get("ingest_pipeline/source") == "sensor" and "ingest_pipeline/batch" in tags
    documents = dev.documents
    assert wait_for(
        lambda: len(_lancedb_documents(data, "retrieval")) == documents,
        60,
        1,
        "every document in LanceDB",
        dev,
    )
    # The catalog run comes after the ingest run it reflects, so the file itself shows the chunks.
    assert wait_for(
        lambda: (
            _catalog_count(data, "select count(distinct document_id) from chunks where profile = 'retrieval'")
            == documents
        ),
        180,
        2,
        "the catalog to show every document",
        dev,
    )
    catalog_runs = wait_for(
        lambda: [
            r
            for r in _runs(dev)
            if r["jobName"] == "refresh_catalog" and r["status"] in ("SUCCESS", "FAILURE", "CANCELED")
        ],
        120,
        1,
        "the catalog run to end",
        dev,
    )
    assert all(r["status"] == "SUCCESS" for r in catalog_runs)
    # No run worker or parse worker outlives its run.
    assert (
        wait_for(
            lambda: not _our_leftovers(dev),
            90,
            1,
            "run and parse workers to exit",
            detail=lambda: _our_leftovers(dev),
        )
        is True
    )

    # A backfill of an opt-in chunker version over every partition, as the UI launches it.
    from ingest_pipeline.instance.home import instance_for
    from ingest_pipeline.partitions import DOCUMENTS

    keys = instance_for(str(dev.home)).get_dynamic_partitions(DOCUMENTS)
    assert len(keys) == documents
    answer = dev.graphql(
        BACKFILL,
        {
            "params": {
                "partitionNames": keys,
                "assetSelection": [{"path": ["chunks", "pdf_v2"]}],
                "fromFailure": False,
            }
        },
    )
    assert answer["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", answer
    backfill_runs = wait_for(
        lambda: [
            r
            for r in _runs(dev)
            if any(t["key"] == "dagster/backfill" for t in r["tags"])
            and r["status"] in ("SUCCESS", "FAILURE")
        ],
        420,
        2,
        "the backfill's run to end",
        dev,
    )
    assert len(backfill_runs) == 1 and backfill_runs[0]["status"] == "SUCCESS"  # one run for all partitions
    pdf2 = wait_for(
        lambda: _catalog_count(
            data, "select count(distinct document_id) from claims where chunker = 'pdf@2'"
        ),
        60,
        2,
        "pdf@2's claims in DuckDB",
        dev,
    )
    assert pdf2 == 4  # the four PDFs (three dropped, one sample) have pdf@2 claims now
    assert (
        wait_for(
            lambda: not _our_leftovers(dev),
            90,
            1,
            "the backfill's workers to exit",
            detail=lambda: _our_leftovers(dev),
        )
        is True
    )
    first_run = backfill_runs[0]["runId"]
    assert _catalog_count(
        data, f"select count(*) from claims where chunker = 'pdf@2' and run_id = '{first_run}'"
    )

    # The same backfill again with the launchpad's tag ingest/force=true recomputes every claim.
    answer = dev.graphql(
        BACKFILL,
        {
            "params": {
                "partitionNames": keys,
                "assetSelection": [{"path": ["chunks", "pdf_v2"]}],
                "fromFailure": False,
                "tags": [{"key": "ingest/force", "value": "true"}],
            }
        },
    )
    assert answer["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", answer
    forced_runs = wait_for(
        lambda: [
            r
            for r in _runs(dev)
            if r["runId"] != first_run
            and any(t["key"] == "dagster/backfill" for t in r["tags"])
            and r["status"] in ("SUCCESS", "FAILURE")
        ],
        420,
        2,
        "the forced backfill's run to end",
        dev,
    )
    assert len(forced_runs) == 1 and forced_runs[0]["status"] == "SUCCESS", forced_runs
    forced_run = forced_runs[0]["runId"]
    assert {"key": "ingest/force", "value": "true"} in forced_runs[0]["tags"]
    assert (
        _catalog_count(
            data,
            "select count(distinct document_id) from claims where chunker = 'pdf@2' "
            f"and run_id = '{forced_run}'",
        )
        == pdf2
    )  # every PDF's claims recomputed
    assert (
        wait_for(
            lambda: not _our_leftovers(dev),
            90,
            1,
            "the forced backfill's workers to exit",
            detail=lambda: _our_leftovers(dev),
        )
        is True
    )


BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _wait_text(page, pattern: str, timeout: float = 120) -> str:
    """The page's text once ``pattern`` appears in it."""
    deadline = time.monotonic() + timeout
    while True:
        text = page.inner_text("body")
        if re.search(pattern, text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not on the page after {timeout:.0f} s:\n{text[-2000:]}")
        page.wait_for_timeout(500)


def _open(page, url):
    page.goto(url, timeout=180_000)


def test_in_a_browser_every_chunker_version_is_in_the_graph_and_a_partition_shows_its_own_picture(ui):
    from playwright.sync_api import sync_playwright

    from ingest_pipeline.registry import ChunkerRegistry
    from ingest_pipeline.storage.catalog import query
    from ingest_pipeline.storage.lake import Lake

    expected = sorted(info.asset_name for info in ChunkerRegistry.discover().infos())
    lake = Lake(str(ui.data / "lake"))
    counts = {
        r["document_id"]: (r["path"], r["n"])
        for r in query(
            lake,
            "select document_id, any_value(path) as path, count(*) as n from chunks "
            "where profile = 'default' group by document_id",
        ).to_pylist()
    }
    pdf = next(d for d, (path, _) in counts.items() if path.endswith("multicolumn.pdf"))
    csv = next(d for d, (path, _) in counts.items() if path.endswith(".csv"))
    # Each partition's own metadata, told by its preview: the first words of its first chunk.
    first = {
        r["document_id"]: r["text"]
        for r in query(
            lake,
            'select document_id, arg_min(text, (page, "index")) as text from chunks '
            "where profile = 'default' and document_id in (?, ?) group by document_id",
            [pdf, csv],
        ).to_pylist()
    }
    opening = {doc: r"\W+".join(re.findall(r"\w+", text)[:4]) for doc, text in first.items()}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=BROWSER_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 3200})  # the whole group in view
            _open(page, f"{ui.url}/locations/ingest_pipeline/asset-groups/chunkers/lineage")
            for name in expected:
                page.get_by_text(name, exact=True).first.wait_for(timeout=120_000)
            graph_text = page.inner_text("body")
            assert all(name in graph_text for name in expected)
            assert page.get_by_role("button", name="Skip").count() == 0  # no community dialog over it

            page.set_viewport_size({"width": 1600, "height": 1400})
            _open(page, f"{ui.url}/assets/chunk_map_default?view=partitions&partition={pdf}")
            page.get_by_text("page_picture (chunk boxes drawn)").first.wait_for(timeout=120_000)
            text = page.inner_text("body")
            path, n = counts[pdf]
            assert re.search(rf"\bchunks\s+{n}\b", text), text[-3000:]
            # Every chunk in full, one click away: the listing opens on the partition's own chunks.
            page.get_by_text("[Show Markdown]").first.click(timeout=60_000)
            listing = _wait_text(page, opening[pdf])
            assert not re.search(opening[csv], listing)  # not another partition's
            page.keyboard.press("Escape")
            page.get_by_text("[Show Markdown]").nth(1).click(timeout=60_000)
            image = page.locator("img[src^='data:image/png;base64,']").first
            image.wait_for(timeout=60_000)
            box = image.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100
            assert f"{path}, page 1" in page.inner_text("body")

            _open(page, f"{ui.url}/assets/chunk_map_default?view=partitions&partition={csv}")
            text = _wait_text(page, r"all_chunks")
            if not re.search(opening[csv], text):  # a long listing sits behind its own button
                page.get_by_text("[Show Markdown]").first.click(timeout=60_000)
                text = _wait_text(page, opening[csv])
            assert re.search(rf"\bchunks\s+{counts[csv][1]}\b", text) and not re.search(opening[pdf], text)
            assert "page_picture" not in text  # a CSV has no page geometry: no borrowed picture
        finally:
            browser.close()


def test_terminate_stops_a_hanging_run_and_its_worker_and_the_sensor_gives_up_with_a_reason(ui):
    from ingest_pipeline.storage.catalog import query
    from ingest_pipeline.storage.lake import Lake

    dev = ui
    before = {r["runId"] for r in _runs(dev)}
    (dev.data / "sources" / "stall.txt").write_text("PLEASE STALL: a document one chunker hangs on\n")

    def hanging():
        runs = [r for r in _runs(dev) if r["runId"] not in before and r["jobName"] == "ingest_documents"]
        workers = [p for p in dev.processes() if "spawn_main" in cmdline(p)]
        return runs[0] if runs and runs[0]["status"] == "STARTED" and workers else None

    run = wait_for(hanging, 300, 1, "the run to hang in the parse worker", dev)
    time.sleep(3)
    answer = dev.graphql(TERMINATE, {"runId": run["runId"]})
    assert answer["terminateRun"]["__typename"] == "TerminateRunSuccess", answer
    wait_for(
        lambda: next(r for r in _runs(dev) if r["runId"] == run["runId"])["status"] == "CANCELED",
        60,
        1,
        "the run to be cancelled",
        dev,
    )
    assert (
        wait_for(
            lambda: not _our_leftovers(dev),
            90,
            0.5,
            "the run and its parse worker to exit",
            detail=lambda: _our_leftovers(dev),
        )
        is True
    )
    lake = Lake(str(dev.data / "lake"))
    sql = "select stage, reason from errors where path = 'stall.txt'"
    errors = wait_for(lambda: query(lake, sql).to_pylist(), 60, 2, "the sensor to give up with a reason", dev)
    assert errors[0]["stage"] == "run" and "CANCELED" in errors[0]["reason"]
    assert not [
        r
        for r in _runs(dev)
        if r["runId"] not in before and r["runId"] != run["runId"] and r["jobName"] == "ingest_documents"
    ]  # not asked again: run_retries = 0


def test_with_the_multiprocess_executor_every_step_process_exits(tmp_path):
    """One step per process (the option for machines with cores to spare): the parse worker
    is closed when its step ends, so no step process waits on it forever."""
    data = tmp_path / "data"
    write_samples(str(data / "sources"))
    for extra in ("greenhouse_handbook.md", "supplier_prices.csv"):
        (data / "sources" / extra).unlink()
    with dagster_dev(data, env={"INGEST_SENSOR_INTERVAL": "2", "INGEST_EXECUTOR": "multiprocess"}) as dev:
        runs = wait_for(lambda: _finished_ingest(dev), 900, 2, "the multiprocess ingest run to end", dev)
        assert [r["status"] for r in runs] == ["SUCCESS"], dev.log_tail()
        assert len(_lancedb_documents(data, "retrieval")) == 2
        assert (
            wait_for(
                lambda: not _our_leftovers(dev),
                90,
                1,
                "step and parse workers to exit",
                detail=lambda: _our_leftovers(dev),
            )
            is True
        )


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
