"""What a file says about itself: a PDF's document information and its first pages' lines
with their boxes, Office core and application properties, Markdown front matter."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any
from xml.etree import ElementTree

COVER_PAGES = 2  # the pages a record is read from
_PROPERTY_BYTES = 1 << 20  # a docProps part larger than this is not read


def pdf_facts(content: bytes, password: str | None = None) -> dict[str, Any]:
    """A PDF's information dictionary and the text lines of its first pages, each with its
    box normalized to the page (origin top-left). Runs in a parse worker: PDFium is not
    thread-safe."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(content, password=password)
    try:
        metadata = {k: v for k, v in pdf.get_metadata_dict(skip_empty=True).items() if isinstance(v, str)}
        lines = []
        for index in range(min(COVER_PAGES, len(pdf))):
            page = pdf[index]
            width, height = page.get_size()
            textpage = page.get_textpage()
            for rect in range(textpage.count_rects()):
                left, bottom, right, top = textpage.get_rect(rect)
                text = textpage.get_text_bounded(left, bottom, right, top).strip()
                if text:
                    box = (left / width, 1 - top / height, right / width, 1 - bottom / height)
                    lines.append((text, index + 1, tuple(min(1.0, max(0.0, v)) for v in box)))
        return {"metadata": metadata, "lines": _joined(lines), "pages": len(pdf)}
    finally:
        pdf.close()


def _joined(rects: list[tuple[str, int, tuple]]) -> list[tuple[str, int, tuple]]:
    """Text runs on one baseline joined into a line, boxes united."""
    lines: list[tuple[str, int, tuple]] = []
    for text, page, box in rects:
        if lines:
            last_text, last_page, last = lines[-1]
            same_row = last_page == page and abs(last[1] - box[1]) < 0.004 and abs(last[3] - box[3]) < 0.004
            if same_row:
                united = (
                    min(last[0], box[0]),
                    min(last[1], box[1]),
                    max(last[2], box[2]),
                    max(last[3], box[3]),
                )
                lines[-1] = (f"{last_text} {text}", page, united)
                continue
        lines.append((text, page, box))
    return lines


_CORE = {
    "{http://purl.org/dc/elements/1.1/}title": "title",
    "{http://purl.org/dc/elements/1.1/}subject": "subject",
    "{http://purl.org/dc/elements/1.1/}creator": "creator",
    "{http://purl.org/dc/elements/1.1/}language": "language",
    "{http://purl.org/dc/terms/}created": "created",
    "{http://schemas.openxmlformats.org/package/2006/metadata/core-properties}keywords": "keywords",
    "{http://schemas.openxmlformats.org/package/2006/metadata/core-properties}category": "category",
}


def ooxml_properties(content: bytes) -> dict[str, str]:
    """Core properties (title, subject, creator, created…) and the application's Company of
    a DOCX, PPTX or XLSX; parts that are missing or oversized are left out."""
    found: dict[str, str] = {}
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except zipfile.BadZipFile:
        return found
    with archive:
        for part, read in (("docProps/core.xml", _core), ("docProps/app.xml", _app)):
            try:
                info = archive.getinfo(part)
            except KeyError:
                continue
            if info.file_size > _PROPERTY_BYTES:
                continue
            try:
                found.update(read(ElementTree.fromstring(archive.read(part))))
            except ElementTree.ParseError:
                continue
    return found


def _core(root) -> dict[str, str]:
    return {_CORE[el.tag]: el.text.strip() for el in root if el.tag in _CORE and el.text and el.text.strip()}


def _app(root) -> dict[str, str]:
    for el in root:
        if el.tag.endswith("}Company") and el.text and el.text.strip():
            return {"company": el.text.strip()}
    return {}


_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)


def front_matter(text: str) -> dict[str, str]:
    """A Markdown file's front matter as flat ``key: value`` pairs (lists and nesting are
    skipped: a record's fields are single values)."""
    found = _FRONT.match(text)
    if not found:
        return {}
    pairs = {}
    for line in found.group(1).splitlines():
        key, sep, value = line.partition(":")
        value = value.strip().strip("'\"")
        if sep and key.strip() and not key.startswith((" ", "\t", "-")) and value:
            pairs[key.strip().lower()] = value
    return pairs


def first_heading(text: str) -> str | None:
    body = text[_FRONT.match(text).end() :] if _FRONT.match(text) else text
    found = re.search(r"^\s{0,3}#{1,2}\s+(.+?)\s*#*\s*$", body[:200_000], re.M)
    return found.group(1).strip() if found else None
