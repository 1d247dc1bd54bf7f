"""Small findings of the operations review: media type detection from a header inside the
first KiB, the DTD guard over a whole part, and a workbook that lost its relationships."""

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.office.safety import PackageError, open_package
from ingest_pipeline.readers import read_pages
from ingest_pipeline.samples import simple_pdf
from ingest_pipeline_tests.office_fixtures import rewrite_zip, save_docx, save_xlsx

NOTE = b"Checklist for the archive team.\nA PDF file begins with the bytes %PDF-1.7 and ends with %%EOF.\n"


def test_a_text_file_that_mentions_the_pdf_header_stays_text():
    assert mt.detect(NOTE, "checklist.txt") == mt.TEXT
    assert mt.detect(NOTE, "checklist.md") == mt.MARKDOWN
    unnamed = NOTE.replace(b" and ends with %%EOF", b"") * 3
    assert mt.detect(unnamed, "") == mt.TEXT  # no name, and it does not end like a PDF
    pages = read_pages(NOTE, mt.detect(NOTE, "checklist.txt"))
    assert pages[0].status == "read" and "%PDF-1.7" in pages[0].text


def test_a_pdf_is_still_found_by_its_header_with_or_without_junk_before_it():
    pdf = simple_pdf([["Junk before the header is allowed by PDF readers."]])
    assert mt.detect(pdf, "scan.txt") == mt.PDF  # the header at offset 0 wins over the name
    junk = b"\x00\x17binary preamble\x9c\x01" * 4 + b"\n"
    assert mt.detect(junk + pdf, "mail.bin") == mt.PDF
    assert mt.detect(junk + pdf, "") == mt.PDF
    assert mt.detect(b"\xef\xbb\xbf\n%PDF-1.4\n" + pdf[9:], "") == mt.PDF


def _docx_with(document_xml: bytes) -> bytes:
    import docx

    doc = docx.Document()
    doc.add_paragraph("Harmless text.")
    return rewrite_zip(save_docx(doc), lambda n, d: (n, document_xml if n == "word/document.xml" else d))


BOMB_BODY = (
    b'<!DOCTYPE w:document [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    b"<w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>"
)


EXTERNAL_DTD = (
    b'<!DOCTYPE w:document SYSTEM "http://example.invalid/a.dtd">'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    b"<w:p><w:r><w:t>x</w:t></w:r></w:p></w:body></w:document>"
)


@pytest.mark.parametrize("padding,body", [(300 * 1024, BOMB_BODY), (64 * 1024 - 50, EXTERNAL_DTD)])
def test_a_dtd_after_a_long_prolog_is_refused_however_the_part_is_read(padding, body):
    # 300 KiB of comment passes the old 256 KiB window; 64 KiB - 50 puts "<!DOCTYPE" across
    # the boundary of two 64 KiB blocks of the streaming reader.
    prolog = b'<?xml version="1.0" encoding="UTF-8"?>\n<!--' + b" " * padding + b"-->"
    content = _docx_with(prolog + body)
    package = open_package(content, kind="DOCX")
    with pytest.raises(PackageError, match="DTD"):
        package.xml("word/document.xml")
    with pytest.raises(PackageError, match="DTD"):
        list(open_package(content, kind="DOCX").iterparse("word/document.xml", ("{*}p",)))
    with pytest.raises(PackageError, match="DTD"):
        read_pages(content, mt.DOCX)


def _workbook() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.title = "Costs"
    wb.active.append(["item", "cost"])
    wb.active.append(["heating", 1200])
    wb.create_sheet("Staff").append(["name", "role"])
    wb["Staff"].append(["Ada", "grower"])
    wb.create_sheet("Notes").append(["Replace the vent motor before winter."])
    return save_xlsx(wb)


def test_a_workbook_without_its_relationships_part_still_reads_its_sheets():
    content = rewrite_zip(_workbook(), lambda n, d: None if n == "xl/_rels/workbook.xml.rels" else (n, d))
    pages = read_pages(content, mt.detect(content, "book.xlsx"))
    assert [p.status for p in pages] == ["read", "read", "read"]
    assert pages[0].text == "item\tcost\nheating\t1200"
    assert pages[1].text == "name\trole\nAda\tgrower"
    assert pages[2].text == "Replace the vent motor before winter."


def test_a_sheet_whose_part_cannot_be_found_fails_instead_of_reading_blank():
    def edit(name, data):
        if name == "xl/_rels/workbook.xml.rels":
            return None
        if name == "xl/worksheets/sheet2.xml":
            return "xl/worksheets/moved.xml", data
        return name, data

    pages = read_pages(rewrite_zip(_workbook(), edit), mt.XLSX)
    assert [p.status for p in pages] == ["read", "failed", "read"]
    assert "part was not found" in pages[1].reason and "relationships part is missing" in pages[1].reason
