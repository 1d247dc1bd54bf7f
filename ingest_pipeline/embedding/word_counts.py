"""Token counts of a BERT WordPiece tokenizer, summed over a text's words.

A BERT tokenizer (``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece``) cleans, lowers
and splits a text at whitespace before it looks at any word, and cuts each word into
pieces on its own. So a text's token count is the sum of the counts of its
whitespace-separated words, and a batch of chunk texts, which repeat the same few
thousand words, needs the tokenizer only for the words it has not seen, a fraction of
the CPU of tokenizing each text whole (``bench/token_count_bench.py``).

Python's ``str.split`` and the tokenizer agree on what whitespace is, except for seven
control characters that ``str.split`` splits at and the tokenizer deletes (joining the
words either side): a text holding one of them is counted whole. A tokenizer that is not
of this kind is always asked for whole texts."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence

# Whitespace to str.split, control characters the BERT normalizer removes.
_JOINS = re.compile("[\x0b\x0c\x1c-\x1f\x85]")


def _is_bert(tokenizer) -> bool:
    kinds = (
        type(tokenizer.normalizer).__name__,
        type(tokenizer.pre_tokenizer).__name__,
        type(tokenizer.model).__name__,
    )
    return kinds == ("BertNormalizer", "BertPreTokenizer", "WordPiece")


class WordCounter:
    """Token counts (special tokens left out) of a ``tokenizers.Tokenizer`` that does not
    truncate, by words: each distinct word is tokenized once and its count kept, up to
    ``LIMIT`` words (then all are forgotten at once); words longer than ``LONGEST``
    characters are counted and not kept. Thread-safe."""

    LIMIT = 500_000
    LONGEST = 64

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._by_words = _is_bert(tokenizer)
        self._known: dict[str, int] = {}
        self._lock = threading.Lock()

    # Texts per tokenizer call: every encoding of a call is alive at once (ids, offsets,
    # tokens, masks), and a sheet of numbers brings hundreds of thousands of new words.
    BATCH = 4096

    def _tokenize(self, texts: list[str]) -> list[int]:
        counts: list[int] = []
        for start in range(0, len(texts), self.BATCH):
            batch = texts[start : start + self.BATCH]
            counts += [len(e.ids) for e in self.tokenizer.encode_batch_fast(batch, add_special_tokens=False)]
        return counts

    def counts(self, texts: Sequence[str]) -> list[int]:
        if not self._by_words:
            return self._tokenize(list(texts))
        with self._lock:
            known = self._known
            split = [None if _JOINS.search(t) else t.split() for t in texts]
            new = list({w for words in split if words is not None for w in words if w not in known})
            if new and len(known) + len(new) > self.LIMIT:
                # forgotten at once, so every word of this batch is new again
                known.clear()
                new = list({w for words in split if words is not None for w in words})
            if new:
                known.update(zip(new, self._tokenize(new)))
            whole = iter(self._tokenize([t for t, words in zip(texts, split) if words is None]))
            out = [
                sum(map(known.__getitem__, words)) if words is not None else next(whole) for words in split
            ]
            for word in new:
                if len(word) > self.LONGEST:
                    del known[word]
            return out


@functools.lru_cache(maxsize=4)
def counter_for(tokenizer_path: str) -> WordCounter:
    """The process's one counter for a tokenizer file, over a tokenizer of its own that
    neither truncates nor pads (so no caller ever changes those settings under another).
    The embedder's counts and pdf@4's packing share it, and so its words."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return WordCounter(tokenizer)
