"""Routes as people use them: the README's example (three folders, three treatments and a
default) through the command line, then edited, then without its catch-all; each route's own
parse limits; and the same example under ``dagster dev``, where the sensor ingests dropped
files by it and the UI shows each document's route on its partition."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus, write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
README = Path(__file__).resolve().parents[2] / "README.md"
FILES = CORPUS / "files"
# Where each corpus file goes in the example's folders.
LAYOUT = {
    "contracts/locked.pdf": "pdf/pypdf-samples__libreoffice-writer-password.pdf",  # needs its password
    "scans/scan.pdf": "pdf/docling__ocr_test.pdf",  # one image-only page
    "drafts/mixed.md": "md/docling__mixed.md",
    "notes/wiki.md": "md/docling__wiki.md",
    "table.csv": "csv/docling__csv-comma.csv",
}


def readme_routes() -> str:
    """The TOML block of the README's how-to on routes, as written there."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Treat folders differently") :]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found, "the README's routes how-to has no TOML block"
    return found.group(1)


def example_root(data: Path, layout=LAYOUT) -> None:
    write(data / "ingest_pipeline.toml", readme_routes())
    write(data / "contracts.password", "openpassword\n")
    for name, corpus_file in layout.items():
        target = data / "sources" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FILES / corpus_file, target)


def cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def served_documents(data: Path) -> set[str]:
    import lancedb

    table = lancedb.connect(str(data / "lancedb")).open_table("chunks_retrieval")
    return set(table.to_arrow().column("path").to_pylist())


def chunkers_of(pipeline, profile: str, path: str) -> set[str]:
    rows = query(
        pipeline.lake, "SELECT DISTINCT chunker FROM chunks WHERE profile = ? AND path = ?", [profile, path]
    ).to_pylist()
    return {r["chunker"] for r in rows}


def page_runs(pipeline) -> dict[str, list[str]]:
    rows = query(
        pipeline.lake,
        "SELECT s.path, p.run_id FROM pages p JOIN sources s USING (document_id) ORDER BY 1, p.page",
    ).to_pylist()
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["path"], []).append(row["run_id"])
    return out


@requires_corpus
def test_the_readme_routes_treat_three_folders_three_ways_and_an_edit_redoes_only_what_it_moves(data_dir):
    example_root(data_dir)
    report = json.loads(cli(data_dir, "ingest", "--json").stdout)
    assert report["failures"] == {} and report["skipped"] == 0, report["failures"]
    pipeline = fresh_pipeline(data_dir)
    routes = query(pipeline.lake, "SELECT path, route FROM sources ORDER BY path").to_pylist()
    assert {r["path"]: r["route"] for r in routes} == {
        "contracts/locked.pdf": "contracts",
        "drafts/mixed.md": "drafts",
        "notes/wiki.md": "default",
        "scans/scan.pdf": "scans",
        "table.csv": "default",
    }
    # contracts: opened with the route's password file, served as the default profile cuts it
    locked = chunkers_of(pipeline, "retrieval", "contracts/locked.pdf")
    assert locked and locked == chunkers_of(pipeline, "default", "contracts/locked.pdf")
    assert "pdf@4" not in locked  # the served profile's own PDF version
    # scans: read by OCR at the route's resolution
    (config,) = query(
        pipeline.lake,
        "SELECT p.reader_config FROM pages p JOIN sources s USING (document_id) "
        "WHERE s.path = 'scans/scan.pdf'",
    ).to_pylist()
    assert json.loads(config["reader_config"])["ocr_dpi"] == 300
    # drafts: cut by the other profile, never served
    assert chunkers_of(pipeline, "default", "drafts/mixed.md") == {"markdown@1"}
    assert not chunkers_of(pipeline, "retrieval", "drafts/mixed.md")
    served = {"contracts/locked.pdf", "notes/wiki.md", "scans/scan.pdf", "table.csv"}
    assert served_documents(data_dir) == served
    picture = data_dir / "locked.png"  # drawn from the bytes the route's password opens
    cli(data_dir, "show", "contracts/locked.pdf", "--page", "1", "--out", str(picture))
    assert picture.stat().st_size > 1000
    shown = cli(data_dir, "inspect", "contracts/locked.pdf", "--stage", "sources", "--no-color").stdout
    assert re.search(r"route\s+contracts", shown) and '"password_file":"contracts.password"' in shown
    pages_before = page_runs(pipeline)

    # An edit: drafts lose their route, so they take the default one and are served. Only the
    # drafts are redone, and nothing is read again.
    toml = readme_routes()
    catch_all = toml.index("[[routes]]            # no `when`")
    drafts = toml[toml.index("[[routes]]            # drafts") : catch_all]
    write(data_dir / "ingest_pipeline.toml", toml.replace(drafts, ""))
    again = json.loads(cli(data_dir, "ingest", "--json").stdout)
    moved = again["documents_by_status"]
    assert sorted(moved["new"] + moved["changed"]) == ["drafts/mixed.md"], moved
    assert page_runs(fresh_pipeline(data_dir)) == pages_before
    assert "drafts/mixed.md" in served_documents(data_dir)

    # Without the catch-all (the drafts' route back), what no route takes is skipped, with the
    # reason, and leaves search and the chunk views; the drafts leave search again.
    write(data_dir / "ingest_pipeline.toml", toml[:catch_all])
    summary = cli(data_dir, "ingest", "--no-color").stdout
    for path in ("notes/wiki.md", "table.csv"):
        said = rf"skipped\s+{re.escape(path)}\s+no route accepts it \(routes: contracts, scans, drafts;"
        assert re.search(said, summary), summary
    assert re.search(r"notes/\s+1 skipped", summary) and "0 failed  2 skipped" in summary
    assert served_documents(data_dir) == {"contracts/locked.pdf", "scans/scan.pdf"}
    remaining = query(fresh_pipeline(data_dir).lake, "SELECT DISTINCT path FROM chunks ORDER BY 1")
    assert remaining.column("path").to_pylist() == [
        "contracts/locked.pdf",
        "drafts/mixed.md",
        "scans/scan.pdf",
    ]


