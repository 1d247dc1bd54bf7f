"""Counting an embedder's tokens in windows: no tokenizer call sees more than a window of
text (a few thousand characters, at most ``MAX_WINDOW`` for text without spaces), each
window cut just after whitespace, where no token of a WordPiece or BPE tokenizer crosses,
so the windows' counts add up to the text's. ``token_limits`` cuts pieces with them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

Offsets = Callable[[str], list[tuple[int, int]]]

WINDOW = 4096  # characters per tokenizer call to start with
MAX_WINDOW = 65536  # the most characters one call may see


def window_end(text: str, start: int, end: int) -> int:
    """A window end at ``end`` moved back to just after the last whitespace (so the
    window's tokens are the text's tokens), unless that would halve the window."""
    if end >= len(text):
        return len(text)
    floor = start + (end - start) // 2
    for k in range(end, floor, -1):
        if text[k - 1].isspace():
            return k
    return end


def windows(
    text: str, start: int = 0, end: int | None = None, size: int = WINDOW
) -> Iterator[tuple[int, int]]:
    """Consecutive character windows covering text[start:end], cut after whitespace."""
    end = len(text) if end is None else end
    pos = start
    while pos < end:
        stop = window_end(text, pos, min(end, pos + size)) if pos + size < end else end
        yield pos, stop
        pos = stop


def count_tokens(offsets: Offsets, text: str) -> int:
    """The number of tokens of ``text`` (special tokens left out), window by window."""
    return sum(len(offsets(text[a:b])) for a, b in windows(text))


def over_limit(offsets: Offsets, text: str, limit: int) -> bool:
    """Whether ``text`` has more than ``limit`` tokens; stops counting once it does."""
    total = 0
    for a, b in windows(text):
        total += len(offsets(text[a:b]))
        if total > limit:
            return True
    return False


def bounded_counts(
    offsets: Offsets,
    texts: Sequence[str],
    count: Callable[[Sequence[str]], list[int]],
    long: int = MAX_WINDOW,
) -> list[int]:
    """Token counts with [CLS] and [SEP], as ``count`` gives them, but texts longer than
    ``long`` characters counted window by window (``count`` sees none longer than any
    window may be): the word counter is much cheaper than walking token offsets window by
    window (``bench/token_count_bench.py``), and it counts the windows too: they are cut
    after whitespace, where no token crosses, so their counts add up (each window's
    specials taken off but one text's)."""
    short = [t for t in texts if len(t) <= long]
    counted = iter(count(short) if short else [])
    if len(short) == len(texts):
        return list(counted)
    specials = count([""])[0]
    out = []
    for t in texts:
        if len(t) <= long:
            out.append(next(counted))
            continue
        parts = count([t[a:b] for a, b in windows(t)])
        out.append(sum(parts) - (len(parts) - 1) * specials)
    return out


Counter = Callable[[Sequence[str]], list[int]]


def line_counts(offsets: Offsets, texts: Sequence[str], count: Counter | None = None) -> list[int]:
    """Token counts of many short texts (special tokens left out): in one batch of the
    embedder's counter when there is one (what it adds to the empty text is its specials),
    else text by text through ``offsets``. A table of 300,000 rows is 300,000 lines to
    count, where one tokenizer call per line costs more than the rest of the table's work."""
    if count is None or not texts:
        return [count_tokens(offsets, t) for t in texts]
    specials = count([""])[0]
    return [n - specials for n in bounded_counts(offsets, texts, count)]
