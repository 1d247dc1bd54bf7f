"""Plain text of inline Markdown, sentence spans and hard splits of long text."""

from __future__ import annotations

import re

_INLINE_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), ""),
    (re.compile(r"!\[([^\]]*)\]\[[^\]]*\]"), ""),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"\[([^\]]*)\]\[[^\]]*\]"), r"\1"),
    (re.compile(r"<(https?://[^>\s]+)>"), r"\1"),
    (re.compile(r"</?[A-Za-z][^>]*>"), ""),
    (re.compile(r"(`+)(.+?)\1"), r"\2"),
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(\*|_)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),
    (re.compile(r"\s+"), " "),
)


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_PARK = 0xF0000  # a private-use plane
_PARKED = re.compile("[\U000f0021-\U000f007e]")


def plain_text(markdown: str) -> str:
    """Inline Markdown without its syntax: link labels kept, images dropped, code, bold
    and italic markers removed, backslash escapes resolved."""
    text = markdown
    if any(ch in text for ch in "[]!<`*_~\\\n\t"):
        escaped = "\\" in text
        if escaped:  # park escaped characters where no markup rule can see them
            text = _ESCAPE.sub(lambda m: chr(_PARK + ord(m.group(1))), text)
        for pattern, repl in _INLINE_RULES:
            text = pattern.sub(repl, text)
        if escaped:
            text = _PARKED.sub(lambda m: chr(ord(m.group(0)) - _PARK), text)
    return text.strip()


_SENTENCE_END = re.compile(r"[.!?…]+[\"'»”’)\]]*\s+")
_LAST_WORD = re.compile(r"(\w+)\W*$")
ABBREVIATIONS = frozenset(
    """
    dott dr prof sig sigg ing avv arch geom rag mons sen
    mr mrs ms st jr sr ph co inc ltd corp
    ecc etc es cf cfr vs viz al
    fig figg tab cap capp par art artt pag pagg pp vol voll ed eds nn nr num
    approx ca circa dept
    gen feb mar apr mag giu lug ago set ott nov dic jan jun jul aug sep oct dec
    """.split()
)


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence spans of ``text[start:end]`` (absolute offsets, whitespace between them
    left out). A boundary is end punctuation, optional closing quotes, whitespace, then an
    uppercase letter, a digit or an opening quote; not after a known abbreviation or a
    single-letter initial ("Il dott. Rossi", "J. Smith")."""
    spans = []
    a = start
    for m in _SENTENCE_END.finditer(text, start, end):
        b = m.end()
        if b >= end:
            break
        nxt = text[b]
        if not (nxt.isupper() or nxt.isdigit() or nxt in "«\"“‘'(¿¡[*_`"):
            continue
        punct = m.group(0).rstrip()
        if punct.startswith(".") and punct.rstrip("\"'»”’)]") == ".":
            w = _LAST_WORD.search(text, max(a, m.start() - 20), m.start() + 1)
            if w is not None:
                word = w.group(1).lower()
                if len(word) == 1 or word in ABBREVIATIONS:
                    continue
        stop = m.start() + len(punct)
        if stop > a:
            spans.append((a, stop))
        a = b
    if a < end:
        spans.append((a, end))
    return spans


def hard_split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into spans of at most ``budget`` characters, at the last
    whitespace before the limit when there is one in its second half."""
    spans = []
    a = start
    budget = max(1, budget)
    while end - a > budget:
        cut = a + budget
        ws = max(text.rfind(" ", a, cut + 1), text.rfind("\n", a, cut + 1))
        if ws > a + budget // 2:
            spans.append((a, ws))
            a = ws
            while a < end and text[a].isspace():
                a += 1
        else:
            spans.append((a, cut))
            a = cut
    if a < end:
        spans.append((a, end))
    return spans
