import unicodedata

import pytest
from tokenizers import Tokenizer, pre_tokenizers

from ingest_pipeline.chunkers.pdf.packing import model_tokenizer
from ingest_pipeline.embedding.minilm import MiniLMEmbedder
from ingest_pipeline.embedding.word_counts import WordCounter, counter_for
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus


def whole(tokenizer, texts):
    return [len(e.ids) for e in tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)]


def tricky_characters():
    """Every character the counter could disagree on (whitespace, controls, format and
    separator characters, combining marks, all of Latin-1), plus every 251st of the rest
    (unassigned and private-use ones among them)."""
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        c = chr(code)
        category = unicodedata.category(c)
        if code < 0x100 or c.isspace() or category in ("Cc", "Cf", "Zs", "Zl", "Zp", "Mn") or code % 251 == 0:
            yield c


def test_word_sums_equal_the_tokenizers_count_of_the_whole_text_for_every_tricky_character():
    tokenizer = model_tokenizer()
    texts = [
        form.format(c=c)
        for c in tricky_characters()
        for form in ("ab{c}cd e{c} {c}", "{c}x [SEP]y{c}", "Caf{c}é naïve {c}{c}")
    ]
    assert len(texts) > 10_000
    counter = WordCounter(tokenizer)
    assert counter.counts(texts) == whole(tokenizer, texts)


def test_a_control_character_that_split_cuts_at_and_the_tokenizer_deletes_counts_the_whole_text():
    tokenizer = model_tokenizer()
    for joiner in "\x0b\x0c\x1c\x1d\x1e\x1f\x85":
        text = f"irrigation{joiner}valves"
        by_split = sum(whole(tokenizer, text.split()))
        assert by_split != whole(tokenizer, [text])[0]  # summing str.split's words would be wrong here
        assert WordCounter(tokenizer).counts([text]) == whole(tokenizer, [text])


@requires_corpus
def test_counts_of_real_documents_equal_the_tokenizers_and_the_embedder_adds_its_two_specials():
    texts = []
    for path in sorted((CORPUS / "markdown-bench" / "files").rglob("*.md"))[:6]:
        text = path.read_text(encoding="utf-8", errors="replace")
        texts += [line for line in text.splitlines() if line.strip()][:400]
        texts.append(text[:4000])
    assert len(texts) > 200
    tokenizer = model_tokenizer()
    assert WordCounter(tokenizer).counts(texts) == whole(tokenizer, texts)
    embedder = MiniLMEmbedder()
    assert embedder.count_tokens(texts) == [n + 2 for n in whole(tokenizer, texts)]
    # one counter per tokenizer file: the embedder's counts and pdf@4's share their words
    assert counter_for(MiniLMEmbedder.tokenizer_path()).tokenizer is tokenizer


def test_kept_words_stay_bounded_and_long_words_are_counted_but_not_kept():
    tokenizer = model_tokenizer()
    counter = WordCounter(tokenizer)
    counter.LIMIT = 50
    long_word = "x" * (WordCounter.LONGEST + 1)
    texts = [f"valve{i} sensor{i} {long_word}" for i in range(40)]
    assert counter.counts(texts) == whole(tokenizer, texts)
    assert long_word not in counter._known
    assert len(counter._known) <= 80  # cleared once 50 were passed, then this batch's words
    assert counter.counts(["valve3 sensor39"]) == whole(tokenizer, ["valve3 sensor39"])


def test_a_batch_that_overflows_the_kept_words_counts_the_words_it_shares_with_earlier_ones():
    """Forgetting every kept word makes the known words of the batch new again (a 300,000-row
    sheet's numbers once overflowed the words kept, and its shared words were lost)."""
    tokenizer = model_tokenizer()
    counter = WordCounter(tokenizer)
    counter.LIMIT = 50
    first = [f"payment {i} for supplies" for i in range(30)]
    assert counter.counts(first) == whole(tokenizer, first)
    second = [f"payment {i} for supplies" for i in range(30, 60)]  # overflows; shares three words
    assert counter.counts(second) == whole(tokenizer, second)


def test_a_tokenizer_that_is_not_bert_wordpiece_is_asked_for_whole_texts():
    other = Tokenizer.from_str(model_tokenizer().to_str())
    other.pre_tokenizer = pre_tokenizers.Metaspace()
    counter = WordCounter(other)
    texts = ["irrigation valves", "moisture  sensors\tin rows"]
    assert not counter._by_words
    assert counter.counts(texts) == whole(other, texts)
    assert counter._known == {}


@pytest.mark.parametrize("texts", [[], [""], ["   \n\t "]])
def test_empty_and_blank_texts_count_nothing(texts):
    assert WordCounter(model_tokenizer()).counts(texts) == [0] * len(texts)
