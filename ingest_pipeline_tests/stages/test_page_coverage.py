"""The page coverage the chunk map's check counts: words in the chunks, in the lines left out
on purpose, or in a word the chunker mended from two halves hyphenated across a line."""

import json

from ingest_pipeline.stages.chunk_checks import page_coverage, page_text_finding

PAGE = {
    "document_id": "d",
    "page": 1,
    "text": "Anual report 2021\nThe Bemer-\nkung on barley yields\nPage 7",
}


def _row(text: str, left_out: list[str] = ()) -> dict:
    meta = json.dumps({"left_out": [{"role": "page_footer", "text": t} for t in left_out]})
    return {"document_id": "d", "page": 1, "text": text, "meta": meta}


def test_left_out_lines_and_mended_hyphenation_count_as_covered():
    rows = [_row("Anual report 2021\nThe Bemerkung on barley yields", left_out=["Page 7"])]
    (page,) = page_coverage([PAGE], rows)
    assert page["covered"] == 1.0 and page["missing"] == ""
    assert page_text_finding([PAGE], rows).passed


def test_words_really_lost_are_counted_and_named():
    rows = [_row("Anual report 2021")]
    (page,) = page_coverage([PAGE], rows)
    assert page["covered"] == 3 / 11 and page["missing"] == "the bemer kung on barley yields page 7"
    finding = page_text_finding([PAGE], rows)
    assert not finding.passed and finding.rows[0]["covered"] == 0.273
