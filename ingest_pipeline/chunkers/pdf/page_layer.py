"""PDF chunkers: pdf@1 visual lines (and rendered pages), pdf@2 paragraphs, pdf@3 ruled
tables. They reopen the bytes with PDFium (the reader's text carries no geometry)."""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from operator import attrgetter

from pydantic import Field

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.chunkers.grid import flatten_cell, pack_rows
from ingest_pipeline.contract import (
    ChunkPiece,
    Layout,
    PageChunks,
    PageOutput,
    TableCell,
    TableLayout,
    password_of,
)
from ingest_pipeline.runtime.memo import BoundedMemo

log = logging.getLogger(__name__)

_UNREAD = ("failed", "unreadable")


def chunk_dpi() -> float:
    """Rendering DPI from ``INGEST_CHUNK_DPI`` (default 120)."""
    from ingest_pipeline.layout.frames import DEFAULT_DPI, DPI_ENV

    try:
        dpi = float(os.environ.get(DPI_ENV, "") or DEFAULT_DPI)
    except ValueError:
        return DEFAULT_DPI
    return dpi if 1.0 <= dpi <= 1200.0 else DEFAULT_DPI


class PageLinesMemo(BoundedMemo):
    """Each page's extracted lines (with its frame and character count), kept by the process
    that extracted them, keyed by the document's SHA-256 and the page's index.

    pdf@1, pdf@2, pdf@3 and pdf@4 each lay out every page from PDFium's characters, and
    extracting the lines is most of their work; in the parse worker, which serves every step
    of an ingest, the first version to reach a page extracts it and the others take a copy.
    Equal bytes give equal lines, so nothing else is trusted. A copy is fresh ``Line``
    objects (the layout steps set their role and block). Bounded at ``LIMIT`` estimated
    bytes, oldest page out first; a page no longer kept is extracted again. (A 159-page
    10-K keeps about 1.5 MiB: the default holds some 6,000 pages, a batch of filings.)"""

    LIMIT = 64 * 2**20

    @staticmethod
    def _size(rows: tuple) -> int:
        return 256 + sum(120 + len(row[0]) for row in rows)

    def _cost(self, key: tuple[bytes, int], value: tuple) -> int:
        return self._size(value[0])

    def get(self, key: tuple[bytes, int] | None):
        """(lines, frame, chars, unit), the lines fresh objects, or None."""
        from ingest_pipeline.layout.lines import Line

        kept = super().get(key)
        if kept is None:
            return None
        rows, frame, chars, unit = kept
        return [Line(*row) for row in rows], frame, chars, unit

    def put(self, key: tuple[bytes, int] | None, lines, frame, chars: int, unit: str) -> None:
        if key is not None:  # a Line's fields are all scalars: a row of them is a full copy
            row = _line_row()
            super().put(key, (tuple(row(line) for line in lines), frame, chars, unit))


class PageExtrasMemo(BoundedMemo):
    """What a version finds on a loaded page besides its lines, kept like them by the
    process, keyed by the page's memo key and the name of the finding: pdf@3's ruled
    tables (``PdfTablesChunker._grids``), which pdf@4 places too, and each line's font
    weight, which pdf@4's headings need, taken while pdf@3 (or pdf@4) has the page loaded
    (pdf@1 and pdf@2, which need neither, pay nothing for them). With the lines, these
    spare pdf@4 loading the page at all. Values are given out as copies."""

    LIMIT = 16 * 2**20

    def _cost(self, key: tuple, value: tuple) -> int:
        return value[0]

    def get(self, key: tuple | None):
        kept = super().get(key)
        return None if kept is None else _copy(kept[1])

    def put(self, key: tuple | None, value, size: int) -> None:
        super().put(key, (size, _copy(value)))


def _copy(value):
    """A copy of a kept finding: a list of ints (the lines' weights, the usual value) by
    ``list``, which is what a deep copy of it comes to at a fraction of the cost."""
    if type(value) is list and all(type(v) is int for v in value):
        return list(value)
    return copy.deepcopy(value)


@functools.lru_cache(maxsize=1)
def _line_row():
    from ingest_pipeline.layout.lines import Line

    return attrgetter(*(f.name for f in fields(Line)))


