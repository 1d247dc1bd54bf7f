"""Media type detection from a file's bytes, with its name as a tie-breaker."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import PurePosixPath

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLSM = "application/vnd.ms-excel.sheet.macroEnabled.12"
CSV = "text/csv"
TSV = "text/tab-separated-values"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
PNG = "image/png"
JPEG = "image/jpeg"
TIFF = "image/tiff"
OLE2 = "application/x-ole-storage"
ZIP = "application/zip"
UNKNOWN = "application/octet-stream"

_BY_SUFFIX = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".pptx": PPTX,
    ".xlsx": XLSX,
    ".xlsm": XLSM,
    ".csv": CSV,
    ".tsv": TSV,
    ".tab": TSV,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".tif": TIFF,
    ".tiff": TIFF,
}
_OOXML_MAIN = (("word/", DOCX), ("ppt/", PPTX), ("xl/", XLSX))
PDF_HEADER_WINDOW = 1024  # PDF readers accept junk before %PDF within the first KiB


def base(media_type: str | None) -> str:
    """A media type without its parameters, lower case (``text/csv; charset=utf-8`` -> ``text/csv``)."""
    return (media_type or "").split(";", 1)[0].strip().lower()


def by_name(name: str) -> str | None:
    return _BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def detect(content: bytes, name: str = "") -> str:
    """The media type of ``content``: magic bytes first, the file name second."""
    return _classify(
        content[:PDF_HEADER_WINDOW],
        content[-PDF_HEADER_WINDOW:],
        len(content),
        lambda: io.BytesIO(content),
        name,
    )


def detect_file(path: str, name: str = "") -> str:
    """:func:`detect` for a file on disk, reading only its first and last KiB (and a zip's
    directory), so a file can be typed — and refused by size — before it is loaded."""
    return detect_stream(lambda: open(path, "rb"), os.path.getsize(path), name or path)


def detect_stream(opener, size: int, name: str = "") -> str:
    """:func:`detect` for ``size`` bytes that ``opener()`` opens as a seekable binary file
    (a local file, an object in a bucket), reading only their first and last KiB and a
    zip's directory."""
    with opener() as handle:
        head = handle.read(PDF_HEADER_WINDOW)
        handle.seek(max(size - PDF_HEADER_WINDOW, 0))
        tail = handle.read(PDF_HEADER_WINDOW)
    return _classify(head, tail, size, opener, name)


def _classify(head: bytes, tail: bytes, size: int, opener, name: str) -> str:
    named = by_name(name)
    if _is_pdf(head, tail, named):
        return PDF
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return TIFF
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return OLE2  # legacy Office or an encrypted OOXML package
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(opener, named)
    if not size:
        return named or UNKNOWN
    if _looks_textual(head):
        if named in (CSV, TSV, MARKDOWN, TEXT):
            return named
        return TEXT
    return named if named in (PDF,) else UNKNOWN


def _is_pdf(head: bytes, tail: bytes, named: str | None) -> bool:
    """A PDF starts with ``%PDF-``; PDF readers also accept junk before it within the first
    KiB, so a later header counts only for a file that is not named and shaped as text
    and that ends like a PDF (a cross-reference or an ``%%EOF`` in its last KiB)."""
    at = head.find(b"%PDF-")
    if at < 0:
        return False
    if head[:at].strip(b" \t\r\n\x00\xef\xbb\xbf") == b"":
        return True
    if named in (CSV, TSV, MARKDOWN, TEXT) and _looks_textual(head[:at]):
        return False
    return b"%%EOF" in tail or b"startxref" in tail


def _zip_kind(opener, named: str | None) -> str:
    try:
        with opener() as handle, zipfile.ZipFile(handle) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        # A damaged package: trust an OOXML name so the reader reports the damage.
        return named if named in (DOCX, PPTX, XLSX, XLSM) else ZIP
    for prefix, media in _OOXML_MAIN:
        if any(n.startswith(prefix) for n in names):
            if media == XLSX and (named == XLSM or "xl/vbaProject.bin" in names):
                return XLSM
            return media
    return ZIP


_FAMILIES = {
    TEXT: "text",
    MARKDOWN: "markdown",
    CSV: "delimited",
    TSV: "delimited",
    PDF: "pdf",
    DOCX: "office",
    PPTX: "office",
    XLSX: "spreadsheet",
    XLSM: "spreadsheet",
    OLE2: "office",
    PNG: "image",
    JPEG: "image",
    TIFF: "image",
}


def size_family(media_type: str) -> str:
    """The ``[limits.max_mib]`` key that bounds a media type's file size."""
    return _FAMILIES.get(media_type, "other")


def _looks_textual(head: bytes) -> bool:
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return True
    if b"\x00" in head:
        return False
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control <= max(1, len(head) // 100)
