"""Document records read from generated files, overrides, the document pass of search, and
search filters: plain functions, no pipeline."""

import json

import docx
import pytest

from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers import read_pages
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.records.describe import describe
from ingest_pipeline.records.file_metadata import ooxml_properties, pdf_facts
from ingest_pipeline.records.matching import DocumentPrior
from ingest_pipeline.records.overrides import BadOverride, apply_settings, apply_sidecar
from ingest_pipeline.retrieval.filters import FilterError, documents_matching, parse, to_lance
from ingest_pipeline.retrieval.search import group_hits
from ingest_pipeline_tests.office_fixtures import save_docx
from ingest_pipeline_tests.pdf_writer import PdfWriter


def cover_pdf(organisation: str, year: int, kind: str = "Annual Report") -> bytes:
    w = PdfWriter()
    p = w.page()
    p.text(72, 740, f"{kind} {year}", size=20)
    p.text(72, 700, organisation, size=16)
    p.text(72, 660, f"For the fiscal year ended December 31, {year}")
    p.text(72, 600, "Our greenhouses grew more tomatoes than ever and the staff planted new rows.")
    w.page().text(72, 740, "Revenue by segment was steady across the year.")
    return w.to_bytes()


def record_of(content: bytes, path: str):
    pages = read_pages(content, "application/pdf", ReadOptions(name=path))
    return describe("d1", path, "application/pdf", pages, pdf_facts(content))


def test_pdf_cover_gives_organisation_period_kind_with_their_boxes():
    record = record_of(cover_pdf("Northwind Traders Ltd", 2021), "reports/nw.pdf")
    assert record.value("organisation") == "Northwind Traders Ltd"
    assert record.value("period") == "2021"
    assert record.value("kind") == "annual report"
    assert record.value("language") == "en"
    assert record.pages == 2
    where = record.found["organisation"].where
    assert where["page"] == 1
    x0, y0, x1, y1 = where["bbox"]
    # drawn at y = 700 of 792 points from the bottom: about 0.1 of the page from the top
    assert 0.08 < y0 < y1 < 0.14 and x0 < 0.15 < x1


def test_quarter_and_file_name_periods():
    content = cover_pdf("Contoso Holdings", 2022, kind="Quarterly Report")
    record = record_of(content, "CONTOSO_2022Q3_report.pdf")
    assert record.value("kind") == "quarterly report"
    # the file name's period (how its keepers name it) comes before the cover's fiscal year
    assert record.value("period") == "2022Q3"
    assert record_of(content, "contoso.pdf").value("period") == "2022"
    assert "CONTOSO" in record.names and "Contoso Holdings" in record.names
    bare = describe("d2", "CONTOSO_2022Q3_notes.txt", "text/plain", [PageOutput(1, "read", "t", "notes")])
    assert bare.value("period") == "2022Q3" and bare.found["period"].where == {
        "file name": "CONTOSO_2022Q3_notes.txt"
    }


def test_office_core_properties_and_markdown_front_matter():
    document = docx.Document()
    document.core_properties.title = "Supply agreement"
    document.add_paragraph("This Agreement is made between the parties.")
    props = ooxml_properties(save_docx(document))
    assert props["title"] == "Supply agreement"
    record = describe(
        "d3",
        "a.docx",
        "application/x",
        [PageOutput(1, "read", "t", "This Agreement is made")],
        {"properties": props},
    )
    assert record.value("title") == "Supply agreement" and record.found["title"].where == {
        "metadata": "title"
    }
    assert record.value("kind") == "contract"
    markdown = (
        "---\ntitle: Field notes\norganisation: Tomato Growers Cooperative\ndate: 2019-05-01\n---\n"
        "# Ignored heading\ntext\n"
    )
    record = describe(
        "d4", "n.md", "text/markdown", [PageOutput(1, "read", "t", markdown)], {"markdown": markdown}
    )
    assert record.value("title") == "Field notes"
    assert record.value("organisation") == "Tomato Growers Cooperative"
    assert record.found["organisation"].where == {"front matter": "organisation"}
    assert record.value("period") == "2019"


