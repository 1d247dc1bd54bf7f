"""Questions that ask for a quantity, and passages that hold quantities.

A question asking how much, how many, a total, a rate, a ratio or a change is answered by a
figure, and figures sit in passages dense with numbers (a statement's rows, a table split
between rows); the model's vector and the keyword index read such a passage poorly, since its
numbers carry no words (pdf@4 even leaves standalone numbers out of what the model reads). So
among the named documents' candidates (``retrieval.headings``), a passage of a question that
asks for a quantity gains up to ``NUMBER_WEIGHT``, in proportion to the share of its words that
are numbers, full at ``FULL_SHARE``; a question that asks for none is ranked as before.

The cue is English wording of asking for a quantity, not any domain's terms; the weight equals
the heading rule's, so a named section and a page of figures weigh alike. Chosen by the kind of
question on the FinanceBench development sets and checked on Docugami (``bench/search_bench.py``;
``docs/benchmarks.md``).
"""

from __future__ import annotations

import re

NUMBER_WEIGHT = 0.01
FULL_SHARE = 0.3  # numbers in three words of ten: a table's rows
_ASKS = re.compile(
    r"\bhow\s+(?:much|many)\b|\b(?:amounts?|totals?|sums?|numbers?|values?|averages?|rates?|ratios?|"
    r"margins?|percent(?:ages?|s)?|growth|changes?|changed|increase[ds]?|decrease[ds]?|difference|"
    r"costs?|prices?)\b|%",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\(?[$€£¥]?[-+]?\d[\d,.]*\)?%?[,;:]?")


def asks_quantity(query: str) -> bool:
    """Whether a question asks for a quantity (see the module's docstring)."""
    return bool(_ASKS.search(query))


def number_share(text: str | None) -> float:
    """The share of a text's words that are numbers (amounts, percents, negatives in
    parentheses), 0 to 1."""
    words = (text or "").split()
    return sum(1 for w in words if _NUMBER.fullmatch(w)) / len(words) if words else 0.0


def quantity_score(text: str | None) -> float:
    """How much a passage reads like an answer of figures, 0 to 1."""
    return min(1.0, number_share(text) / FULL_SHARE)
