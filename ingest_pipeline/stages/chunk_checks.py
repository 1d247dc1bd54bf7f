"""The chunk map's checks, as findings over a batch's chunk rows: valid boxes, unique ids, no empty
chunk, within the embedder's token limit, table grids consistent with their text, and each
read page's words found in that page's chunks."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ingest_pipeline.contract import ContractError, validate_bbox
from ingest_pipeline.runtime.budget import check as budget_check
from ingest_pipeline.stages.common import (
    Finding,
)
from ingest_pipeline.storage.store import Store


def table_grid_problem(text: str, layout_json: str | None, meta_json: str | None) -> str | None:
    """What is wrong with a table chunk's text against its cell grid (None if nothing, or
    not a table), from the row's stored layout and meta: only a table's layout has a grid
    to check, the others are not parsed, and a table's is read as plain JSON (a chunk map
    of a 300,000-row sheet checks millions of cells); a ragged table says so in its meta."""
    from ingest_pipeline.chunkers.grid import grid_problem

    if not layout_json or '"table"' not in layout_json:
        return None
    table = json.loads(layout_json).get("table")
    if not table:
        return None
    spans = (
        (c["row"], c["col"], c.get("row_span", 1), c.get("col_span", 1)) for c in table.get("cells") or ()
    )
    return grid_problem(text, table["rows"], table["cols"], spans, '"ragged": true' in (meta_json or ""))


COVERAGE_FLOOR = 0.95


_WORD = re.compile(r"\w+")


# What a chunk map partition's listing and page pictures read of its rows (``assets``), and
# the coverage check (``meta``: the lines left out on purpose).
LISTED_COLUMNS = (
    "chunk_id", "document_id", "path", "page", "index", "role", "text",
    "bbox", "bbox_reason", "header_path", "chunker", "meta",
)  # fmt: skip
_ROWS_AT_ONCE = 2048


def chunk_map_findings(
    store: Store,
    profile: str,
    documents: Sequence[str],
    max_tokens: int,
    kept: dict[str, dict[str, Any]] | None = None,
    budgeted: Callable[[str, Callable[[], Any]], Any] | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Finding]]]:
    """A batch's chunk rows per document (``LISTED_COLUMNS`` of each) and the chunk map's
    checks of each document (``joined_findings`` makes one verdict of several): each
    document's rows and pages are read once, or taken from ``kept`` (per document, the
    ``rows`` and ``pages`` the stage just wrote and read). Each document is checked on its
    own through ``budgeted(document, work)``, which answers None for a document over its
    budget: that document is left out of the findings. A chunk map read back is checked
    ``_ROWS_AT_ONCE`` rows at a time, so a big table's cell grids are never all decoded."""
    kept = kept or {}
    budgeted = budgeted or (lambda _doc, work: work())
    columns = ["document_id", "page", "status", "text"]
    rows_by_doc, per_doc = {}, {}
    for doc in documents:
        held = kept.get(doc, {})
        listed: list[dict[str, Any]] = []

        def work(doc=doc, held=held, listed=listed) -> list[Finding]:
            pages = held["pages"] if "pages" in held else store.page_rows(doc, columns=columns)
            found = chunk_row_findings(_listing(_rows_of(store, profile, doc, held), listed), max_tokens)
            pages_read = [r for r in pages if r["status"] == "read" and r["text"]]
            return [*found, page_text_finding(pages_read, listed)]

        found = budgeted(doc, work)
        if found is None:  # over budget: its listing still, without its checks
            table = store.chunk_map(profile, doc, columns=list(LISTED_COLUMNS))
            listed[:] = table.to_pylist() if table is not None else []
        else:
            per_doc[doc] = found
        rows_by_doc[doc] = listed
    return rows_by_doc, per_doc


