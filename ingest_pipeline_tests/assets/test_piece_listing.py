"""A chunker version's partition lists its pieces in full up to a budget, then says how many
are left and which command lists them, with the file name escaped."""

import pyarrow as pa

from ingest_pipeline.assets.common import claim_listing
from ingest_pipeline.storage import tables


def _claim(rows: int) -> pa.Table:
    box = dict(tables.PIECE_FIELDS)["bbox"]
    return pa.table(
        {
            # stored out of order: the listing reads in page, piece order
            "page": pa.array([2 - (i % 2) for i in range(rows)], pa.int32()),
            "piece": pa.array([i // 2 for i in range(rows)], pa.int32()),
            "text": [f"line {i} of the claim" for i in range(rows)],
            "bbox": pa.nulls(rows, box),
            "bbox_reason": ["no_geometry"] * rows,
            "role": ["line"] * rows,
            "header_path": pa.nulls(rows, pa.list_(pa.string())),
        }
    )


def test_past_the_budget_the_listing_counts_the_rest_and_names_the_command():
    listing = claim_listing(_claim(2000), "odd\x1b[31m.pdf", "pdf@1", budget=4096).value
    shown = [line for line in listing.splitlines() if line.startswith("**")]
    last = listing.splitlines()[-1]
    assert shown and shown[0].startswith("**1** · page 1 ·") and shown[0].endswith("piece 0")
    assert last == (
        f"*{2000 - len(shown)} more pieces:* "
        "`ingest-pipeline inspect 'odd\\x1b[31m.pdf' --stage claims --chunker pdf@1`"
    )
    assert "\x1b" not in listing


def test_a_claim_within_the_budget_is_listed_whole():
    listing = claim_listing(_claim(6), "a.pdf", "pdf@1").value
    assert [line for line in listing.splitlines() if line.startswith("> ")] == [
        f"> line {i} of the claim" for i in (1, 3, 5, 0, 2, 4)
    ]
    assert "more pieces" not in listing
