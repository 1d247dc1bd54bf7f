"""The PDFium page layer the PDF chunker versions read pages through: a document opened,
each page's lines in reading order, its fonts' weights, and memos of what was found.

pdf@1 (``lines``), pdf@2 (``paragraphs``), pdf@3 (``tables``) and pdf@4 (``passages``) are
independent versions to the registry, yet each lays out the same pages from PDFium's
characters, and that is most of their work. A ``PageLayer`` opens the document, gives out
each page's lines (and, to a version that asks, what it finds on the loaded page: pdf@3's
ruled tables, the lines' font weights pdf@4's headings need) and keeps what it found in two
bounded memos, so a version reaching a page another version laid out takes a copy instead.

The memos live in an object, not in module globals, so that the sharing shows where it
happens: each PDF chunker reads through the layer it was given (``PdfChunker``'s ``layer``),
and versions share pages exactly when they hold the same layer. pdf@4 looks for ruled
tables with pdf@3's finder through its own layer (the pdf@3 it builds for them holds that
layer too), so it takes the tables pdf@3 found through the same layer; a test hands several
versions one fresh layer to watch them share, or separate layers to watch them not.

A chunker given no layer reads through its process's (``process_layer``), because that is
the only place the versions meet: the registry builds each version without arguments (an
entry point names a class) and rebuilds it to configure it, and the chunks step sends it to
the parse worker pickled, one document at a time, where every version the worker serves
runs. A layer therefore crosses processes as a reference, never with its contents: the
process's layer unpickles as the receiving process's, any other as a fresh, empty layer.
Either way the memos stay per process, bounded by ``LIMIT`` (oldest page out first), and
keyed by the bytes: a page's key is the SHA-256 of the document the layer opened and the
page's index, so only equal bytes share, and a document opened elsewhere is never kept.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from operator import attrgetter
from typing import Any

from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.contract import ChunkPiece, password_of
from ingest_pipeline.runtime.memo import BoundedMemo

log = logging.getLogger(__name__)

_WEIGHTS = "weights"  # the name the lines' font weights are kept under, per page


class PageLinesMemo(BoundedMemo):
    """Each page's extracted lines (with its frame and character count), kept by the
    ``PageLayer`` that extracted them, keyed by the document's SHA-256 and the page's index.

    pdf@1, pdf@2, pdf@3 and pdf@4 each lay out every page from PDFium's characters, and
    extracting the lines is most of their work; of the versions reading through one layer
    (in the parse worker, which serves every step of an ingest, the process's), the first
    to reach a page extracts it and the others take a copy. Equal bytes give equal lines,
    so nothing else is trusted. A copy is fresh ``Line`` objects (the layout steps set
    their role and block). Bounded at ``LIMIT`` estimated bytes, oldest page out first; a
    page no longer kept is extracted again. The default holds the pages of a batch of long
    filings."""

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
    layer, keyed by the page's memo key and the name of the finding: pdf@3's ruled
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


class PageLayer:
    """Opens documents and lays out their pages for the PDF chunkers that hold it, keeping
    each page's lines (``lines``) and the findings on a loaded page (``extras``) for the
    next version that asks. Thread-safe as its memos are; documents open under PDFIUM_LOCK."""

    def __init__(self) -> None:
        self.lines = PageLinesMemo()
        self.extras = PageExtrasMemo()
        self._digests: dict[int, bytes] = {}  # id of a document open through this layer -> its SHA-256

    def __reduce__(self):
        # what is kept belongs to this process: the process's layer stands for the receiving
        # process's, any other layer for a fresh one (a copy, too, starts empty)
        return (process_layer, ()) if self is process_layer() else (PageLayer, ())

    def clear(self) -> None:
        """Forget every kept page and finding."""
        self.lines.clear()
        self.extras.clear()

    @contextmanager
    def opened(self, content: bytes) -> Iterator[Any | None]:
        """The document under PDFIUM_LOCK (None if it will not open), closed afterwards,
        opened with the password the content carries (SourceBytes), if any; its pages are
        keyed by its bytes' SHA-256 while it is open."""
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
                self._digests[id(pdf)] = hashlib.sha256(content).digest()
            try:
                yield pdf
            finally:
                if pdf is not None:
                    self._digests.pop(id(pdf), None)
                    pdf.close()

    def page_key(self, pdf, index: int) -> tuple[bytes, int] | None:
        """The memos' key of a page of a document this layer opened (None for any other)."""
        digest = self._digests.get(id(pdf))
        return (digest, index) if digest is not None else None

    def page_lines(self, pdf, index: int, extra=None):
        """(lines in reading order, frame, char count, unit, extra) for one page, loaded once
        (lock held); ``extra(page, textpage, frame)`` adds per-page work on the same load."""
        key = self.page_key(pdf, index)
        kept = self.lines.get(key)
        if kept is not None and extra is None:  # lines alone: a kept page needs no load at all
            lines, frame, n, unit = kept
            return lines, frame, n, unit, None
        found_key = _extra_key(key, _extra_name(extra)) if extra is not None else None
        if kept is not None:
            held = self.extras.get(found_key)
            if held is not None or kept[2] <= 0:  # lines and the extra's finding both kept
                lines, frame, n, unit = kept
                return (lines, frame, n, unit, held) if n > 0 else ([], frame, 0, "none", None)
        return self._loaded_page(pdf, index, key, kept, extra, found_key)

    def line_weights(self, pdf, index: int, lines) -> list[int]:
        """Each line's font weight (of its first character) for the lines ``page_lines``
        gave: the kept ones, else the page loaded for them now (lock held) and kept."""
        import ctypes

        import pypdfium2.raw as raw

        key = self.page_key(pdf, index)
        weights = self.extras.get(_extra_key(key, _WEIGHTS))
        if weights is not None and len(weights) == len(lines):
            return weights
        page = pdf[index]
        try:
            textpage = page.get_textpage()
            try:
                return self._keep_weights(key, lines, textpage, raw, ctypes)
            finally:
                textpage.close()
        finally:
            page.close()

    def _loaded_page(self, pdf, index: int, key, kept, extra, found_key):
        """``page_lines`` of a page loaded now: its lines taken from ``kept`` or extracted
        and kept; when loaded for ``extra``, its finding and the lines' weights kept too."""
        import ctypes

        import pypdfium2.raw as raw

        from ingest_pipeline.layout.frames import page_frame

        page = pdf[index]
        try:
            frame = page_frame(page)
            textpage = page.get_textpage()
            try:
                lines, n, unit = self._lines_of(kept, key, page, textpage, frame, raw, ctypes)
                if n <= 0:
                    return [], frame, 0, "none", None
                more = None
                if extra is not None:  # loaded for a finding beyond the lines: keep it and the weights
                    more = extra(page, textpage, frame)
                    self.extras.put(found_key, more, _grid_size(more) if isinstance(more, list) else 4096)
                    self._keep_weights(key, lines, textpage, raw, ctypes)
                return lines, frame, n, unit, more
            finally:
                textpage.close()
        finally:
            page.close()

    def _lines_of(self, kept, key, page, textpage, frame, raw, ctypes) -> tuple[list, int, str]:
        """The kept copy's (lines, chars, unit), or the page's extracted now and kept."""
        from ingest_pipeline.layout.pdfium_text import extract_lines

        if kept is not None:
            lines, _frame, n, unit = kept
            return lines, n, unit
        n = textpage.count_chars()
        lines, unit = extract_lines(page, textpage, raw, ctypes, frame) if n > 0 else ([], "none")
        self.lines.put(key, lines, frame, n, unit)
        return lines, n, unit

    def _keep_weights(self, key, lines, textpage, raw, ctypes) -> list[int]:
        """Each line's font weight (of its first character), kept for pdf@4's headings."""
        weights = [font_weight(textpage, ln.first_char, raw, ctypes) for ln in lines]
        self.extras.put(_extra_key(key, _WEIGHTS), weights, 64 + 8 * len(weights))
        return weights


_PROCESS_LAYER = PageLayer()  # made on import, under the import lock: one per process


def process_layer() -> PageLayer:
    """This process's layer: the one a PDF chunker given none reads through, and what the
    process's layer stands for when a chunker holding it is unpickled here."""
    return _PROCESS_LAYER


class PdfChunker(BaseChunker):
    """A PDF chunker version: it reads its pages through ``layer``, this process's unless it
    was given one, and shares what the layer keeps with the other versions holding it."""

    def __init__(
        self, config: ChunkerConfig | Mapping[str, Any] | None = None, layer: PageLayer | None = None
    ) -> None:
        super().__init__(config)
        self.layer = process_layer() if layer is None else layer


def _extra_key(key: tuple[bytes, int] | None, name: str) -> tuple | None:
    return None if key is None else (*key, name)


def _extra_name(extra) -> str:
    return f"{getattr(extra, '__module__', '')}.{getattr(extra, '__qualname__', repr(extra))}"


def _grid_size(grids) -> int:
    return 128 + sum(
        256 + sum(64 + len(getattr(c, "text", "") or "") for c in getattr(g, "cells", ()))
        for g in grids or ()
    )


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


def text_piece(text: str, box, frame, **kw) -> ChunkPiece | None:
    bbox = frame.normalize(box)
    if bbox is None:
        return ChunkPiece(text=text, bbox_reason="unresolved", **kw) if text.strip() else None
    return ChunkPiece(text=text, bbox=bbox, **kw)
