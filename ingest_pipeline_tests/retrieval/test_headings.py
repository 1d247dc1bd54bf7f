"""Ranking inside the named documents: the section a query names, and pages several
passages support."""

from ingest_pipeline.retrieval.headings import content_words, heading_match, ranked_by_headings


def hit(page: int, *path: str, document: str = "d1") -> dict:
    return {
        "chunk_id": f"{document}-{page}-{len(path)}-{path}",
        "document_id": document,
        "page": page,
        "header_path": list(path),
    }


def test_content_words_are_lowered_singular_and_without_function_words():
    assert content_words("Consolidated Statements of Cash Flows") == [
        "consolidated",
        "statement",
        "cash",
        "flow",
    ]
    assert content_words("Liabilities and the Equity (in $ millions)") == ["liability", "equity", "million"]


def test_a_passage_under_the_heading_a_query_names_leads_and_one_shared_word_is_not_enough():
    hits = [
        hit(40, "Liquidity and Capital Resources"),
        hit(41, "Cash Management"),
        hit(55, "Consolidated Balance Sheets"),
        hit(56, "Consolidated Statements of Operations"),
        hit(58, "Consolidated Statements of Cash Flows"),
    ]
    query = "What was the capital expenditure in FY2021, relying on the cash flow statement?"
    ordered = ranked_by_headings(hits, query, pages=False)
    assert [h["page"] for h in ordered] == [58, 40, 41, 55, 56]
    # "cash" alone (one word of "Cash Management") moves nothing
    assert heading_match(set(content_words(query)), ["Cash Management"], {}) == 0.0
    # a word every candidate heading holds weighs less than a rare one
    rarity = {"consolidated": 0.1, "statement": 0.5, "cash": 2.0, "flow": 2.0}
    words = set(content_words("the consolidated cash flow statement"))
    full = heading_match(words, ["Consolidated Statements of Cash Flows"], rarity)
    partial = heading_match(
        set(content_words("consolidated statement")), ["Consolidated Statements of Cash Flows"], rarity
    )
    assert full == 1.0 and 0 < partial < 0.15
    # a query naming no heading keeps the order it was given
    assert ranked_by_headings(hits, "net revenue growth", pages=False) == hits


def test_with_pages_a_page_several_passages_support_rises_and_its_passages_stay_together():
    hits = [hit(3, "Overview"), hit(9, "Results"), hit(9, "Results"), hit(9, "Results"), hit(3, "Overview")]
    hits = [dict(h, chunk_id=str(i)) for i, h in enumerate(hits)]
    paged = ranked_by_headings(hits, "net revenue growth", pages=True)
    assert [h["page"] for h in paged] == [9, 9, 9, 3, 3]
    assert [h["chunk_id"] for h in paged] == ["1", "2", "3", "0", "4"]
    assert [h["chunk_id"] for h in ranked_by_headings(hits, "net revenue growth", pages=False)] == list(
        "01234"
    )


def test_a_question_asking_for_a_quantity_raises_passages_of_figures_and_no_other_does():
    from ingest_pipeline.retrieval.quantities import asks_quantity, number_share

    prose = "Management believes the Company is well positioned to fund its operations and growth."
    figures = "Net sales $ 32,765 $ 32,136 Cost of sales (17,136) (16,682) Gross margin 47.7 % 48.1 %"
    hits = [hit(12, "Overview"), hit(30, "Overview"), hit(31, "Overview")]
    for h, text in zip(hits, (prose, figures, prose)):
        h["text"] = text
    assert number_share(prose) == 0.0 and number_share(figures) > 0.3  # "$" and "%" alone are words
    assert asks_quantity("How much did net sales change between 2021 and 2022?")
    assert asks_quantity("What was the gross margin in 2022?")
    assert not asks_quantity("Who audits the company, and where is it incorporated?")
    asked = ranked_by_headings(hits, "How much did net sales change between 2021 and 2022?", pages=True)
    assert [h["page"] for h in asked] == [30, 12, 31]
    assert ranked_by_headings(hits, "Who audits the company's statements?", pages=True) == hits