def test_overrides_win_and_a_bad_sidecar_is_refused():
    record = describe("d5", "contracts/a.txt", "text/plain", [PageOutput(1, "read", "t", "hello there")])
    apply_settings(record, {"contracts/*": {"organisation": "Fabrikam"}})
    assert record.value("organisation") == "Fabrikam"
    assert record.found["organisation"].where == {"settings": 'documents."contracts/*".organisation'}
    apply_sidecar(record, json.dumps({"kind": "contract"}).encode(), "a.txt.record.json")
    assert record.value("kind") == "contract" and record.found["kind"].where == {
        "sidecar": "a.txt.record.json"
    }
    with pytest.raises(BadOverride, match="unknown document field"):
        apply_sidecar(record, b'{"colour": "red"}', "a.txt.record.json")


RECORDS = [
    {
        "document_id": "a18",
        "names": ["American Widget Works, Inc.", "AMERICANWIDGETWORKS"],
        "year": 2018,
        "period": "2018",
        "kind": "annual report",
        "organisation": "American Widget Works, Inc.",
    },
    {
        "document_id": "a22",
        "names": ["American Widget Works, Inc.", "AMERICANWIDGETWORKS"],
        "year": 2022,
        "period": "2022",
        "kind": "annual report",
        "organisation": "American Widget Works, Inc.",
    },
    {
        "document_id": "b22",
        "names": ["American Gadget Corporation"],
        "year": 2022,
        "period": "2022",
        "kind": "annual report",
        "organisation": "American Gadget Corporation",
    },
    {
        "document_id": "c22",
        "names": ["Zenith Foods plc"],
        "year": 2022,
        "period": "2022Q2",
        "kind": "quarterly report",
        "organisation": "Zenith Foods plc",
    },
]


def test_a_query_names_its_documents_by_organisation_and_period():
    prior = DocumentPrior(RECORDS)
    assert prior.preferred("What was American Widget Works' FY2022 revenue?") == ["a22"]
    assert prior.preferred("americanwidgetworks capital expenditure 2018") == ["a18"]
    assert prior.preferred("Zenith Foods net income in the second quarter of 2022") == ["c22"]
    # one word of a longer name names nothing; no name at all: no document pass
    assert prior.scores("American revenue in 2022") == {} and prior.scores("widget works") == {}
    assert prior.preferred("how much water do tomato plants need") == ()


def test_filters_are_parsed_never_passed_through():
    node = parse("organisation = 'American Widget Works' and period >= 2022")
    assert documents_matching(node, RECORDS) == ["a22"]
    assert documents_matching(parse("kind in ('quarterly report') or year < 2019"), RECORDS) == ["a18", "c22"]
    sql = to_lance(parse("organisation = 'Zenith Foods' and page <= 3 and role != 'x'' OR 1=1 --'"), RECORDS)
    assert sql == "((document_id IN ('c22')) AND (page <= 3)) AND (role != 'x'' OR 1=1 --')"
    for bad, message in [
        ("colour = 'red'", "unknown field"),
        ("page = 'one'", "is a number"),
        ("organisation = ", "expected a value"),
        ("organisation = 'x'; drop table chunks", "cannot read"),
        ("(year > 2000", r"expected '\)'"),
    ]:
        with pytest.raises(FilterError, match=message):
            to_lance(parse(bad), RECORDS)
    assert documents_matching(parse({"year": (">=", 2022), "kind": "annual report"}), RECORDS) == [
        "a22",
        "b22",
    ]


def test_hits_group_by_page_with_their_passages():
    hits = [
        {"chunk_id": c, "document_id": d, "path": d, "page": p, "score": s, "text": c}
        for c, d, p, s in [("x1", "a", 3, 0.9), ("x2", "b", 1, 0.8), ("x3", "a", 3, 0.7), ("x4", "a", 4, 0.6)]
    ]
    pages = group_hits(hits, "page")
    assert [(g["document_id"], g["page"]) for g in pages] == [("a", 3), ("b", 1), ("a", 4)]
    assert [p["chunk_id"] for p in pages[0]["passages"]] == ["x1", "x3"] and pages[0]["chunk_id"] == "x1"
    assert [g["document_id"] for g in group_hits(hits, "document")] == ["a", "b"]
    assert len(group_hits(hits, "none")) == 4