PAGE_LINES = PageLinesMemo()
PAGE_EXTRAS = PageExtrasMemo()
_DIGESTS: dict[int, bytes] = {}  # id of an open document -> SHA-256 of its bytes
WEIGHTS = "weights"


def extra_key(key: tuple[bytes, int] | None, name: str) -> tuple | None:
    return None if key is None else (*key, name)


def _extra_name(extra) -> str:
    return f"{getattr(extra, '__module__', '')}.{getattr(extra, '__qualname__', repr(extra))}"


def _grid_size(grids) -> int:
    return 128 + sum(
        256 + sum(64 + len(getattr(c, "text", "") or "") for c in getattr(g, "cells", ()))
        for g in grids or ()
    )


def page_key(pdf, index: int) -> tuple[bytes, int] | None:
    """The memo's key of a page of a document ``opened_pdf`` opened (None for any other)."""
    digest = _DIGESTS.get(id(pdf))
    return (digest, index) if digest is not None else None


def _lines_of(kept, key, page, textpage, frame, raw, ctypes) -> tuple[list, int, str]:
    """The kept copy's (lines, chars, unit), or the page's extracted now and kept."""
    from ingest_pipeline.layout.pdfium_text import extract_lines

    if kept is not None:
        lines, _frame, n, unit = kept
        return lines, n, unit
    n = textpage.count_chars()
    lines, unit = extract_lines(page, textpage, raw, ctypes, frame) if n > 0 else ([], "none")
    PAGE_LINES.put(key, lines, frame, n, unit)
    return lines, n, unit


def keep_weights(key, lines, textpage, raw, ctypes) -> list[int]:
    """Each line's font weight (of its first character), kept for pdf@4's headings."""
    weights = [font_weight(textpage, ln.first_char, raw, ctypes) for ln in lines]
    PAGE_EXTRAS.put(extra_key(key, WEIGHTS), weights, 64 + 8 * len(weights))
    return weights


_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.I)


def font_weight(textpage, index: int, raw, ctypes) -> int:
    """The font weight of one character: PDFium's, raised to 700 when the font's name
    says bold (many filings' fonts report a light weight for their bold face)."""
    weight = int(raw.FPDFText_GetFontWeight(textpage.raw, index))
    if weight >= 600:
        return weight
    buffer = ctypes.create_string_buffer(128)
    flags = ctypes.c_int(0)
    n = raw.FPDFText_GetFontInfo(textpage.raw, index, buffer, 128, ctypes.byref(flags))
    name = buffer.raw[: max(n - 1, 0)].decode("latin-1", "replace") if n else ""
    return 700 if _BOLD_NAME.search(name) or flags.value & 0x40000 else weight


@contextmanager
def opened_pdf(content: bytes) -> Iterator[object | None]:
    """The document under PDFIUM_LOCK (None if it will not open), closed afterwards,
    opened with the password the content carries (SourceBytes), if any."""
    from ingest_pipeline.readers.pdf import PDFIUM_LOCK, DocumentError, open_pdf

    with PDFIUM_LOCK:
        try:
            pdf = open_pdf(content, password_of(content))
        except DocumentError:
            pdf = None
        except Exception:  # noqa: BLE001 - bytes PDFium chokes on are "not mine" (B18)
            log.debug("PDFium could not open the bytes", exc_info=True)
            pdf = None
        if pdf is not None:
            _DIGESTS[id(pdf)] = hashlib.sha256(content).digest()
        try:
            yield pdf
        finally:
            if pdf is not None:
                _DIGESTS.pop(id(pdf), None)
                pdf.close()


