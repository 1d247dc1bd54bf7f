"""Readers for text formats (plain text, Markdown, CSV/TSV): one page of decoded text."""

from __future__ import annotations

import codecs

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


# Text is decoded in pieces of this many bytes: a reader holds the bytes, the pieces and
# the joined text, never several whole-file copies at once (no whole-file replace passes).
PIECE_BYTES = 1 << 20
_SNIFF_BYTES = 1 << 16


def _pieces(content: bytes, encoding: str, skip: int = 0, newlines: bool = True) -> list[str]:
    """Decode ``content[skip:]`` piece by piece, newlines normalized to ``\\n`` unless told
    not to (a CR at the end of a piece waits for the next one, so a split CRLF is one)."""
    decoder = codecs.getincrementaldecoder(encoding)("replace" if skip else "strict")
    view = memoryview(content)[skip:]
    parts: list[str] = []
    held = ""
    for start in range(0, max(len(view), 1), PIECE_BYTES):
        last = start + PIECE_BYTES >= len(view)
        piece = held + decoder.decode(view[start : start + PIECE_BYTES], final=last)
        held = ""
        if not newlines:
            parts.append(piece)
            continue
        if piece.endswith("\r") and not last:
            piece, held = piece[:-1], "\r"
        parts.append(piece.replace("\r\n", "\n").replace("\r", "\n"))
    return parts


def decode_pieces(content: bytes, newlines: bool = True) -> tuple[list[str], str, str | None]:
    """Decode bytes to text in bounded pieces, newlines normalized: (pieces, encoding, note).
    A BOM decides; else UTF-8; else a UTF-16 guess from NUL bytes; else Windows-1252, else
    Latin-1 (which always decodes), noted."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return (
                _pieces(content, encoding.replace("-sig", ""), skip=len(bom), newlines=newlines),
                encoding,
                None,
            )
    try:
        return _pieces(content, "utf-8", newlines=newlines), "utf-8", None
    except UnicodeDecodeError:
        pass
    sample = content[:_SNIFF_BYTES]
    if sample[1::2].count(0) > len(sample) // 4:
        try:
            return (
                _pieces(content, "utf-16-le", newlines=newlines),
                "utf-16-le",
                "no BOM; decoded as UTF-16-LE",
            )
        except UnicodeDecodeError:
            pass
    try:
        return (
            _pieces(content, "cp1252", newlines=newlines),
            "cp1252",
            "not valid UTF-8; decoded as Windows-1252/Latin-1",
        )
    except UnicodeDecodeError:
        return (
            _pieces(content, "latin-1", newlines=newlines),
            "latin-1",
            "not valid UTF-8; decoded as Latin-1",
        )


def decode_text(content: bytes) -> tuple[str, str, str | None]:
    """Decode bytes to text, newlines as they are: (text, encoding, note); see decode_pieces."""
    pieces, encoding, note = decode_pieces(content, newlines=False)
    return "".join(pieces), encoding, note


class TextReader:
    """Decodes the bytes of a text format into one page."""

    id = "text"
    version = 1
    media_types = frozenset({mt.TEXT, mt.MARKDOWN, mt.CSV, mt.TSV})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        pieces, _encoding, note = decode_pieces(content)
        text = "".join(pieces)
        del pieces
        ref = f"{self.id}@{self.version}"
        if not text.strip():
            return (PageOutput(page=1, status="blank", reader=ref, text="", reason=note),)
        return (PageOutput(page=1, status="read", reader=ref, text=text, reason=note),)
