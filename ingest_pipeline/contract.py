"""The chunker contract: page outputs from readers, pieces from chunkers, and boxes.

Everything here is plain data with validation at construction, so an invalid piece
can never reach the chunk map.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

BBox = tuple[float, float, float, float]
PageStatus = Literal["read", "blank", "failed", "unreadable"]
PAGE_STATUSES: frozenset[str] = frozenset({"read", "blank", "failed", "unreadable"})
BBOX_REASONS: frozenset[str] = frozenset({"no_geometry", "hidden", "unresolved"})


class ContractError(ValueError):
    """A value that breaks the chunker contract."""


class ChunkingError(Exception):
    """What a chunker raises when it cannot split a document (SPEC F09): a failure of this
    chunker on this document alone, recorded with the message as its reason ("could not be
    split: ..."), while the document's pages go to the next chunker in the profile's
    order. Any other exception a chunker raises is handled the same way but read as a
    fault, its type leading the reason."""


def validate_bbox(bbox: Sequence[float]) -> BBox:
    """Return ``bbox`` as a tuple if it is a normalized box, else raise ContractError.

    A box is ``(x0, y0, x1, y1)`` in [0, 1], origin top-left of the displayed page,
    with ``x0 < x1`` and ``y0 < y1``.
    """
    try:
        x0, y0, x1, y1 = bbox
        x0, y0, x1, y1 = float(x0), float(y0), float(x1), float(y1)
    except (TypeError, ValueError) as exc:
        raise ContractError(f"bbox must be four numbers, got {bbox!r}") from exc
    if 0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0:  # the usual case in one test (NaN fails it)
        return (x0, y0, x1, y1)
    for v in (x0, y0, x1, y1):
        if not math.isfinite(v) or v < 0.0 or v > 1.0:
            raise ContractError(f"bbox coordinates must lie in [0, 1], got {bbox!r}")
    if not (x0 < x1 and y0 < y1):
        raise ContractError(f"bbox needs x0 < x1 and y0 < y1, got {bbox!r}")
    return (x0, y0, x1, y1)


def normalize_box(box: Sequence[float], width: float, height: float) -> BBox | None:
    """Scale a box given in a ``width`` x ``height`` space to [0, 1], clamped.

    Returns None when the clamped box is degenerate (zero width or height).
    """
    if width <= 0 or height <= 0:
        return None
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    nx0, nx1 = max(0.0, x0 / width), min(1.0, x1 / width)
    ny0, ny1 = max(0.0, y0 / height), min(1.0, y1 / height)
    if not (nx0 < nx1 and ny0 < ny1):
        return None
    return validate_bbox((nx0, ny0, nx1, ny1))


@dataclass(frozen=True)
class LocatedLine:
    """A line of text a reader located on a page, in the reader's own coordinate space.

    ``box`` is ``(x0, y0, x1, y1)`` with origin top-left in a ``space`` of
    ``(width, height)`` units (pixels of an OCR image, for instance); ``(1, 1)`` means
    the box is already normalized.
    """

    text: str
    box: tuple[float, float, float, float]
    space: tuple[float, float] = (1.0, 1.0)
    confidence: float | None = None

    def bbox(self) -> BBox | None:
        """The normalized box, or None when it is degenerate."""
        return normalize_box(self.box, *self.space)


@dataclass(frozen=True)
class PageOutput:
    """What a reader says about one page (1-based) of a document.

    ``text`` is the page text when ``status`` is ``read``, ``""`` when ``blank``, and
    None when ``failed`` or ``unreadable`` (then ``reason`` says why). ``lines`` lives
    in process only: :meth:`to_row` leaves it out.
    """

    page: int
    status: PageStatus
    reader: str
    text: str | None = None
    reason: str | None = None
    width: float | None = None
    height: float | None = None
    lines: tuple[LocatedLine, ...] | None = field(default=None, compare=False)
    # The verdicts of the readers before this one down the plan's ladder, in order, as
    # (reader, status, reason): PDFium's "no text layer" before OCR's text (SPEC A05).
    earlier: tuple[tuple[str, str, str | None], ...] = field(default=(), compare=False)

    @property
    def ladder(self) -> list[dict[str, Any]]:
        """Every rung this page went through, the last one the verdict it keeps."""
        rungs = [*self.earlier, (self.reader, self.status, self.reason)]
        return [{"reader": r, "status": s, "reason": why} for r, s, why in rungs]

    def __post_init__(self) -> None:
        if self.page < 1:
            raise ContractError(f"pages are numbered from 1, got {self.page}")
        if self.status not in PAGE_STATUSES:
            raise ContractError(f"unknown page status {self.status!r}")
        if self.status == "read" and not (self.text and self.text.strip()) and not self.lines:
            raise ContractError("a read page needs text; an empty page is 'blank'")
        if self.status == "blank" and self.text not in ("", None):
            if self.text.strip():
                raise ContractError("a blank page has no text")
        if self.status in ("failed", "unreadable") and not self.reason:
            raise ContractError(f"a {self.status} page needs a reason")

    @property
    def readable(self) -> bool:
        return self.status in ("read", "blank")

    def to_row(self) -> dict[str, Any]:
        """The exported form of the page: every field but ``lines``."""
        return {
            "page": self.page,
            "status": self.status,
            "reason": self.reason,
            "reader": self.reader,
            "width": self.width,
            "height": self.height,
            "text": self.text,
        }


@dataclass(frozen=True)
class TableCell:
    """One cell of a table grid (0-based row and column of its top-left corner)."""

    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1
    bbox: BBox | None = None
    header: bool = False

    def __post_init__(self) -> None:
        if self.row < 0 or self.col < 0 or self.row_span < 1 or self.col_span < 1:
            raise ContractError(f"bad cell position or span: {self!r}")
        if self.bbox is not None:
            object.__setattr__(self, "bbox", validate_bbox(self.bbox))


@dataclass(frozen=True)
class TableLayout:
    rows: int
    cols: int
    cells: tuple[TableCell, ...]
    header_rows: int = 0


@dataclass(frozen=True)
class LayoutRegion:
    """One region of the page a piece was packed from (a paragraph, heading or table)."""

    role: str
    bbox: BBox

    def __post_init__(self) -> None:
        object.__setattr__(self, "bbox", validate_bbox(self.bbox))


# One encoder for every layout (json.dumps with options builds a new one per call).
_LAYOUT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
_ROLE_ONLY: dict[str, str] = {}  # role -> the JSON of a layout that is only that role
_ROLE_ONLY_PARSED: dict[str, Layout] = {}  # and back: such a JSON -> its layout


@dataclass(frozen=True)
class Layout:
    """How a text piece sits in its page: a role, for tables the cell grid, and for a
    piece packed from several regions their boxes (so a viewer can highlight exactly)."""

    role: str
    table: TableLayout | None = None
    regions: tuple[LayoutRegion, ...] = ()

    def to_json(self) -> str:
        if not self.regions and self.table is None:  # a line's or a paragraph's: the role alone
            known = _ROLE_ONLY.get(self.role)
            if known is None:
                known = _ROLE_ONLY[self.role] = _LAYOUT_JSON.encode({"role": self.role})
            return known
        data: dict[str, Any] = {"role": self.role}
        if self.regions:  # absent when empty, so layouts without regions serialize as before
            data["regions"] = [{"role": r.role, "bbox": list(r.bbox)} for r in self.regions]
        if self.table is not None:
            data["table"] = {
                "rows": self.table.rows,
                "cols": self.table.cols,
                "header_rows": self.table.header_rows,
                "cells": [
                    {
                        "row": c.row,
                        "col": c.col,
                        "text": c.text,
                        "row_span": c.row_span,
                        "col_span": c.col_span,
                        "bbox": list(c.bbox) if c.bbox else None,
                        "header": c.header,
                    }
                    for c in self.table.cells
                ],
            }
        return _LAYOUT_JSON.encode(data)

    @classmethod
    def from_json(cls, raw: str | None) -> Layout | None:
        if not raw:
            return None
        known = _ROLE_ONLY_PARSED.get(raw)
        if known is not None:
            return known
        data = json.loads(raw)
        if len(data) == 1 and "role" in data and len(_ROLE_ONLY_PARSED) < 64:
            # a line's or a paragraph's layout: one shared (frozen) layout per role
            known = _ROLE_ONLY_PARSED[raw] = cls(role=data["role"])
            return known
        table = data.get("table")
        return cls(
            role=data["role"],
            regions=tuple(LayoutRegion(r["role"], tuple(r["bbox"])) for r in data.get("regions") or ()),
            table=None
            if table is None
            else TableLayout(
                rows=table["rows"],
                cols=table["cols"],
                header_rows=table.get("header_rows", 0),
                cells=tuple(
                    TableCell(
                        row=c["row"],
                        col=c["col"],
                        text=c["text"],
                        row_span=c.get("row_span", 1),
                        col_span=c.get("col_span", 1),
                        bbox=tuple(c["bbox"]) if c.get("bbox") else None,
                        header=c.get("header", False),
                    )
                    for c in table["cells"]
                ),
            ),
        )


@dataclass(frozen=True)
class ChunkPiece:
    """One piece a chunker cut from a page: text xor image; a bbox xor a bbox_reason.

    ``embed_text`` is what the embedder sees when it differs from ``text`` (a heading
    path prefix, say); ``meta`` holds JSON-serializable extras (line ranges, flags).
    """

    text: str | None = None
    image: bytes | None = None
    bbox: BBox | None = None
    bbox_reason: str | None = None
    layout: Layout | None = None
    header_path: tuple[str, ...] = ()
    content_type: str | None = None
    embed_text: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        has_text = bool(self.text)
        has_image = bool(self.image)
        if has_text == has_image:
            raise ContractError("a piece has exactly one of non-empty text or image")
        if self.bbox is None and self.bbox_reason is None:
            raise ContractError("a piece without a bbox needs a bbox_reason")
        if self.bbox is not None and self.bbox_reason is not None:
            raise ContractError("a piece has a bbox or a bbox_reason, not both")
        if self.bbox_reason is not None and self.bbox_reason not in BBOX_REASONS:
            raise ContractError(
                f"bbox_reason must be one of {sorted(BBOX_REASONS)}, got {self.bbox_reason!r}"
            )
        if self.bbox is not None:
            object.__setattr__(self, "bbox", validate_bbox(self.bbox))
        if self.layout is not None and has_image:
            raise ContractError("only text pieces carry a layout")

    @property
    def is_image(self) -> bool:
        return self.image is not None


@dataclass(frozen=True)
class PageChunks:
    """A chunker's answer for one page: its pieces in reading order.

    An answer of zero pieces claims nothing: the page goes on to the next chunker in the
    profile's order, so with page@1 installed every readable, non-blank page gets a chunk
    (SPEC B36). A chunker that leaves a page's text out *on purpose* (a page of running
    lines only, a Markdown section it is told to skip) says what in ``left_out``: then its
    answer of zero pieces wins the page, and nothing of it is served."""

    page: int
    pieces: tuple[ChunkPiece, ...]
    left_out: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.page < 1:
            raise ContractError(f"pages are numbered from 1, got {self.page}")
        object.__setattr__(self, "pieces", tuple(self.pieces))
        object.__setattr__(self, "left_out", tuple(str(x) for x in self.left_out))

    @property
    def claims(self) -> bool:
        """Whether this answer wins its page: it has pieces, or says what it left out."""
        return bool(self.pieces or self.left_out)


class SourceBytes(bytes):
    """A document's bytes as a chunker receives them, with the password that opens them.

    It is ``bytes``, so a chunker that only reads bytes needs nothing new; one that reopens
    an encrypted document (the PDF chunkers) takes ``password_of(content)``. The password
    is in no repr, log line or stored row: the stage passes it from the settings' password
    list to the chunker and nowhere else.
    """

    password: str | None

    def __new__(cls, content: bytes, password: str | None = None) -> SourceBytes:
        obj = super().__new__(cls, content)
        obj.password = password
        return obj

    def __reduce__(self):  # pickled to the parse worker with its password
        return (SourceBytes, (bytes(self), self.password))


def password_of(content: bytes) -> str | None:
    """The password ``content`` carries (SourceBytes), else None."""
    return getattr(content, "password", None)


@runtime_checkable
class Chunker(Protocol):
    """What the registry needs of a chunker. ``builtin``, ``fallback``, ``opt_in``,
    ``media_types`` and ``summary`` are optional and read with getattr. ``content`` is
    the document's bytes, as SourceBytes when the pipeline calls it (with the password
    the document needs, if any)."""

    id: str
    version: int

    def chunk(
        self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]
    ) -> tuple[PageChunks, ...]: ...


@dataclass(frozen=True)
class CheckOutcome:
    """One invariant a chunker checked on its own answer for a document.

    A chunker may declare ``check_names`` (a tuple of names) and a method
    ``check(content, media_type, pages, answer) -> tuple[CheckOutcome, ...]``; its asset
    then carries one Dagster asset check per name. It may also define
    ``metrics(answer) -> dict`` whose values become materialization metadata.
    """

    name: str
    passed: bool
    severity: Literal["error", "warn"] = "error"
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
