"""Ranking inside the documents a query names: the section it names, figures for a question
asking for a quantity, and pages that answer with several passages.

A question about a filing often says which part of it holds the answer ("relying on the
cash flow statement", "the segment results", "its legal proceedings"), and the passages of
that part sit under a heading with those words, while the model's vector and the keyword
index weigh them like any others. So, among the named documents' candidates:

- each passage scores its rank's share (``1 / (RANK_OFFSET + rank)``, as reciprocal-rank
  fusion does) plus ``HEADING_WEIGHT`` times how much of its nearest heading the query says:
  the heading's words the query uses, each weighed by how rare it is among the candidates'
  headings (every statement is "consolidated"; only one is "cash flows"), when the query
  uses two of them at least;
- when the query asks for a quantity, a passage dense with numbers scores up to
  ``quantities.NUMBER_WEIGHT`` more (``retrieval.quantities``);
- with pages as results, a page scores its best passage plus ``PAGE_SUPPORT`` times each of
  its other passages, so a page several of whose passages match (a table split between
  rows) rises above a page with one.

The weights were chosen by the kind of question on the FinanceBench development sets and
checked on Docugami (``bench/search_bench.py``; ``docs/benchmarks.md``); nothing here names a
company, a form or a question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ingest_pipeline.retrieval.quantities import NUMBER_WEIGHT, asks_quantity, quantity_score

RANK_OFFSET = 60
HEADING_WEIGHT = 0.01  # above one rank's share (1/60 at most): a heading match leads
PAGE_SUPPORT = 0.25
NAMED_CANDIDATES = 100  # passages of the named documents ranked again
_LEAST_WORDS = 2  # heading words a query must use for the heading to count
_STOP = frozenset(
    "the and for with from that this its their our are was were been has have had into per "
    "not all any also than then".split()
)
_WORD = re.compile(r"[^\W\d_]+")


def content_words(text: str) -> list[str]:
    """A text's words, lowered, without short and function words, plurals made singular
    ("Statements of Cash Flows" -> statement, cash, flow)."""
    words = []
    for word in _WORD.findall(text.casefold()):
        if len(word) < 3 or word in _STOP:
            continue
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
            word = word[:-1]
        words.append(word)
    return words


def _rarity(headings: Iterable[Sequence[str] | None]) -> dict[str, float]:
    """Each word's weight from how many of the candidates' heading paths hold it."""
    counts: dict[str, int] = {}
    total = 0
    for path in headings:
        total += 1
        for word in set(content_words(" ".join(path or ()))):
            counts[word] = counts.get(word, 0) + 1
    # a word every path holds (the document's own title leading each) tells no section apart
    return {word: math.log(max(total, 1) / n) for word, n in counts.items()}


def heading_match(query_words: set[str], path: Sequence[str] | None, rarity: Mapping[str, float]) -> float:
    """How much of a passage's nearest heading the query says, 0 to 1 (by rarity)."""
    if not path:
        return 0.0
    words = {w for w in content_words(path[-1]) if rarity.get(w, 1.0) > 0}
    used = words & query_words
    if len(used) < _LEAST_WORDS:
        return 0.0
    return sum(rarity.get(w, 1.0) for w in used) / sum(rarity.get(w, 1.0) for w in words)


def ranked_by_headings(hits: list[dict[str, Any]], query: str, pages: bool) -> list[dict[str, Any]]:
    """The named documents' hits in their new order (see the module's docstring); with
    ``pages``, each page's passages together, pages in order of their scores."""
    query_words = set(content_words(query))
    rarity = _rarity(h.get("header_path") for h in hits)
    figures = NUMBER_WEIGHT if asks_quantity(query) else 0.0

    def score(rank: int, hit: Mapping[str, Any]) -> float:
        match = heading_match(query_words, hit.get("header_path"), rarity)
        quantity = figures * quantity_score(hit.get("text")) if figures else 0.0
        return 1.0 / (RANK_OFFSET + rank) + HEADING_WEIGHT * match + quantity

    scored = sorted(((score(rank, h), rank, h) for rank, h in enumerate(hits)), key=lambda x: (-x[0], x[1]))
    if not pages:
        return [h for _, _, h in scored]
    by_page: dict[tuple, list] = {}
    for value, rank, hit in scored:
        key = (hit["document_id"], hit["page"])
        if key in by_page:
            by_page[key][0] += PAGE_SUPPORT * value
            by_page[key][2].append(hit)
        else:
            by_page[key] = [value, rank, [hit]]
    ordered = sorted(by_page.values(), key=lambda x: (-x[0], x[1]))
    return [hit for _, _, page_hits in ordered for hit in page_hits]
