"""Which documents a query is about: the organisation it names (any spelling a record holds:
the cover's, the file name's, the metadata's), the period and the kind. A first pass over
documents, before the second over their passages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ingest_pipeline.records.cover import kind_of

# Words a name is spelled with that do not tell one organisation from another.
_FORMS = set(
    "inc incorporated corp corporation company co ltd limited llc lp plc ag gmbh se sa nv bv spa "
    "ab asa oyj group holding holdings the and of".split()
)
_WORD = re.compile(r"[^\W_]+")
_YEAR = re.compile(r"(?<!\d)(?:fy\s*|fiscal\s+(?:year\s+)?)?((?:19|20)\d\d)(?!\d)", re.I)
_QUARTER = re.compile(r"\bq([1-4])\b|\b(first|second|third|fourth)\s+(?:fiscal\s+)?quarter\b", re.I)
_ORDINAL = {"first": "1", "second": "2", "third": "3", "fourth": "4"}


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text.replace("'s ", " ").replace("’s ", " "))]


def name_key(name: str) -> str:
    """A name without its company form, spaces or punctuation: "The Kraft Heinz Company" and
    "KRAFTHEINZ" give the same key."""
    bare = re.sub(r"\.(com|net|org|io)\b", " ", name, flags=re.I)  # "Amazon.com, Inc." is Amazon
    return "".join(w for w in _words(bare) if w not in _FORMS)


@dataclass(frozen=True)
class QueryCues:
    keys: frozenset[str]  # the query's words and runs of up to four words, joined
    caps: tuple[str, ...]  # words written in capitals (tickers, abbreviations)
    years: tuple[int, ...]
    quarter: str | None
    kind: str | None

    @classmethod
    def of(cls, query: str) -> "QueryCues":
        words = _words(query)
        keys = {"".join(words[i : i + n]) for n in range(1, 5) for i in range(len(words) - n + 1)}
        caps = tuple(
            w.casefold() for w in _WORD.findall(query) if len(w) >= 2 and w.isupper() and w.isalpha()
        )
        years = tuple(int(y) for y in _YEAR.findall(query))
        found = _QUARTER.search(query)
        quarter = (found.group(1) or _ORDINAL[found.group(2).lower()]) if found else None
        return cls(frozenset(keys), caps, years, quarter, kind_of(query))


class DocumentPrior:
    """Scores documents against a query from their records (``documents`` rows)."""

    def __init__(self, records: Iterable[Mapping]) -> None:
        self.records = {r["document_id"]: r for r in records}
        self._keys: dict[str, set[str]] = {}
        for doc, record in self.records.items():
            names = [n for n in (record.get("names") or []) if n] or (
                [record["organisation"]] if record.get("organisation") else []
            )
            self._keys[doc] = {k for k in (name_key(n) for n in names) if len(k) >= 2}

    def organisation_score(self, doc: str, cues: QueryCues) -> float:
        keys = self._keys.get(doc, set())
        if keys & cues.keys:
            return 1.0
        if any(k.startswith(c) for k in keys for c in cues.caps if len(c) >= 3):
            return 0.8
        # One word of a longer name ("word" of "Docling word sample") names nothing: it is
        # as likely a word of the question as a name.
        return 0.0

    def period_score(self, doc: str, cues: QueryCues) -> float:
        record = self.records[doc]
        year, period = record.get("year"), record.get("period") or ""
        score = 0.0
        if year and cues.years:
            score += 1.0 if year == max(cues.years) else 0.3 if year in cues.years else 0.0
        if cues.quarter and period.endswith(f"Q{cues.quarter}"):
            score += 0.5
        if cues.kind and record.get("kind") == cues.kind:
            score += 0.3
        return score

    def scores(self, query: str) -> dict[str, float]:
        """Each document the query names by its organisation, with its score (none named:
        empty, and the query is left to the passages alone)."""
        cues = QueryCues.of(query)
        found = {}
        for doc in self.records:
            named = self.organisation_score(doc, cues)
            if named > 0:
                found[doc] = named * (1.0 + self.period_score(doc, cues))
        return found

    def preferred(self, query: str, share: float = 0.5) -> Sequence[str]:
        """The documents the query is most about: those at the top score, unless that is
        more than ``share`` of all documents (then the query names nothing in particular)."""
        scores = self.scores(query)
        if not scores:
            return ()
        top = max(scores.values())
        best = sorted(d for d, s in scores.items() if s >= top * 0.999)
        return best if len(best) <= max(1, share * len(self.records)) else ()
