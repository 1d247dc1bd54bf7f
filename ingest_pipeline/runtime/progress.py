"""Per-document progress while a run executes in process.

The asset loop reports each document's outcome here as it finishes (``report``); a
listener installed with ``listening`` receives them. Runs launched by a daemon or the UI
have no listener, so reporting costs nothing there. ``StageBoard`` turns the events into
the per-stage counts the command line draws (Reading → Chunking → Embedding → Indexing,
then any other stage in the order it is first seen).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

STAGE_ORDER = ("Reading", "Chunking", "Embedding", "Indexing")
# What an asset key starts with -> its kind and the column it counts in (chunk_map before chunks).
KINDS = (
    ("chunk_map", "Chunking"),
    ("chunks", "Chunking"),
    ("embeddings", "Embedding"),
    ("lancedb", "Indexing"),
    ("sources", "Reading"),
    ("pages", "Reading"),
)


@dataclass(frozen=True)
class DocumentEvent:
    """One document finished one asset: ``status`` is new | changed | unchanged | failed | skipped."""

    asset: str  # the asset key as a string, e.g. "chunks/pdf_v1"
    document: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)


_listeners: list[Callable[[DocumentEvent], None]] = []
_lock = threading.Lock()


def report(asset: str, outcome: Any) -> None:
    """Tell the listeners (if any) that ``outcome.document`` finished ``asset``."""
    if not _listeners:
        return
    detail = dict(outcome.detail or {})
    # a stage that only saw what a failed stage left (a verdict page, A13) shows as skipped
    status = "skipped" if detail.get("failed_upstream") and outcome.status != "failed" else outcome.status
    event = DocumentEvent(asset, outcome.document, status, detail)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(event)


@contextmanager
def listening(listener: Callable[[DocumentEvent], None]) -> Iterator[None]:
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def kind_of(asset: str) -> str:
    """sources | pages | chunks | chunk_map | embeddings | lancedb, or the asset's own first word."""
    for prefix, _ in KINDS:
        if asset == prefix or asset.startswith((prefix + "/", prefix + "_")):
            return prefix
    return asset.split("/", 1)[0]


def column_of(asset: str) -> str:
    kind = kind_of(asset)
    return dict(KINDS).get(kind, kind.replace("_", " ").capitalize())


@dataclass
class Column:
    name: str
    assets: set[str] = field(default_factory=set)  # the assets a document must finish to be done here
    seen: dict[str, dict[str, str]] = field(default_factory=dict)  # document -> asset -> status
    done: dict[str, str] = field(
        default_factory=dict
    )  # document -> new | changed | cached | failed | skipped
    warnings: int = 0  # chunker failures: the document goes on with the next chunker
    texts_embedded: int = 0
    texts_cached: int = 0
    texts: dict[str, list[int]] = field(default_factory=dict)  # document -> [embedded, cached]

    def count(self, status: str) -> int:
        return sum(1 for s in self.done.values() if s == status)