def page_lines(pdf, index: int, extra=None):
    """(lines in reading order, frame, char count, unit, extra) for one page, loaded once
    (lock held); ``extra(page, textpage, frame)`` adds per-page work on the same load."""
    import ctypes

    import pypdfium2.raw as raw

    from ingest_pipeline.layout.frames import page_frame

    key = page_key(pdf, index)
    kept = PAGE_LINES.get(key)
    if kept is not None and extra is None:  # lines alone: a kept page needs no load at all
        lines, frame, n, unit = kept
        return lines, frame, n, unit, None
    found_key = extra_key(key, _extra_name(extra)) if extra is not None else None
    if kept is not None:
        held = PAGE_EXTRAS.get(found_key)
        if held is not None or kept[2] <= 0:  # lines and the extra's finding both kept
            lines, frame, n, unit = kept
            return (lines, frame, n, unit, held) if n > 0 else ([], frame, 0, "none", None)
    page = pdf[index]
    try:
        frame = page_frame(page)
        textpage = page.get_textpage()
        try:
            lines, n, unit = _lines_of(kept, key, page, textpage, frame, raw, ctypes)
            if n <= 0:
                return [], frame, 0, "none", None
            more = None
            if extra is not None:  # loaded for a finding beyond the lines: keep it, and the lines' weights
                more = extra(page, textpage, frame)
                PAGE_EXTRAS.put(found_key, more, _grid_size(more) if isinstance(more, list) else 4096)
                keep_weights(key, lines, textpage, raw, ctypes)
            return lines, frame, n, unit, more
        finally:
            textpage.close()
    finally:
        page.close()


def _text_piece(text: str, box, frame, **kw) -> ChunkPiece | None:
    bbox = frame.normalize(box)
    if bbox is None:
        return ChunkPiece(text=text, bbox_reason="unresolved", **kw) if text.strip() else None
    return ChunkPiece(text=text, bbox=bbox, **kw)


class PdfLinesChunker(BaseChunker):
    """pdf@1: one chunk per visual line; failed or unreadable pages become images."""

    id = "pdf"
    version = 1
    summary = "a visual line of a PDF page, with its box; unread pages as page images"
    media_types = frozenset({mt.PDF})
    builtin = True

    def __init__(self, config=None) -> None:
        super().__init__(config)
        # Read once, when built: the worker process renders with the DPI that was hashed.
        self.render_dpi = chunk_dpi()

    def environment(self) -> dict:
        from ingest_pipeline.layout.frames import DEFAULT_DPI

        return {} if self.render_dpi == DEFAULT_DPI else {"render_dpi": self.render_dpi}

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if not pages:
            return ()
        out: list[PageChunks] = []
        with opened_pdf(content) as pdf:
            if pdf is None:
                return ()
            count = len(pdf)
            for po in pages:
                if not 1 <= po.page <= count:
                    continue
                if po.status in _UNREAD:
                    piece = self._rendered(pdf, po.page - 1)
                    if piece is not None:
                        out.append(PageChunks(page=po.page, pieces=(piece,)))
                    continue
                if po.status != "read":
                    continue  # blank: nothing, not even a picture
                try:
                    lines, frame, n, _unit, _ = page_lines(pdf, po.page - 1)
                except Exception:  # noqa: BLE001 - one broken page costs only itself
                    log.warning("pdf@1 could not lay out page %d", po.page, exc_info=True)
                    continue
                if n == 0:
                    continue  # no text layer (a scan read by OCR): lines@1's page
                pieces = []
                for ln in lines:
                    piece = _text_piece(ln.text, ln.box, frame, content_type="line")
                    if piece is not None:
                        pieces.append(piece)
                out.append(PageChunks(page=po.page, pieces=tuple(pieces)))
        return tuple(out)

    def _rendered(self, pdf, index: int) -> ChunkPiece | None:
        """The page as a PNG image piece at the chunk DPI, or None if it will not render."""
        dpi = getattr(self, "render_dpi", None) or chunk_dpi()
        try:
            image = self.render(pdf, index, dpi / 72.0)
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", optimize=False)
        except Exception:  # noqa: BLE001 - a page that will not rasterize keeps no chunk (D05)
            log.warning("pdf@1 could not render page %d", index + 1, exc_info=True)
            return None
        return ChunkPiece(
            image=buffer.getvalue(),
            bbox=(0.0, 0.0, 1.0, 1.0),
            content_type="page_image",
            meta={"dpi": dpi, "width_px": image.width, "height_px": image.height},
        )

    @staticmethod
    def render(pdf, index: int, scale: float):
        """Render one page (PDFium honours /Rotate and the crop box) to a PIL image."""
        page = pdf[index]
        try:
            bitmap = page.render(scale=scale)
            try:
                return bitmap.to_pil().copy()
            finally:
                bitmap.close()
        finally:
            page.close()


