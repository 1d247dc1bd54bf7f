"""delimited@1: CSV/TSV as table chunks, parsed from the reader's decoded text.

The delimiter is the candidate (``,`` ``;`` tab ``|``) that splits the first rows into
the most consistent number of fields above one; with no such candidate (a single-column
file) it falls back to the media type's (comma for CSV, tab for TSV). Blank lines
separate tables; single-value lines above a table (titles, notes) become paragraph
chunks. Ragged rows are padded to the widest row. Quoted fields may hold newlines.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig, outside_media_types
from ingest_pipeline.chunkers.grid import Grid, GridCell, GridChecks, paragraph_piece, table_pieces
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput

_CANDIDATES = (",", "\t", ";", "|")
_SAMPLE_ROWS = 200


class DelimitedConfig(ChunkerConfig):
    max_chars: int = 2000
    header_rows: int = 1


def _rows(text: str, delimiter: str, limit: int | None = None) -> list[list[str]]:
    # The csv module refuses fields over 128 KiB by default; a field may be the whole text.
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, len(text) + 1))
    handle = io.StringIO(text)
    reader = csv.reader(handle, delimiter=delimiter, quotechar='"', doublequote=True, strict=False)
    out = []
    try:
        for row in reader:
            out.append(row)
            if limit is not None and len(out) >= limit:
                break
    except csv.Error:
        # A stray NUL or similar: keep what parsed so far, the rest one field per line.
        out.extend([line] if line else [] for line in handle.read().split("\n"))
    finally:
        csv.field_size_limit(previous)
    return out


def _separator_hint(text: str) -> tuple[str | None, str]:
    """Excel's ``sep=;`` first line: the delimiter it names, and the text without it."""
    first, _, rest = text.partition("\n")
    if len(first.strip()) == 5 and first.strip().lower().startswith("sep="):
        return first.strip()[4], rest
    return None, text


def detect_delimiter(text: str, media_type: str) -> str:
    """The delimiter giving the most consistent field count (>1) over the first rows."""
    fallback = "\t" if media_type == mt.TSV else ","
    best, best_score = fallback, 0.0
    for delimiter in sorted(_CANDIDATES, key=lambda d: d != fallback):
        rows = [r for r in _rows(text, delimiter, _SAMPLE_ROWS) if r]
        if not rows:
            continue
        counts = Counter(len(r) for r in rows)
        width, hits = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        if width < 2:
            continue
        # Ragged files: rows at least as wide as the mode count half.
        wider = sum(n for w, n in counts.items() if w > width)
        score = (hits + 0.5 * wider) / len(rows)
        if score > best_score + 1e-9:
            best, best_score = delimiter, score
    return best


class DelimitedChunker(GridChecks, BaseChunker):
    id = "delimited"
    version = 1
    summary = "a CSV/TSV table with its cells, or a line of text above one"
    media_types = frozenset({mt.CSV, mt.TSV})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True
    Config = DelimitedConfig

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if media_type not in self.media_types:
            return ()  # media types gate nothing in the registry, so a chunker checks its own
        answer = []
        for page in pages:
            if page.status != "read" or not page.text:
                continue
            pieces = self.text_pieces(page.text, media_type)
            if pieces:
                answer.append(PageChunks(page=page.page, pieces=tuple(pieces)))
        return tuple(answer)

    def text_pieces(self, text: str, media_type: str) -> list[ChunkPiece]:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        hinted, text = _separator_hint(text)
        delimiter = hinted or detect_delimiter(text, media_type)
        blocks: list[list[list[str]]] = [[]]
        for row in _rows(text, delimiter):
            if not row or all(not v.strip() for v in row):
                if blocks[-1]:
                    blocks.append([])
                continue
            blocks[-1].append(row)
        pieces: list[ChunkPiece] = []
        tables = 0
        for block in blocks:
            if not block:
                continue
            # Single-value lines above a wider row are titles or notes, not table rows.
            while len(block) > 1 and _width(block[0]) == 1 and any(_width(r) > 1 for r in block[1:]):
                piece = paragraph_piece(block[0][0].strip(), role="paragraph", meta={"delimiter": delimiter})
                if piece:
                    pieces.append(piece)
                block = block[1:]
            if len(block) == 1 and _width(block[0]) <= 1:
                piece = paragraph_piece(
                    " ".join(v for v in block[0] if v.strip()), meta={"delimiter": delimiter}
                )
                if piece:
                    pieces.append(piece)
                continue
            tables += 1
            cols = max(len(r) for r in block)
            grid = Grid(
                rows=len(block),
                cols=cols,
                header_rows=min(self.config.header_rows, len(block)),
                cells=[
                    GridCell(r, c, value)
                    for r, row in enumerate(block)
                    for c, value in enumerate(row)
                    if value != ""
                ],
            )
            pieces.extend(
                table_pieces(
                    grid, self.config.max_chars, meta={"delimiter": delimiter, "table_index": tables}
                )
            )
        return pieces


def _width(row: list[str]) -> int:
    """Fields up to the last non-empty one."""
    width = len(row)
    while width and not row[width - 1].strip():
        width -= 1
    return width