def _rows_of(store: Store, profile: str, doc: str, held: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A document's chunk rows without image bytes: those the stage kept, or read back a
    slice at a time."""
    if "rows" in held:
        yield from held["rows"]
        return
    table = store.chunk_map(profile, doc)
    if table is None:
        return
    for batch in table.drop_columns(["image"]).to_batches(max_chunksize=_ROWS_AT_ONCE):
        yield from batch.to_pylist()


def _listing(rows: Iterable[dict[str, Any]], listed: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The rows as they pass, each one's ``LISTED_COLUMNS`` added to ``listed``."""
    for row in rows:
        listed.append({k: row[k] for k in LISTED_COLUMNS if k in row})
        yield row


_SUMMED = ("count", "pages", "flagged")


def joined_findings(per_doc: list[list[Finding]]) -> list[Finding]:
    """Each check's findings over several documents as one: its failing rows joined, its
    counts added (the floor and the token limit are the same for all)."""
    joined = []
    for same in zip(*per_doc, strict=True):
        first = same[0]
        counts = dict(first.counts)
        for key in _SUMMED:
            if key in counts:
                counts[key] = sum(f.counts[key] for f in same)
        joined.append(
            replace(
                first,
                passed=all(f.passed for f in same),
                rows=[row for f in same for row in f.rows],
                counts=counts,
            )
        )
    return joined


def _words(text: str) -> list[str]:
    """The text's words in lower case. The text is lowered whole first when that is the
    same as lowering word by word: when every character lowers to one character (a
    character that lowers to one keeps being, or not being, a word character: checked
    over all of Unicode) and there is no capital sigma, whose lower case depends on what
    follows it. Otherwise word by word ("İ" lowers to two characters, one of them not a
    word character)."""
    lowered = text.lower()
    if text.isascii() or (len(lowered) == len(text) and "\u03a3" not in text):
        return _WORD.findall(lowered)
    return [w.lower() for w in _WORD.findall(text)]


def page_text_finding(pages: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Finding:
    """Each read page's words (as its reader read them) appear in that page's chunks, at
    least COVERAGE_FLOOR of them (chunk text need not rebuild the page text exactly). Lines a
    chunker left out on purpose and said so (``meta.left_out``: running headers and footers,
    page numbers) count as accounted for, so the check fails only on words really lost; a
    page under the floor lists the first of its missing words."""
    low = [
        {**p, "covered": round(p["covered"], 3)}
        for p in page_coverage(pages, rows)
        if p["covered"] < COVERAGE_FLOOR
    ]
    return Finding(
        "page_text_covered",
        not low,
        "pages_below_floor",
        low,
        {"count": len(low), "pages": len(pages), "floor": COVERAGE_FLOOR},
        warn=True,
    )


def page_coverage(pages: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per read page with words: the share of its words (as its reader read them) found in its
    chunks or in the lines its chunker left out on purpose (``covered``, unrounded), and the
    first words missing."""
    texts: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        key = (row["document_id"], row["page"])
        if row.get("text"):
            texts.setdefault(key, []).append(row["text"])
        texts.setdefault(key, []).extend(_left_out(row.get("meta")))
    # a page's chunk texts read as one (a space between them splits no word): one call a page
    chunk_words = {key: set(_words(" ".join(parts))) for key, parts in texts.items()}
    out = []
    for page in pages:
        budget_check()
        words = _words(page["text"])
        if not words:
            continue
        have = chunk_words.get((page["document_id"], page["page"]), set())
        joined = _joined_halves(words, have)
        share = sum(n for w, n in Counter(words).items() if w in have or w in joined) / len(words)
        missing = [w for w in dict.fromkeys(words) if w not in have and w not in joined][:MISSING_SHOWN]
        out.append(
            {
                "document": page["document_id"],
                "page": page["page"],
                "covered": share,
                "missing": " ".join(missing),
            }
        )
    return out


MISSING_SHOWN = 12  # missing words a page under the floor lists


def _joined_halves(words: list[str], have: set[str]) -> set[str]:
    """Words of the reader's text that a chunk holds joined with their neighbour: the two
    halves of a word hyphenated across a line ("Bemer-" "kung"), which a chunker that
    mends the hyphenation holds as one ("bemerkung")."""
    halves: set[str] = set()
    for first, second in zip(words, words[1:]):
        if (first not in have or second not in have) and first + second in have:
            halves.update((first, second))
    return halves


def _left_out(meta: str | None) -> list[str]:
    """The texts a chunk's ``meta.left_out`` names (lines its chunker left out on purpose)."""
    if not meta or '"left_out"' not in meta:
        return []
    try:
        items = json.loads(meta).get("left_out") or []
    except (ValueError, AttributeError):
        return []
    return [item["text"] for item in items if isinstance(item, dict) and isinstance(item.get("text"), str)]


def chunk_row_findings(rows: Iterable[dict[str, Any]], max_tokens: int) -> list[Finding]:
    """Valid boxes, unique chunk ids, no empty chunk, within the token limit (or flagged),
    table grids consistent with their text."""
    bad_boxes, empty, over, grids = [], [], [], []
    flagged = 0
    seen, dupes = set(), []
    for row in rows:
        budget_check()
        where = {"document": row.get("document_id"), "page": row.get("page"), "chunk_id": row["chunk_id"]}
        if row["bbox"] is not None:
            b = row["bbox"]
            try:
                validate_bbox((b["x0"], b["y0"], b["x1"], b["y1"]))
            except ContractError as exc:
                bad_boxes.append({**where, "error": str(exc)})
        if row["chunk_id"] in seen:
            dupes.append(where)
        seen.add(row["chunk_id"])
        if (
            not (row.get("text") or "").strip()
            and row.get("content_type") != "image"
            and row.get("text") is not None
        ):
            empty.append(where)
        meta = row.get("meta") or ""
        if '"token_overflow": true' in meta:
            flagged += 1
        problem = table_grid_problem(row.get("text") or "", row.get("layout"), meta)
        if problem:
            grids.append(
                {
                    "document": row["document_id"],
                    "page": row["page"],
                    "chunk_id": row["chunk_id"],
                    "problem": problem,
                }
            )
        if row.get("tokens") and row["tokens"] > max_tokens and '"token_overflow": true' not in meta:
            over.append({**where, "tokens": row["tokens"]})
    return [
        Finding("valid_boxes", not bad_boxes, "invalid", bad_boxes, {"count": len(bad_boxes)}),
        Finding("unique_chunk_ids", not dupes, "duplicates", dupes, {"count": len(dupes)}),
        Finding("no_empty_chunks", not empty, "empty", empty, {"count": len(empty)}),
        Finding(
            "within_token_limit",
            not over,
            "over_limit_unflagged",
            over,
            {"count": len(over), "flagged": flagged, "max_tokens": max_tokens},
        ),
        Finding("table_grid_consistent", not grids, "tables", grids, {"count": len(grids)}),
    ]
