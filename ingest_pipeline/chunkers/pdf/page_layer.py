"""The PDFium page layer the PDF chunker versions (pdf@1-4) read pages through: opening a
document, each page's lines in reading order, the fonts' weights, and the per-process memos
that let a version reuse the page analysis another version did."""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from operator import attrgetter

from ingest_pipeline.contract import ChunkPiece, password_of
from ingest_pipeline.runtime.memo import BoundedMemo

log = logging.getLogger(__name__)


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


def text_piece(text: str, box, frame, **kw) -> ChunkPiece | None:
    bbox = frame.normalize(box)
    if bbox is None:
        return ChunkPiece(text=text, bbox_reason="unresolved", **kw) if text.strip() else None
    return ChunkPiece(text=text, bbox=bbox, **kw)