def _document_lines(pdf, pages: tuple[PageOutput, ...], extra=None):
    """Per readable page with a text layer: (PageOutput, lines, frame, extra). Pages
    that fail to lay out are skipped (they cost only themselves)."""
    found = []
    count = len(pdf)
    for po in pages:
        if po.status != "read" or not 1 <= po.page <= count:
            continue
        try:
            lines, frame, n, _unit, more = page_lines(pdf, po.page - 1, extra)
        except Exception:  # noqa: BLE001
            log.warning("layout failed on page %d", po.page, exc_info=True)
            continue
        if n:
            found.append((po, lines, frame, more))
    return found


def _paragraph_pieces(paragraphs, frame) -> list[ChunkPiece]:
    pieces = []
    for par in paragraphs:
        piece = _text_piece(
            par.text,
            par.box,
            frame,
            layout=Layout(role=par.role),
            content_type="paragraph",
            meta={"lines": len(par.lines)},
        )
        if piece is not None:
            pieces.append(piece)
    return pieces


def _running(found) -> list[set[int]]:
    from ingest_pipeline.layout.paragraphs import running_lines

    marks = running_lines([f[1] for f in found], [f[2].height for f in found])
    per_page: list[set[int]] = [set() for _ in found]
    for p, i in marks:
        per_page[p].add(i)
    return per_page


class PdfParagraphsChunker(BaseChunker):
    """pdf@2: the lines of pdf@1 grouped into paragraphs; renders nothing.

    Its walk is pdf@3's too: ``page_extra`` adds per-page work on the loaded page (pdf@3
    finds ruled tables there) and ``page_pieces`` cuts one page."""

    id = "pdf"
    version = 2
    summary = "a paragraph of a PDF page (its lines' union box); headers and footers apart"
    media_types = frozenset({mt.PDF})
    builtin = True
    opt_in = True
    page_extra = None  # or (page, textpage, frame) -> extra, called with the PDFium lock held

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if not pages:
            return ()
        with opened_pdf(content) as pdf:
            if pdf is None:
                return ()
            found = _document_lines(pdf, pages, self.page_extra)
        out = []
        for (po, lines, frame, extra), running in zip(found, _running(found)):
            out.append(PageChunks(page=po.page, pieces=tuple(self.page_pieces(lines, frame, running, extra))))
        return tuple(out)

    def page_pieces(self, lines, frame, running: set[int], extra) -> list[ChunkPiece]:
        from ingest_pipeline.layout.paragraphs import paragraphs

        return _paragraph_pieces(paragraphs(lines, frame.height, running), frame)


class TableConfig(ChunkerConfig):
    max_table_chars: int = Field(
        default=2000, ge=50, description="split a table's rows over pieces past this size"
    )


