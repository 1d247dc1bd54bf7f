"""Source filters ([sources] include/exclude/max_documents and ingest's options) and the
MinerU-style ``<stem>_output/auto/<stem>.md`` lookup, through the CLI, ingest and the sensor."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.settings import SourceFilter, load_settings
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, sensor_tick, temporary_instance

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def _folder(sources: Path) -> None:
    write(sources / "notes" / "a.txt", "a note about the greenhouse\n")
    write(sources / "notes" / "b.txt", "b note about the orchard\n")
    write(sources / "notes" / "c.txt", "c note about the vineyard\n")
    write(sources / "drafts" / "d.txt", "a draft nobody should read\n")
    write(sources / "table.csv", "name,amount\napples,3\n")
    # A MinerU output: the Markdown is the document; its by-products and its original are not.
    auto = sources / "mineru" / "report_output" / "auto"
    write(auto / "report.md", "# Report\n\nThe harvest was good this year.\n")
    write(auto / "report_layout.json", '{"pages": []}')
    write(auto / "report_content_list.json", "[]")
    write(auto / "report_origin.pdf", b"%PDF-1.4 not really\n")
    write(auto / "images" / "fig1.png", b"\x89PNG\r\n\x1a\n")
    write(sources / "mineru" / "report.md", "# An older copy\n")


def _paths(report: dict) -> list[str]:
    by_status = report["documents_by_status"]
    return sorted(p for status in ("new", "changed", "unchanged", "failed") for p in by_status[status])


def test_the_cli_filters_before_the_limit_and_reads_mineru_folders_as_one_document(data_dir):
    _folder(data_dir / "sources")
    args = [CLI, "--data", str(data_dir), "ingest", "--json", "--exclude", "drafts/", "--exclude", "*.csv"]
    out = subprocess.run([*args, "--max-documents", "3"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    # Sorted paths after the filters: mineru/report_output/auto/report.md, notes/a.txt, notes/b.txt.
    # (A limit before the filter would have spent a place on drafts/d.txt.)
    assert _paths(json.loads(out.stdout)) == [
        "mineru/report_output/auto/report.md",
        "notes/a.txt",
        "notes/b.txt",
    ]
    every = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert every.returncode == 0, every.stderr[-3000:]
    assert _paths(json.loads(every.stdout)) == [
        "mineru/report_output/auto/report.md",
        "notes/a.txt",
        "notes/b.txt",
        "notes/c.txt",
    ]
    bad = subprocess.run([*args, "--max-documents", "-1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "must be 0 or more" in bad.stderr


def test_the_settings_file_filters_ingest_and_the_command_line_replaces_them(data_dir):
    from ingest_pipeline.commands.ingest import ingest

    _folder(data_dir / "sources")
    write(data_dir / "ingest_pipeline.toml", '[sources]\ninclude = ["notes/"]\nmax_documents = 2\n')
    pipeline = fresh_pipeline(data_dir)
    assert pipeline.settings.sources == SourceFilter(("notes/",), (), 2)
    report = ingest(pipeline)
    assert sorted(report.paths.values()) == ["notes/a.txt", "notes/b.txt"]
    wider = pipeline.settings.sources.overridden(["*.txt"], ["notes/a.txt"], None)
    assert sorted(ingest(pipeline, sources=wider).paths.values()) == ["drafts/d.txt", "notes/b.txt"]


def test_a_limit_of_zero_takes_no_document_and_leaves_the_ingested_ones_alone(data_dir):
    """SPEC E18: 0 skips evaluation: no file is read, and nothing ingested before vanishes."""
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.documents import collect

    _folder(data_dir / "sources")
    pipeline = fresh_pipeline(data_dir)
    before = ingest(pipeline)
    assert len(before.paths) == 6 and not before.failed
    none = pipeline.settings.sources.overridden(None, None, 0)
    assert collect(pipeline.settings, [pipeline.settings.source_root], sources=none) == []
    report = ingest(pipeline, sources=none)
    assert report.paths == {} and not report.failed
    assert sorted(pipeline.store.inventory()) == sorted(before.paths)
    assert all(pipeline.store.chunk_rows("retrieval", doc) for doc in before.paths)


def test_a_negative_limit_in_the_settings_is_refused(data_dir):
    write(data_dir / "ingest_pipeline.toml", "[sources]\nmax_documents = -1\n")
    with pytest.raises(ValueError, match="0 or more"):
        load_settings(str(data_dir))


def test_the_sensor_obeys_the_source_filters(data_dir):
    _folder(data_dir / "sources")
    write(data_dir / "ingest_pipeline.toml", '[sources]\nexclude = ["drafts/"]\nmax_documents = 4\n')
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    sensor_tick(pipeline.settings, instance)
    inventory = pipeline.store.inventory()
    partitions = set(instance.get_dynamic_partitions(DOCUMENTS))
    paths = sorted(e.path for e in inventory.values() if e.document_id in partitions)
    assert paths == [
        "mineru/report_output/auto/report.md",
        "notes/a.txt",
        "notes/b.txt",
        "notes/c.txt",
    ]
