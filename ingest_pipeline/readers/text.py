"""Readers for text formats (plain text, Markdown, CSV/TSV): one page of decoded text."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers.base import ReadOptions

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode_text(content: bytes) -> tuple[str, str, str | None]:
    """Decode bytes to text: (text, encoding, note). A BOM decides; else UTF-8; else a
    UTF-16 guess from NUL bytes; else Latin-1 (cp1252), which always decodes, noted."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return content[len(bom):].decode(encoding.replace("-sig", ""), errors="replace"), encoding, None
    try:
        return content.decode("utf-8"), "utf-8", None
    except UnicodeDecodeError:
        pass
    if content[1::2].count(0) > len(content) // 4:
        try:
            return content.decode("utf-16-le"), "utf-16-le", "no BOM; decoded as UTF-16-LE"
        except UnicodeDecodeError:
            pass
    try:
        return content.decode("cp1252"), "cp1252", "not valid UTF-8; decoded as Windows-1252/Latin-1"
    except UnicodeDecodeError:
        return content.decode("latin-1"), "latin-1", "not valid UTF-8; decoded as Latin-1"


class TextReader:
    """Decodes the bytes of a text format into one page."""

    id = "text"
    version = 1
    media_types = frozenset({mt.TEXT, mt.MARKDOWN, mt.CSV, mt.TSV})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        text, encoding, note = decode_text(content)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        ref = f"{self.id}@{self.version}"
        if not text.strip():
            return (PageOutput(page=1, status="blank", reader=ref, text="", reason=note),)
        return (PageOutput(page=1, status="read", reader=ref, text=text, reason=note),)
