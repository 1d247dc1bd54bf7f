"""What of a query search reads: sentences on the answer's form left out, the rest kept."""

from ingest_pipeline.retrieval.query_text import searched_text


def test_sentences_on_the_answer_s_units_or_rounding_are_left_out():
    query = (
        "What is the FY2016 COGS for Microsoft? Please state answer in USD millions. "
        "Provide a response to the question by primarily using the statement of income."
    )
    assert searched_text(query) == (
        "What is the FY2016 COGS for Microsoft? "
        "Provide a response to the question by primarily using the statement of income."
    )
    assert searched_text("Net PP&E of 3M in FY2018? Round your answer to two decimal places.") == (
        "Net PP&E of 3M in FY2018?"
    )
    assert searched_text("Growth rate? Answer in units of percents and round to one decimal place.") == (
        "Growth rate?"
    )


def test_a_sentence_that_says_where_to_look_is_kept_and_a_query_is_never_emptied():
    where = (
        "Answer the following question by primarily using information that is shown in the "
        "balance sheet: what is the year end FY2018 net PP&E for 3M? Answer in USD billions."
    )
    assert searched_text(where) == where.removesuffix(" Answer in USD billions.")
    assert searched_text("Answer from the cash flow statement.") == "Answer from the cash flow statement."
    alone = "Answer in USD millions."
    assert searched_text(alone) == alone
    assert searched_text("How many units did we sell in 2021?") == "How many units did we sell in 2021?"