class PdfTablesChunker(PdfParagraphsChunker):
    """pdf@3: ruled tables as cell grids (header row repeated per piece), the other text
    as pdf@2 paragraphs."""

    id = "pdf"
    version = 3
    summary = "a ruled table of a PDF page as a cell grid, or a paragraph outside tables"
    Config = TableConfig

    @staticmethod
    def _grids(page, textpage, frame):
        """The page's ruled tables with their cells filled (lock held by the caller)."""
        import ctypes

        import pypdfium2.raw as raw

        from ingest_pipeline.layout.pdfium_text import page_text
        from ingest_pipeline.layout.ruled_tables import (
            fill_ruled_tables,
            find_ruled_tables,
            page_rules,
            usable_ruled_table,
        )

        try:
            grids = find_ruled_tables(page_rules(page, frame, raw, ctypes))
            if not grids:
                return []
            fill_ruled_tables(grids, textpage, frame, raw, ctypes, page_text(textpage, raw))
            return [g for g in grids if usable_ruled_table(g)]
        except Exception:  # noqa: BLE001 - a page whose rules will not parse keeps its paragraphs
            log.warning("pdf@3 could not read the rules of a page", exc_info=True)
            return []

    page_extra = _grids  # the hook pdf@2's walk calls on each loaded page

    def page_pieces(self, lines, frame, running: set[int], grids) -> list[ChunkPiece]:
        from ingest_pipeline.layout.paragraphs import paragraphs

        def inside(ln, g) -> bool:
            x0, y0, x1, y1 = g.box
            return x0 <= ln.cx <= x1 and y0 <= ln.cy <= y1

        keep_idx = [i for i, ln in enumerate(lines) if not any(inside(ln, g) for g in grids)]
        kept = [lines[i] for i in keep_idx]
        remap = {old: new for new, old in enumerate(keep_idx)}
        pars = paragraphs(kept, frame.height, {remap[i] for i in running if i in remap})
        pieces = _paragraph_pieces(pars, frame)  # one piece per paragraph
        placed = []
        for g in grids:
            placed.append((self._table_position(pars, g.box), g.box[1], self._table_pieces(g, frame)))
        # insert from the back so earlier positions stay valid; tables at one position by height
        for at, _top, table_pieces in sorted(placed, key=lambda t: (-t[0], -t[1])):
            pieces[at:at] = table_pieces
        return pieces

    @staticmethod
    def _table_position(pars, box) -> int:
        """Where a table goes among the paragraphs (in reading order): before the first
        paragraph of its column below its top, else after the last one of its column
        above it, else by height alone."""
        x0, y0, x1, _y1 = box
        column = [k for k, p in enumerate(pars) if min(p.box[2], x1) - max(p.box[0], x0) > 0]
        below = [k for k in column if pars[k].box[1] >= y0]
        if below:
            return below[0]
        if column:
            return column[-1] + 1
        return next((k for k, p in enumerate(pars) if p.box[1] >= y0), len(pars))

    def _table_pieces(self, grid, frame) -> list[ChunkPiece]:
        """One piece per run of rows that fits ``max_table_chars`` (grid.pack_rows, as the
        Office and delimited tables); every piece starts with the header row. Unlike
        grid.table_pieces, pdf@3 writes a cell's tabs and newlines as plain spaces, drops
        rows without cells and cuts a row span at a piece's end rather than keeping the
        rows it ties together: its output is kept as it was cut when pdf@3 was released."""
        rows: dict[int, list] = {}
        for cell in grid.cells:
            rows.setdefault(cell.row, []).append(cell)

        def row_text(r: int) -> str:
            texts = [""] * grid.cols
            for cell in rows.get(r, []):
                texts[cell.col] = flatten_cell(cell.text)
            return "\t".join(texts)

        header = [0] if grid.rows > 1 else []
        body = [r for r in range(grid.rows) if r not in header and r in rows]
        length = {r: len(row_text(r)) + 1 for r in header + body}
        parts = pack_rows(header, [[r] for r in body], length, self.config.max_table_chars)
        pieces = []
        for k, order in enumerate(parts):
            part = order[len(header) :]
            new_row = {r: i for i, r in enumerate(order)}
            cells = []
            boxes = []
            for r in order:
                for cell in sorted(rows.get(r, []), key=lambda c: c.col):
                    span = cell.row_span
                    last = r + span - 1
                    if r not in header and last not in part:
                        span = sum(1 for rr in range(r, last + 1) if rr in part) or 1
                    cells.append(
                        TableCell(
                            row=new_row[r],
                            col=cell.col,
                            text=cell.text,
                            row_span=min(span, len(order) - new_row[r]),
                            col_span=cell.col_span,
                            bbox=frame.normalize(cell.box),
                            header=r in header,
                        )
                    )
                    boxes.append(cell.box)
            text = "\n".join(row_text(r) for r in order)
            x0 = min(b[0] for b in boxes)
            y0 = min(b[1] for b in boxes)
            x1 = max(b[2] for b in boxes)
            y1 = max(b[3] for b in boxes)
            layout = Layout(
                role="table",
                table=TableLayout(
                    rows=len(order), cols=grid.cols, cells=tuple(cells), header_rows=len(header)
                ),
            )
            piece = _text_piece(
                text,
                (x0, y0, x1, y1),
                frame,
                layout=layout,
                content_type="table",
                meta={"table_part": k, "table_parts": len(parts), "table_rows": grid.rows},
            )
            if piece is not None:
                pieces.append(piece)
        return pieces