@requires_corpus
def test_a_route_sets_its_own_parse_limits_and_size_ceiling(data_dir):
    write(
        data_dir / "ingest_pipeline.toml",
        "\n".join(
            [
                '[[routes]]\nname = "hurried"\nwhen = { path = "hurried/" }\nparse_timeout = 0.01',
                '[[routes]]\nname = "cramped"\nwhen = { path = "cramped/" }\nparse_memory_mib = 1',
                '[[routes]]\nname = "small"\nwhen = { path = "small/" }\nmax_mib = 0.01',
                '[[routes]]\nname = "rest"',
            ]
        ),
    )
    pdf = FILES / "pdf" / "docling__code_and_formula.pdf"
    for folder in ("hurried", "cramped", "small", "plain"):
        (data_dir / "sources" / folder).mkdir()
        shutil.copy(pdf, data_dir / "sources" / folder / "paper.pdf")
    report = json.loads(cli(data_dir, "ingest", "--json").stdout)
    reasons = {path: [f["reason"] for f in errs] for path, errs in report["failures"].items()}
    assert sorted(reasons) == ["cramped/paper.pdf", "hurried/paper.pdf", "small/paper.pdf"], reasons
    assert "took longer than 0.01 s" in reasons["hurried/paper.pdf"][0]
    assert "limit of 1 MiB" in reasons["cramped/paper.pdf"][0]
    assert "over route 'small''s limit of 0.01 MiB" in reasons["small/paper.pdf"][0]
    # the same file under the default limits, read by the same workers after the others
    assert report["documents_by_status"]["new"] == ["plain/paper.pdf"]


@pytest.mark.skipif(not (FILES).is_dir(), reason="no corpus")
def test_the_sensor_under_dagster_dev_follows_the_readme_routes_and_partitions_show_them(tmp_path):
    from ingest_pipeline_tests.behaviours.test_daemon import _finished_ingest, _lancedb_documents
    from ingest_pipeline_tests.dagster_dev import dagster_dev, wait_for

    data = tmp_path / "data"
    (data / "sources").mkdir(parents=True)
    example_root(data, {})
    with dagster_dev(data, env={"INGEST_SENSOR_INTERVAL": "2"}) as dev:
        layout = {k: v for k, v in LAYOUT.items() if not k.startswith("scans/")}  # no OCR here
        example_root(data, layout)
        runs = wait_for(lambda: _finished_ingest(dev), 600, 2, "the sensor's ingest runs to end", dev)
        assert {r["status"] for r in runs} == {"SUCCESS"}, runs
        pipeline = fresh_pipeline(data)
        rows = query(pipeline.lake, "SELECT path, document_id FROM sources").to_pylist()
        ids = {r["path"]: r["document_id"] for r in rows}
        served = {ids[p] for p in layout if p != "drafts/mixed.md"}
        assert wait_for(
            lambda: _lancedb_documents(data, "retrieval") == served,
            60,
            1,
            "the served documents in LanceDB",
            dev,
        )
        assert chunkers_of(pipeline, "retrieval", "contracts/locked.pdf") == chunkers_of(
            pipeline, "default", "contracts/locked.pdf"
        )
        answer = dev.graphql(PARTITION_METADATA, {"partition": ids["drafts/mixed.md"]})
        entries = answer["assetOrError"]["assetObservations"][0]["metadataEntries"]
        assert {"label": "route", "text": "drafts"} in [
            {"label": e["label"], "text": e.get("text")} for e in entries
        ]


# The partition's story: the latest observation of its ``sources`` partition.
PARTITION_METADATA = """query Meta($partition: String!) {
  assetOrError(assetKey: {path: ["sources"]}) { ... on Asset {
    assetObservations(partitions: [$partition], limit: 1) {
      metadataEntries { label ... on TextMetadataEntry { text } }
    } } } }"""
