"""What every per-document asset does around its stage: loop, tally, report."""


import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from dagster import AssetExecutionContext, BackfillPolicy, MetadataValue

from ingest_pipeline.stages import Outcome

# Many documents per run: Dagster's per-run overhead is seconds, so runs are batches.
BATCH_POLICY = BackfillPolicy.single_run()


def for_each_document(
    context: AssetExecutionContext, keys: Iterable[str], step: Callable[[str], Outcome]
) -> list[Outcome]:
    outcomes = []
    for key in keys:
        outcome = step(key)
        if outcome.status == "failed":
            context.log.warning(f"{key}: {outcome.detail.get('reason')}")
        outcomes.append(outcome)
    return outcomes


def summary_metadata(outcomes: Sequence[Outcome], started: float, **extra) -> dict:
    counts = Counter(o.status for o in outcomes)
    metadata = {
        "documents": MetadataValue.int(len(outcomes)),
        "seconds": MetadataValue.float(round(time.perf_counter() - started, 3)),
        **{f"documents_{status}": MetadataValue.int(n) for status, n in sorted(counts.items())},
    }
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        lines = ["| document | reason |", "|---|---|"]
        lines += [f"| {o.document} | {str(o.detail.get('reason', '')).replace('|', '/')[:200]} |" for o in failed]
        metadata["failures"] = MetadataValue.md("\n".join(lines))
    for key, value in extra.items():
        metadata[key] = value if isinstance(value, MetadataValue) else MetadataValue.json(value) if isinstance(
            value, (dict, list)) else value
    return metadata


def preview_markdown(rows: Sequence[dict], limit: int = 5) -> MetadataValue:
    lines = ["| label | chunker | bbox | text |", "|---|---|---|---|"]
    for row in rows[:limit]:
        text = (row.get("text") or "[image]").replace("\n", " ").replace("|", "/")[:120]
        bbox = row.get("bbox")
        box = (f"{bbox['x0']:.3f},{bbox['y0']:.3f},{bbox['x1']:.3f},{bbox['y1']:.3f}" if bbox
               else row.get("bbox_reason"))
        lines.append(f"| {row.get('label')} | {row.get('chunker')} | {box} | {text} |")
    return MetadataValue.md("\n".join(lines))