class StageBoard:
    """Per-stage counts of documents (and their pages) as their events arrive.

    A document is done in a column once it finished every asset of that column the job
    runs; it is failed there at once when any of them fails. Chunker failures are counted
    as warnings: the chunk map hands their pages to the next chunker in order.
    """

    def __init__(
        self,
        total: int,
        assets: Sequence[str] = (),
        paths: dict[str, str] | None = None,
        column_order: Sequence[str] = (),
    ) -> None:
        self.total = total
        self.column_order = tuple(column_order)  # listed columns first, in this order (E19)
        self.paths = dict(paths or {})  # document id -> path, for display
        self.columns: dict[str, Column] = {}
        self.pages: dict[str, int] = {}
        self.origin: dict[str, str] = {}  # document -> its sources status: new | changed | unchanged
        self.lock = threading.RLock()
        for name in STAGE_ORDER:
            self.columns[name] = Column(name)
        for asset in assets:
            self._column(asset).assets.add(asset)

    def _column(self, asset: str) -> Column:
        name = column_of(asset)
        if name not in self.columns:
            self.columns[name] = Column(name)
        return self.columns[name]

    def ordered(self) -> list[Column]:
        """The columns with work: those ``column_order`` lists first, in its order, then the
        others as found (the seed's four first); an empty ``column_order`` keeps that order."""
        present = [c for c in self.columns.values() if c.assets or c.seen]
        rank = {name: i for i, name in enumerate(self.column_order)}
        return sorted(present, key=lambda c: rank.get(c.name, len(rank)))

    def add(self, event: DocumentEvent) -> tuple[Column, str] | None:
        """Record one event; returns the column and the document's status there when the
        document has just become done in that column (or just failed)."""
        with self.lock:
            column = self._column(event.asset)
            column.assets.add(event.asset)
            if event.asset == "sources":
                self.origin[event.document] = event.status
            if event.asset == "pages" and event.status != "failed":
                self.pages[event.document] = int(event.detail.get("pages", 0) or 0)
            if kind_of(event.asset) == "embeddings":
                embedded, cached = (
                    int(event.detail.get("embedded", 0) or 0),
                    int(event.detail.get("cached", 0) or 0),
                )
                column.texts_embedded += embedded
                column.texts_cached += cached
                mine = column.texts.setdefault(event.document, [0, 0])
                mine[0] += embedded
                mine[1] += cached
            statuses = column.seen.setdefault(event.document, {})
            statuses[event.asset] = event.status
            if event.document in column.done:
                return None
            if event.status == "failed" and kind_of(event.asset) == "chunks":
                column.warnings += 1
            elif event.status == "failed":
                column.done[event.document] = "failed"
                return column, "failed"
            if not column.assets <= set(statuses):
                return None
            values = set(statuses.values()) - {"failed"}  # left: chunker failures, already counted
            computed = values - {"unchanged", "skipped"}  # new, changed, or a stage's own word (e.g. empty)
            if values == {"skipped"}:
                state = "skipped"
            elif computed:
                # recomputed: new only for a document first seen in this run
                state = (
                    "new"
                    if self.origin.get(event.document) == "new" and "changed" not in values
                    else "changed"
                )
            else:
                state = "cached"
            column.done[event.document] = state
            return column, state

    def rows(self) -> list[tuple[str, list[str]]]:
        """The table as text cells: one row per measure, one cell per column."""
        with self.lock:
            columns = self.ordered()
            pages = [sum(self.pages.get(d, 0) for d, s in c.done.items() if s != "failed") for c in columns]
            rows = [
                ("documents", [f"{len(c.done)}/{self.total}" for c in columns]),
                ("pages", [str(n) for n in pages]),
                ("new", [str(c.count("new")) for c in columns]),
                ("changed", [str(c.count("changed")) for c in columns]),
                ("cached", [str(c.count("cached")) for c in columns]),
                (
                    "failed",
                    [
                        str(c.count("failed")) + (f" (+{c.warnings} chunker)" if c.warnings else "")
                        for c in columns
                    ],
                ),
            ]
            if any(c.count("skipped") for c in columns):
                rows.append(("skipped", [str(c.count("skipped")) for c in columns]))
            if any(c.texts_embedded or c.texts_cached for c in columns):
                rows.append(
                    (
                        "texts embedded",
                        [str(c.texts_embedded) if c.name == "Embedding" else "" for c in columns],
                    )
                )
                rows.append(
                    ("texts cached", [str(c.texts_cached) if c.name == "Embedding" else "" for c in columns])
                )
            return [("", [c.name for c in columns]), *rows]

    def as_dicts(self) -> list[dict[str, Any]]:
        """The final counts per column, for --json."""
        with self.lock:
            return [
                {
                    "stage": c.name,
                    "documents": len(c.done),
                    "new": c.count("new"),
                    "changed": c.count("changed"),
                    "cached": c.count("cached"),
                    "failed": c.count("failed"),
                    "skipped": c.count("skipped"),
                    "chunker_errors": c.warnings,
                    "pages": sum(self.pages.get(d, 0) for d, s in c.done.items() if s != "failed"),
                    **(
                        {"texts_embedded": c.texts_embedded, "texts_cached": c.texts_cached}
                        if c.name == "Embedding"
                        else {}
                    ),
                }
                for c in self.ordered()
            ]
