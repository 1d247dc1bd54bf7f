"""Documents that know what they are, through the command line: records in the `documents`
view, search filtered by them, a query that names a document finding it first, results
grouped by page with the context to hand a model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline_tests.pdf_writer import annual_report_pdf as report

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def run(data: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    data = tmp_path_factory.mktemp("records") / "data"
    sources = data / "sources"
    sources.mkdir(parents=True)
    for name, organisation, year in [
        ("nw_2020.pdf", "Northwind Traders Ltd", 2020),
        ("nw_2021.pdf", "Northwind Traders Ltd", 2021),
        ("fab_2021.pdf", "Fabrikam Growers Inc.", 2021),
    ]:
        (sources / name).write_bytes(report(organisation, year))
    (sources / "notes.md").write_text("# Harvest notes\n\nCapital expenditure was discussed.\n")
    (sources / "notes.md.record.json").write_text(json.dumps({"organisation": "Fabrikam Growers Inc."}))
    out = run(data, "ingest")
    assert out.returncode == 0, out.stderr[-3000:]
    return data


def search(data: Path, *args: str) -> list[dict]:
    out = run(data, "search", *args, "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_documents_view_holds_each_record_and_where_it_was_read(root):
    out = run(
        root,
        "query",
        "select path, organisation, period, kind, read_from from documents order by path",
        "--json",
    )
    rows = {r["path"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {
        "fab_2021.pdf",
        "notes.md",
        "nw_2020.pdf",
        "nw_2021.pdf",
    }  # the sidecar is no document
    assert rows["nw_2020.pdf"]["organisation"] == "Northwind Traders Ltd"
    assert rows["nw_2020.pdf"]["period"] == "2020" and rows["nw_2020.pdf"]["kind"] == "annual report"
    where = json.loads(rows["nw_2020.pdf"]["read_from"])
    assert where["organisation"]["page"] == 1 and len(where["organisation"]["bbox"]) == 4
    assert rows["notes.md"]["organisation"] == "Fabrikam Growers Inc."
    assert json.loads(rows["notes.md"]["read_from"])["organisation"] == {"sidecar": "notes.md.record.json"}


def test_filters_keep_only_what_they_name(root):
    hits = search(
        root, "capital expenditure", "--where", "organisation = 'Northwind Traders' and period >= 2021"
    )
    assert hits and {h["path"] for h in hits} == {"nw_2021.pdf"}
    hits = search(root, "capital expenditure", "--where", "organisation = 'Fabrikam Growers' and page = 1")
    assert hits and {(h["path"], h["page"]) for h in hits} <= {("fab_2021.pdf", 1), ("notes.md", 1)}
    hostile = run(root, "search", "capital", "--where", "organisation = 'x'' or 1=1 --'", "--json")
    assert hostile.returncode == 0 and json.loads(hostile.stdout) == []
    bad = run(root, "search", "capital", "--where", "colour = 'red'")
    assert bad.returncode == 2 and "unknown field 'colour'" in bad.stderr


def test_a_query_that_names_a_document_finds_it_first(root):
    for query, expected in [
        ("Northwind Traders 2020 capital expenditure", "nw_2020.pdf"),
        ("capital expenditure of Northwind Traders in fiscal 2021", "nw_2021.pdf"),
        ("Fabrikam Growers capital expenditure", "fab_2021.pdf"),
    ]:
        hits = search(root, query, "-k", "3", "--group", "document")
        assert hits[0]["path"] in (expected, "notes.md" if "Fabrikam" in query else expected), (query, hits)
        assert hits[0]["document"]["organisation"]


def test_results_group_by_page_and_carry_context_with_provenance(root):
    hits = search(root, "capital expenditure greenhouses irrigation", "-k", "4")
    keys = [(h["document_id"], h["page"]) for h in hits]
    assert len(keys) == len(set(keys)) == 4
    assert all(
        p["page"] == h["page"] and p["document_id"] == h["document_id"] for h in hits for p in h["passages"]
    )
    hits = search(root, "Northwind capital expenditure greenhouses", "-k", "1", "--context", "page")
    part = hits[0]["context"][0]
    assert part["page"] == hits[0]["page"] and "Capital expenditure" in part["text"]
    hits = search(root, "Northwind capital expenditure greenhouses", "-k", "1", "--context", "neighbours")
    pages = [p["page"] for p in hits[0]["context"]]
    assert len(pages) >= 2 and pages == sorted(pages) and all(p["chunk_id"] for p in hits[0]["context"])


def _report_with_statements(organisation: str, year: int) -> bytes:
    """A cover, two pages of prose using every word of the test's question, and a cash flow
    statement whose rows say "purchases of property" where the prose says "capital
    expenditure": only its heading says what the question names."""
    from ingest_pipeline_tests.pdf_writer import PdfWriter

    w = PdfWriter()
    cover = w.page()
    cover.text(72, 740, f"Annual Report {year}", size=20)
    cover.text(72, 700, organisation, size=16)
    cover.text(72, 660, f"For the fiscal year ended December 31, {year}")
    for heading in ("Liquidity and Capital Resources", "Capital Resources Outlook"):
        prose = w.page()
        prose.text(72, 740, heading, size=14)
        for i, line in enumerate(
            (
                "Capital expenditure for greenhouses rose in fiscal 2021 as we added growing space.",
                "Cash flow from operations paid for all of our capital expenditure in the year.",
                "We expect capital expenditure to stay at this level while cash flow grows.",
                "The cash flow statement shows what the capital expenditure of the year was.",
            )
        ):
            prose.text(72, 710 - 16 * i, line)
    statement = w.page()
    statement.text(72, 740, "Consolidated Statements of Cash Flows", size=14)
    rows = (
        "Net income 1,204",
        "Depreciation and amortization 311",
        "Purchases of property, plant and equipment (845)",
        "Proceeds from sale of equipment 12",
        "Net cash used in investing activities (833)",
    )
    for i, line in enumerate(rows):
        statement.text(72, 710 - 16 * i, line)
    return w.to_bytes()


def test_a_query_naming_a_section_of_a_named_document_finds_that_section_s_page_first(tmp_path):
    data = tmp_path / "data"
    (data / "sources").mkdir(parents=True)
    (data / "sources" / "nw_2021.pdf").write_bytes(_report_with_statements("Northwind Traders Ltd", 2021))
    assert run(data, "ingest").returncode == 0
    query = "What was Northwind Traders' FY2021 capital expenditure? Answer from the cash flow statement."
    hits = search(data, query, "-k", "3")
    assert (hits[0]["path"], hits[0]["page"]) == ("nw_2021.pdf", 4)
    assert {2, 3} & {h["page"] for h in hits}  # the prose is found too, below the statement
    # by keywords alone the prose, which uses every word of the question, ranks first; the
    # heading the question names still puts the statement's page ahead of it
    by_words = search(data, query, "-k", "3", "--mode", "text")
    assert (by_words[0]["page"], by_words[1]["page"]) == (4, 3)
    # a sentence on the answer's form changes nothing of what is searched
    formatted = search(data, query + " Answer in USD millions, rounded to one decimal.", "-k", "3")
    assert [(h["chunk_id"], h["score"]) for h in formatted] == [(h["chunk_id"], h["score"]) for h in hits]
    assert hits[0]["header_path"][-1] == "Consolidated Statements of Cash Flows"
