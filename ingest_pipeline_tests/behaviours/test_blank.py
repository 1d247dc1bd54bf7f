"""Blank is not broken (SPEC F06): a document with nothing to chunk is a success with
zero chunks and a reason, no errors row, and the ingest report lists it apart from the
failures."""

from __future__ import annotations

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.commands.summary import summary_text
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline
from ingest_pipeline_tests.pdf_writer import PdfWriter


def blank_pdf() -> bytes:
    w = PdfWriter()
    w.page()
    w.page()
    return w.to_bytes()


def test_documents_with_nothing_to_chunk_succeed_with_zero_chunks_and_a_reason(data_dir):
    sources = data_dir / "sources"
    write(sources / "blank.txt", "  \r\n\n\t\n")
    write(sources / "blank.pdf", blank_pdf())
    write(sources / "skipped.md", "# Indice\n\n- one\n- two\n")  # markdown@1 skips an index section
    write(sources / "broken.pdf", b"%PDF-1.4 this is no PDF at all")
    write(sources / "real.txt", "Tomatoes need water twice a week.\n")
    pipeline = fresh_pipeline(data_dir)
    report = ingest(pipeline)
    paths = report.paths
    empty = {paths[d]: reason for d, reason in report.empty.items()}
    assert set(empty) == {"blank.txt", "blank.pdf", "skipped.md"}
    assert "1 blank" in empty["blank.txt"] and "2 blank" in empty["blank.pdf"]
    assert "kept nothing" in empty["skipped.md"]
    assert {paths[d] for d in report.failed} == {"broken.pdf"}  # a broken file still fails
    errors = query(pipeline.lake, "SELECT path, stage FROM errors").to_pylist()
    assert {e["path"] for e in errors} == {"broken.pdf"}
    counts = {
        r["path"]: r["n"]
        for r in query(
            pipeline.lake,
            f"SELECT path, count(*) AS n FROM chunks WHERE profile = '{report.profile}' GROUP BY path",
        ).to_pylist()
    }
    assert counts == {"real.txt": 1}
    summary = report.as_dict()
    assert summary["empty"] == 3 and summary["failed"] == 1
    assert set(summary["empty_documents"]) == {"blank.txt", "blank.pdf", "skipped.md"}
    lines = summary_text(report).plain.splitlines()
    assert [ln.split()[1] for ln in lines if ln.startswith("failed ")] == ["broken.pdf"]
    assert sorted(ln.split()[1] for ln in lines if ln.startswith("empty ")) == [
        "blank.pdf",
        "blank.txt",
        "skipped.md",
    ]

    again = ingest(fresh_pipeline(data_dir))  # nothing changed: still empty, still no error
    assert {again.paths[d] for d in again.empty} == set(empty)
    assert {again.paths[d] for d in again.failed} == {"broken.pdf"}
    assert query(pipeline.lake, "SELECT count(*) AS n FROM errors").to_pylist()[0]["n"] == 1
