"""Fields read from a document's first pages: its kind, the period it covers, the organisation
it is by, its language and a title line. Each reader returns the value and the line it came
from, so the record can say where it was read.

The rules name kinds of documents and the ways a cover states a date or a name, never a
particular organisation or form: they are tried on reports, decks, contracts and notes alike.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    text: str
    page: int
    bbox: tuple[float, float, float, float] | None = None

    def where(self) -> dict:
        spot: dict = {"page": self.page}
        if self.bbox:
            spot["bbox"] = [round(v, 4) for v in self.bbox]
        return spot


# The kinds a cover names, most specific first: (kind, pattern over the cover's text).
_KINDS = (
    (
        "quarterly report",
        r"\bquarterly report\b|\bform\s*10-?q\b|\binterim report\b|\bhalf[- ]year(ly)? report\b",
    ),
    ("annual report", r"\bannual report\b|\bform\s*10-?k\b|\bform\s*20-?f\b|\bintegrated report\b"),
    ("current report", r"\bcurrent report\b|\bform\s*8-?k\b"),
    (
        "earnings release",
        r"\b(earnings|financial) (release|results)\b|\breports? (first|second|third|fourth)[- ]quarter\b",
    ),
    ("proxy statement", r"\bproxy statement\b"),
    ("prospectus", r"\bprospectus\b"),
    ("contract", r"\b(agreement|contract|memorandum of understanding)\b"),
    ("policy", r"\bpolicy\b"),
    ("minutes", r"\bminutes of\b"),
    ("presentation", r"\b(investor|earnings) (presentation|day)\b"),
    ("paper", r"\babstract\b.*\bintroduction\b"),
)

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = (
    rf"(?:(?:{_MONTHS})\.?\s+\d{{1,2}},?\s+((?:19|20)\d\d)|\d{{1,2}}\s+(?:{_MONTHS})\.?\s+((?:19|20)\d\d))"
)
_QUARTERLY = re.compile(rf"\b(?:quarter(?:ly)?(?: period)?|three months) ended\s+{_DATE}", re.I)
_YEARLY = re.compile(rf"\b(?:fiscal )?year ended\s+{_DATE}|\bfiscal year\s+((?:19|20)\d\d)\b", re.I)
_QUARTER_NAMED = re.compile(r"\b(?:Q([1-4])\s*((?:19|20)\d\d)|((?:19|20)\d\d)\s*Q([1-4]))\b", re.I)
_YEAR = re.compile(r"(?<![\d.,$])((?:19|20)\d\d)(?![\d%])")
_MONTH_NUMBER = {
    m: i
    for i, names in enumerate(
        ["", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
    for m in [names]
    if m
}

# Words that end an organisation's name in most languages' company forms.
_COMPANY_FORMS = re.compile(
    r"\b(inc|incorporated|corp|corporation|company|co|ltd|limited|llc|lp|plc|ag|gmbh|se|sa|s\.a|nv|n\.v|"
    r"bv|spa|s\.p\.a|ab|asa|oyj|group|holdings?|bancorp|trust|partners|university|institute|"
    r"association|foundation|council|ministry|bank)\.?$",
    re.I,
)
_NAMED_ABOVE = re.compile(r"^\(?exact name of (the )?registrant", re.I)

_STOPWORDS = {
    "en": "the of and to in is for that with as on by this are be from".split(),
    "de": "der die und das ist nicht mit von den zu im für auf des".split(),
    "fr": "le la les et des est pour dans une du que sur par pas".split(),
    "es": "el la los las de que en es por para una con del se".split(),
    "it": "il di che la per non una sono del della con gli le".split(),
    "nl": "de het een en van is dat op te voor niet met zijn".split(),
    "pt": "os as de que do da em para com não uma por".split(),
    "la": "et est sed ut ad cum non sit quod quae enim atque eius esse".split(),
}


def kind_of(text: str) -> str | None:
    head = text[:4000]
    for kind, pattern in _KINDS:
        if re.search(pattern, head, re.I | re.S):
            return kind
    return None


def _year(match: re.Match) -> str:
    return next(g for g in match.groups() if g)


def period_of(lines: Sequence[Line]) -> tuple[str, Line] | None:
    """The period a cover states: ``2022Q2`` for a quarter, ``2018`` for a year (the year
    its fiscal year ends), else the year named most often on the first page."""
    for line in lines:
        found = _QUARTERLY.search(line.text)
        if found:
            month = re.search(_MONTHS, found.group(0), re.I)
            number = _MONTH_NUMBER.get(month.group(0).lower()[:3], 0) if month else 0
            quarter = f"Q{(number - 1) // 3 + 1}" if number else ""
            return _year(found) + quarter, line
        found = _YEARLY.search(line.text)
        if found:
            return _year(found), line
        found = _QUARTER_NAMED.search(line.text)
        if found:
            quarter = found.group(1) or found.group(4)
            return (found.group(2) or found.group(3)) + f"Q{quarter}", line
    first = [line for line in lines if line.page == lines[0].page] if lines else []
    counts = Counter(y for line in first for y in _YEAR.findall(line.text))
    if not counts:
        return None
    year, _ = counts.most_common(1)[0]
    return year, next(line for line in first if year in line.text)


def period_in_name(stem: str) -> str | None:
    found = _QUARTER_NAMED.search(stem.replace("_", " "))
    if found:
        return (found.group(2) or found.group(3)) + f"Q{found.group(1) or found.group(4)}"
    years = re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", stem)
    return years[0] if years else None


def _plausible_name(text: str) -> bool:
    words = text.split()
    return 1 <= len(words) <= 8 and len(text) <= 80 and any(c.isalpha() for c in text)


def organisation_of(lines: Sequence[Line]) -> tuple[str, Line] | None:
    """The organisation a cover names: the line a "name as specified" caption sits under, or
    the first short line ending in a company form (Inc., Ltd, GmbH, University…)."""
    for before, line in zip(lines, lines[1:]):
        if _NAMED_ABOVE.match(line.text.strip()) and _plausible_name(before.text):
            return _clean_name(before.text), before
    for line in lines[:80]:
        text = line.text.strip().rstrip(",;:")
        if _plausible_name(text) and _COMPANY_FORMS.search(text):
            return _clean_name(text), line
    return None


def _clean_name(text: str) -> str:
    return " ".join(text.replace("_", " ").split()).strip(" ,.;:")


# Scripts that name their language by themselves (the share of letters written in them).
_SCRIPTS = (
    ("ko", re.compile(r"[\uac00-\ud7af]")),
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
)


def language_of(text: str) -> str | None:
    """The language of a document's first pages: by its script where the script says it, else
    by the common words of the languages written in Latin letters, when one clearly leads."""
    head = text[:20000]
    letters = sum(c.isalpha() for c in head)
    if not letters:
        return None
    for language, script in _SCRIPTS:
        if len(script.findall(head)) > 0.3 * letters:
            return language
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", head)]
    counts = Counter(words)
    scores = sorted(((sum(counts[w] for w in stop), lang) for lang, stop in _STOPWORDS.items()), reverse=True)
    (best, language), (second, _) = scores[0], scores[1]
    if best >= max(5, 0.05 * len(words)) and best >= 1.5 * second:
        return language
    return None


def title_of(lines: Sequence[Line]) -> tuple[str, Line] | None:
    """The first line of the first page that reads like a title: letters, a few words,
    not a running header such as "Table of Contents"."""
    for line in lines[:15]:
        text = " ".join(line.text.split())
        letters = sum(c.isalpha() for c in text)
        if letters >= 4 and len(text.split()) <= 16 and not re.match(r"table of contents$", text, re.I):
            return text, line
    return None
