"""eval's table: the table/text columns say "-" for a set that does not label where answers sit."""

from ingest_pipeline.retrieval.evaluation import format_table


def row(by_kind: dict) -> dict:
    return {
        "name": "retrieval",
        "kind": "profile",
        "embedder": "minilm-int8@1",
        "mode": "hybrid",
        "chunks": 10,
        "mean_tokens": 120.0,
        "recall@1": 0.2,
        "recall@5": 0.5,
        "recall@10": 0.6,
        "mrr@10": 0.3,
        "intervals": {"recall@5": (0.3, 0.7), "mrr@10": (0.2, 0.4)},
        "document_recall@5": 0.9,
        "by_kind": by_kind,
    }


def test_table_and_text_columns_show_a_figure_or_a_dash_never_nan():
    labelled = format_table([row({"chunk:Table": {"mrr@10": 0.25}, "chunk:Text": {"mrr@10": 0.5}})])
    line = labelled.splitlines()[2]
    assert line.split()[-2:] == ["0.250", "0.500"]
    unlabelled = format_table([row({"type:metrics-generated": {"mrr@10": 0.3}})]).splitlines()[2]
    assert unlabelled.split()[-2:] == ["-", "-"] and "nan" not in unlabelled
