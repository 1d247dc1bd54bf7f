"""The command line end to end on ../shared/corpus: real files, a subprocess per command."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline_tests.conftest import CORPUS, requires_corpus

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def cli(data: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def as_json(out: subprocess.CompletedProcess):
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("corpus") / "data"
    first = as_json(cli(data, "ingest", str(CORPUS / "files"), "--json"))
    ids = as_json(cli(data, "query", "select chunk_id from chunks order by chunk_id", "--json"))
    second = as_json(cli(data, "ingest", str(CORPUS / "files"), "--json"))
    return data, first, second, ids


@requires_corpus
def test_every_corpus_file_is_chunked_or_listed_with_a_reason(corpus_run):
    data, first, _, _ = corpus_run
    files = sorted(p for p in (CORPUS / "files").rglob("*") if p.is_file())
    assert first["documents"] == len(files) == 62
    assert first["new"] + first["failed"] == 62
    for path, errors in first["failures"].items():
        assert errors and all(e["reason"] for e in errors), path
    chunked = as_json(cli(data, "query", "select distinct path from chunks", "--json"))
    failed = set(first["failures"])
    assert {r["path"] for r in chunked} | failed == {str(p.relative_to(CORPUS)) for p in files}
    count = as_json(cli(data, "query", "select count(*) as n from chunks", "--json"))[0]["n"]
    assert count > 0


@requires_corpus
def test_a_second_ingest_gives_identical_ids_and_embeds_nothing(corpus_run):
    data, first, second, ids = corpus_run
    assert second["texts_embedded"] == 0
    assert second["unchanged"] == 62 - second["failed"]
    assert second["failed"] == first["failed"]
    assert as_json(cli(data, "query", "select chunk_id from chunks order by chunk_id", "--json")) == ids


@requires_corpus
def test_search_hits_name_document_page_and_chunker(corpus_run):
    data, *_ = corpus_run
    hits = as_json(cli(data, "search", "history of the word processor", "-k", "3", "--json"))
    assert hits and hits[0]["path"] == "files/pdf/docling__multi_page.pdf"
    for hit in hits:
        assert hit["page"] >= 1 and hit["chunker"] and hit["chunk_id"] and hit["document_id"]
    text_hits = as_json(cli(data, "search", "word processor", "--mode", "text", "--json"))
    assert text_hits and any("word processor" in h["text"].lower() for h in text_hits)
    shown = cli(data, "search", "history of the word processor", "-k", "1").stdout
    assert "docling__multi_page.pdf" in shown and "page" in shown


@requires_corpus
def test_inspect_and_chunkers_show_lineage(corpus_run):
    data, *_ = corpus_run
    doc = as_json(cli(data, "inspect", "files/pdf/docling__multi_page.pdf", "--json"))
    assert doc["source"]["sha256"] and doc["pages"] and doc["chunks"]
    assert all(c["chunker"] and c["config_hash"] and c["run_id"] for c in doc["chunks"])
    listed = as_json(cli(data, "chunkers", "--json"))
    page = next(c for c in listed if c["chunker"] == "page@1")
    assert page["fallback"] and page["default"]


def test_a_removed_file_loses_its_rows_on_the_next_ingest(tmp_path, sample_sources):
    data = sample_sources.parent
    folder = tmp_path / "drop"
    shutil.copytree(sample_sources, folder)
    cli(data, "ingest", str(folder))
    before = as_json(cli(data, "query", "select distinct path from chunks", "--json"))
    assert "drop/maintenance_notes.txt" in {r["path"] for r in before}
    (folder / "maintenance_notes.txt").unlink()
    report = as_json(cli(data, "ingest", str(folder), "--json"))
    assert report["removed_documents"] == ["drop/maintenance_notes.txt"]
    after = as_json(cli(data, "query", "select distinct path from chunks", "--json"))
    assert "drop/maintenance_notes.txt" not in {r["path"] for r in after}
    hits = as_json(cli(data, "search", "hinge squeaks spare key pesticide store", "--mode", "text", "--json"))
    assert all(h["path"] != "drop/maintenance_notes.txt" for h in hits)


@requires_corpus
def test_passwords_open_encrypted_pdfs_and_stay_out_of_the_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    secret = "openpassword"
    (data / "passwords.toml").write_text(f'"*libreoffice-writer-password.pdf" = "{secret}"\n')
    locked = CORPUS / "files" / "pdf" / "pypdf-samples__libreoffice-writer-password.pdf"
    other = CORPUS / "files" / "pdf" / "docling__2206.01062_pg3.pdf"  # needs a password nobody gave
    report = as_json(cli(data, "ingest", str(locked), str(other), "--json"))
    assert report["new"] == 1 and report["failed"] == 1
    (reason,) = [e["reason"] for e in report["failures"]["docling__2206.01062_pg3.pdf"]]
    assert "password" in reason
    rows = as_json(cli(data, "query", "select path, count(*) as n from chunks group by path", "--json"))
    assert [r["path"] for r in rows] == ["pypdf-samples__libreoffice-writer-password.pdf"] and rows[0][
        "n"
    ] > 0
    for path in (data / "lake").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    for path in (data / "dagster_home").rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert secret.encode() not in path.read_bytes(), path


@requires_corpus
def test_every_corpus_document_has_a_record_read_from_itself(corpus_run):
    data, *_ = corpus_run
    rows = as_json(
        cli(data, "query", "select path, title, kind, language, pages, read_from from documents", "--json")
    )
    records = {r["path"].split("/", 1)[1]: r for r in rows}
    read = as_json(
        cli(
            data,
            "query",
            "select distinct s.path from pages p join sources s using (document_id) "
            "where not (p.status = 'failed' and p.reason like 'cannot be opened:%')",  # no reader opened it
            "--json",
        )
    )
    assert len(read) > 40 and {r["path"].split("/", 1)[1] for r in read} <= set(records)  # each one read
    assert all(r["title"] for r in records.values())  # at worst the file name's words
    expected = {
        "pdf/docling__normal_4pages.pdf": "ko",
        "pdf/docling__right_to_left_01.pdf": "ar",
        "pdf/pypdf-samples__GeoTopo-komprimiert.pdf": "de",
        "pdf/docling__multi_page.pdf": "en",
        "docx/docling__word_sample.docx": "en",
    }
    assert {p: records[p]["language"] for p in expected} == expected
    assert {r["kind"] for p, r in records.items() if p.startswith("pptx/")} == {"slide deck"}
    assert records["xlsx/docling__xlsx_01.xlsx"]["kind"] == "workbook"
    assert records["csv/docling__csv-comma.csv"]["language"] is None  # cells are not prose
    title = json.loads(records["pdf/docling__multi_page.pdf"]["read_from"])["title"]
    assert records["pdf/docling__multi_page.pdf"]["title"] == "The Evolution of the Word Processor"
    assert title.get("page") == 1 or "metadata" in title
