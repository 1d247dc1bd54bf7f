"""Hostile and broken OOXML: zip bombs, entity expansion, encrypted and corrupt packages
end as one-line errors, quickly, for every OOXML reader and chunker."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.docx import DocxChunker
from ingest_pipeline.chunkers.pptx import PptxChunker
from ingest_pipeline.chunkers.xlsx import XlsxChunker
from ingest_pipeline.office.safety import PackageError, PackageLimits, open_package, safe_parser
from ingest_pipeline.readers import read_pages
from ingest_pipeline_tests.office_fixtures import (
    read_part,
    replace_in_part,
    rewrite_zip,
    save_docx,
    save_pptx,
    save_xlsx,
)

MiB = 1024 * 1024
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@pytest.fixture(scope="module")
def samples() -> dict[str, bytes]:
    import docx
    import openpyxl
    import pptx

    d = docx.Document()
    d.add_paragraph("hello")
    wb = openpyxl.Workbook()
    wb.active.append(["a", "b"])
    wb.active.append(["c", "d"])
    prs = pptx.Presentation()
    prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = "hello"
    return {mt.DOCX: save_docx(d), mt.XLSX: save_xlsx(wb), mt.PPTX: save_pptx(prs)}


CHUNKERS = {mt.DOCX: DocxChunker, mt.XLSX: XlsxChunker, mt.PPTX: PptxChunker}


def with_zero_part(content: bytes, size: int, name: str = "bomb/zeros.bin") -> bytes:
    out = io.BytesIO(content)
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as handle:
            block = b"\x00" * MiB
            for _ in range(size // MiB):
                handle.write(block)
    return out.getvalue()


def assert_refused(content: bytes, media_type: str, words: str, seconds: float = 5.0) -> str:
    start = time.perf_counter()
    with pytest.raises(PackageError) as info:
        read_pages(content, media_type)
    message = str(info.value)
    assert words in message and "\n" not in message, message
    assert CHUNKERS[media_type]().chunk(content, media_type, ()) == ()
    assert time.perf_counter() - start < seconds
    return message


@pytest.mark.parametrize("media_type", [mt.DOCX, mt.XLSX, mt.PPTX])
def test_zip_bomb_part_is_refused_by_every_reader(samples, media_type):
    # 130 MiB of zeros deflate to about 130 KiB: over the default 128 MiB part limit.
    content = with_zero_part(samples[media_type], 130 * MiB)
    assert len(content) < 2 * MiB
    assert_refused(content, media_type, "zip bomb guard")


def test_high_ratio_part_is_refused_and_limits_are_configurable(samples):
    content = with_zero_part(samples[mt.XLSX], 20 * MiB)
    with pytest.raises(PackageError, match="ratio"):
        open_package(content)
    small = PackageLimits(max_streamed_bytes=64 * 1024, max_ratio=1e9)
    with pytest.raises(PackageError, match="zip bomb guard"):
        open_package(with_zero_part(samples[mt.XLSX], 1 * MiB), small)


def test_a_streamed_sheet_may_inflate_past_the_ceiling_of_a_part_read_whole():
    """A sheet is streamed, its reader keeping memory flat, so a workbook under the
    spreadsheet size limit is not refused for inflating several times over; a part read
    whole keeps the tight ceiling, and the streamed one its own."""
    import openpyxl

    from ingest_pipeline.office.xlsx import load_sheets

    wb = openpyxl.Workbook()
    for i in range(4000):
        wb.active.append([f"lot {i}", i, i * 2.5])
    content = save_xlsx(wb)
    sheet = len(read_part(content, "xl/worksheets/sheet1.xml"))
    tight = PackageLimits(
        max_entry_bytes=sheet // 3, max_total_bytes=sheet // 3, max_streamed_bytes=4 * sheet
    )
    (read,) = load_sheets(content, tight)
    assert read.error is None and read.cells[(3999, 0)] == "lot 3999" and len(read.cells) == 12000
    padded = replace_in_part(content, "xl/workbook.xml", "<sheets>", "<!--" + " " * sheet + "--><sheets>")
    with pytest.raises(PackageError, match="zip bomb guard: part xl/workbook.xml inflates beyond"):
        load_sheets(padded, tight)  # read whole: the tight ceiling
    with pytest.raises(PackageError, match="zip bomb guard"):
        load_sheets(content, PackageLimits(max_streamed_bytes=sheet // 2))


def test_lying_sizes_end_as_a_clean_error(samples):
    content = with_zero_part(samples[mt.XLSX], 2 * MiB, name="xl/media/zeros.bin")
    data = bytearray(content)
    # Shrink the declared size in the central directory: inflation stops short, CRC fails.
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        info = zf.getinfo("xl/media/zeros.bin")
    index = 0
    while True:
        index = data.find(b"PK\x01\x02", index)
        name_len = int.from_bytes(data[index + 28 : index + 30], "little")
        if data[index + 46 : index + 46 + name_len] == b"xl/media/zeros.bin":
            break
        index += 4
    assert info.file_size == 2 * MiB
    data[index + 24 : index + 28] = (1024).to_bytes(4, "little")
    package = open_package(bytes(data))
    with pytest.raises(PackageError, match="corrupt package"):
        package.verify()


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(
        f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n' for i in range(1, 10)
    )
    + "]>\n"
)


def test_entity_expansion_is_never_performed():
    from lxml import etree

    doc = BILLION_LAUGHS + "<root>&lol9;</root>"
    try:
        root = etree.fromstring(doc.encode(), parser=safe_parser())
    except etree.XMLSyntaxError:
        return  # libxml2 refused the amplification outright
    assert len(etree.tostring(root)) < 1000


@pytest.mark.parametrize(
    ("media_type", "part", "anchor"),
    [
        (mt.DOCX, "word/document.xml", "<w:document"),
        (mt.XLSX, "xl/worksheets/sheet1.xml", "<worksheet"),
        (mt.PPTX, "ppt/slides/slide1.xml", "<p:sld"),
    ],
)
def test_billion_laughs_part_is_refused(samples, media_type, part, anchor):
    def edit(name, data):
        if name != part:
            return name, data
        text = data.decode("utf-8")
        text = text[text.index(anchor) :]
        return name, (BILLION_LAUGHS + text.replace(anchor, anchor, 1)).encode("utf-8")

    content = rewrite_zip(samples[media_type], edit)
    assert_refused(content, media_type, "DTD")


def test_billion_laughs_in_shared_strings_is_refused(samples):
    # openpyxl writes inline strings: add a shared string table that declares entities.
    rel = (
        '<Relationship Id="rId99" Target="sharedStrings.xml" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"/>'
    )
    content = replace_in_part(
        samples[mt.XLSX], "xl/_rels/workbook.xml.rels", "</Relationships>", rel + "</Relationships>"
    )
    sst = (
        BILLION_LAUGHS
        + '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>&lol9;</t></si></sst>'
    )
    out = io.BytesIO(content)
    with zipfile.ZipFile(out, "a") as zf:
        zf.writestr("xl/sharedStrings.xml", sst)
    assert_refused(out.getvalue(), mt.XLSX, "DTD")


def test_encrypted_and_legacy_ole2_files_get_a_clear_reason():
    encrypted = OLE2_MAGIC + b"\x00" * 504 + "EncryptedPackage".encode("utf-16-le") + b"\x00" * 64
    legacy = OLE2_MAGIC + b"\x00" * 504 + "WordDocument".encode("utf-16-le") + b"\x00" * 64
    assert mt.detect(encrypted, "secret.xlsx") == mt.OLE2
    for media_type in (mt.OLE2, mt.XLSX, mt.DOCX):
        with pytest.raises(PackageError, match=r"^encrypted OOXML \(OLE2 container\)"):
            read_pages(encrypted, media_type)
    with pytest.raises(PackageError, match="legacy binary Office"):
        read_pages(legacy, mt.OLE2)


def test_bad_crc_truncated_and_non_zip_files_get_a_clear_reason(samples):
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(samples[mt.XLSX])) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst,
    ):
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    data = bytearray(out.getvalue())
    spot = data.find(b"<sheetData>")
    data[spot + 1] ^= 0x20
    assert_refused(bytes(data), mt.XLSX, "Bad CRC-32")
    assert_refused(samples[mt.DOCX][: len(samples[mt.DOCX]) // 2], mt.DOCX, "corrupt package")
    assert_refused(b"this is not a zip at all", mt.PPTX, "no zip signature")


def test_a_malformed_slide_or_sheet_fails_its_own_page_only():
    import openpyxl
    import pptx

    prs = pptx.Presentation()
    for title in ("one", "two", "three"):
        prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = title
    deck = replace_in_part(save_pptx(prs), "ppt/slides/slide2.xml", "<a:t>two</a:t>", "<a:t>two</a:x>")
    pages = read_pages(deck, mt.PPTX)
    assert [p.status for p in pages] == ["read", "failed", "read"]
    assert "malformed XML in part ppt/slides/slide2.xml" in pages[1].reason
    answer = PptxChunker().chunk(deck, mt.PPTX, pages)
    assert [pc.page for pc in answer] == [1, 3]

    wb = openpyxl.Workbook()
    wb.active.append(["kept"])
    wb.create_sheet("Broken").append(["lost"])
    book = replace_in_part(save_xlsx(wb), "xl/worksheets/sheet2.xml", "</sheetData>", "</sheetDat>")
    pages = read_pages(book, mt.XLSX)
    assert [p.status for p in pages] == ["read", "failed"]
    assert [pc.page for pc in XlsxChunker().chunk(book, mt.XLSX, pages)] == [1]


def test_a_malformed_auxiliary_part_is_done_without(samples):
    content = replace_in_part(samples[mt.DOCX], "word/styles.xml", "</w:styles>", "</w:style>")
    pages = read_pages(content, mt.DOCX)
    assert pages[0].status == "read" and "hello" in pages[0].text
