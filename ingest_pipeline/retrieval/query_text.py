"""What of a query search reads: the query without the sentences that only tell the answerer
how to put the answer ("Answer in USD millions.", "Round your answer to two decimal
places."). Such a sentence says nothing about where the answer is, and its words (millions,
units, round) weigh on the model's vector and on the keyword index like the question's own.

A sentence is dropped only when it begins by asking for the answer ("Answer", "Round",
"State the answer", after an optional "Please") and speaks of units or rounding; a sentence
that says where to look ("Answer from the cash flow statement") is kept, and a query left
empty keeps its text. Measured on both FinanceBench sets and Docugami
(``bench/search_bench.py``, ``docs/benchmarks.md``).
"""

from __future__ import annotations

import re

_ANSWER_FORM = re.compile(
    r"(?:please\s+)?(?:answer|round|state\s+(?:the\s+|your\s+)?answer)\b[^.?!]*"
    r"\b(?:decimals?|millions?|billions?|thousands?|percents?|percentages?|units?|usd|dollars?)\b[^.?!]*[.?!]?",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def searched_text(query: str) -> str:
    """The query as search reads it (see the module's docstring)."""
    sentences = _SENTENCE_END.split(query.strip())
    kept = [s for s in sentences if not _ANSWER_FORM.fullmatch(s.strip())]
    return " ".join(kept) or query
