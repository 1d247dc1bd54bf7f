"""What every per-document asset does around its stage: loop, then tell each partition its own
story.

A run covers many partitions (``BackfillPolicy.single_run``) and Dagster gives such a run one
``MaterializeResult`` for all of them (dagster#21072). Each partition's own status, counts,
chunks and pictures (its *story*) are therefore an ``AssetObservation`` of that partition,
logged just after the run's materializations (``checks.materialized_with_checks``): the
partition's page shows the observations made after its latest materialization beside it.
They are not the materialization's metadata, because an asset's Overview shows the metadata
of its latest materialization whatever its partition, which would present the last
document's figures as the asset's. The Overview shows the asset's own definition metadata
instead (``about_asset``).
"""

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    AssetExecutionContext,
    AssetKey,
    BackfillPolicy,
    MetadataValue,
)

from ingest_pipeline.identity import display_name
from ingest_pipeline.instance.failure_records import raise_recorded_failure
from ingest_pipeline.instance.run_tags import failure_tags
from ingest_pipeline.runtime import progress
from ingest_pipeline.runtime.collector import fewer_collections
from ingest_pipeline.settings import Settings
from ingest_pipeline.stages import IN_PROCESS_TAG, Outcome
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.store import Store

# Many documents per run: Dagster's per-run overhead is seconds, so runs are batches.
BATCH_POLICY = BackfillPolicy.single_run()

STATUS_TEXT = {
    "new": "new: computed in this run",
    "changed": "changed: recomputed in this run",
    "unchanged": "unchanged: inputs' fingerprint unchanged, nothing recomputed",
    "failed": "FAILED",
    "skipped": "skipped: an upstream stage has no output for this document",
    "empty": "empty: nothing to chunk (no error)",
}


# The order of a run's steps (Dagster's ``dagster/priority`` tag: among the steps whose inputs
# are ready, the higher goes first). The versions that lead an indexed profile for their
# formats go first: as each document's claims are written, their texts reach the model
# (``stages.EmbeddingPrefetch``). The profile's other versions and its chunk map follow, then
# the rest of the run parses and merges while the model works; its embeddings step goes
# last, when nothing is left to overlap.
PRIORITY_TAG = "dagster/priority"
LEADS, SERVED = 2, 1


def served_first(rank: int = SERVED) -> dict[str, str]:
    return {PRIORITY_TAG: str(rank)} if rank else {}


def lead_versions(registry, profile) -> set[str]:
    """The asset names of the versions a profile names that win their format's pages: none
    named before them reads any of their media types (a version without media types reads
    them all)."""
    leads, taken, everything = set(), set(), False
    for chunker in registry.order_for(profile.chunkers, profile.name)[: len(dict.fromkeys(profile.chunkers))]:
        info = registry.info(chunker)
        media = set(info.media_types or ())
        if everything or (media & taken) or (not media and taken):
            continue
        leads.add(info.asset_name)
        taken |= media
        everything = not media
    return leads


def embed_last() -> dict[str, str]:
    return {PRIORITY_TAG: "-1"}


def runs_step_here(context: AssetExecutionContext, settings: Settings, key: AssetKey) -> bool:
    """Whether this run executes the asset ``key``'s step in this very process: the job
    runs its steps in one process (the ``in_process`` executor, or ``execute_in_process``
    whatever the setting) and the run selects the asset."""
    in_process = settings.executor == "in_process" or context.run.tags.get(IN_PROCESS_TAG) == "true"
    selection = context.run.asset_selection  # empty or None: the whole job
    return (
        in_process
        and key in context.job_def.asset_layer.selected_asset_keys
        and (not selection or key in selection)
    )


def stage_key(kind: str, subject: str = "") -> AssetKey:
    """The asset key of a stage (``storage.stage_names`` holds the naming)."""
    return AssetKey.from_user_string(StageName(kind, subject).asset)


def chunk_map_key(profile: str) -> AssetKey:
    return stage_key("chunk_map", profile)


def embeddings_key(profile: str) -> AssetKey:
    return stage_key("embeddings", profile)


def lancedb_key(profile: str) -> AssetKey:
    return stage_key("lancedb", profile)


def retrieval_eval_key(profile: str) -> AssetKey:
    return stage_key("retrieval_eval", profile)


def forced(context: AssetExecutionContext, ingest) -> bool:
    """Whether this run recomputes whatever the fingerprints say: the run tag
    ``ingest/force=true`` (``ingest --force``, or a tag set in the launchpad) or the run
    config ``resources: {ingest: {config: {data: ..., force: true}}}``."""
    from ingest_pipeline.stages import FORCE_TAG

    tagged = str(context.run.tags.get(FORCE_TAG, "")).strip().lower() in ("true", "1", "yes")
    return tagged or bool(getattr(ingest, "force", False))


def document_keys(
    context: AssetExecutionContext, settings: Settings, store: Store, register: bool = False
) -> list[str]:
    """The documents a run works on: its partition keys, a shard key (shard mode) standing
    for the documents of its manifest. ``register`` writes their inventory rows first. In a
    record run (``instance.failure_records``) the step fails here with the recorded reasons."""
    from ingest_pipeline.documents import DocumentEntry
    from ingest_pipeline.storage.shards import documents_of

    raise_recorded_failure(context)
    scheme = settings.shard_scheme
    if scheme is None:
        return list(context.partition_keys)
    found, shard_of = [], {}
    for key in context.partition_keys:
        for doc, path, uri in documents_of(store, scheme, [key]):
            found.append((doc, path, uri))
            shard_of[doc] = key
    _SHARD_OF[context.run_id] = shard_of
    if register:
        store.save_inventory([DocumentEntry(d, path, uri) for d, path, uri in found if uri])
    return [d for d, _, _ in found]


# Shard mode: run id -> {document: its shard's partition key}, for report_partitions.
_SHARD_OF: dict[str, dict[str, str]] = {}


def partition_of(context: AssetExecutionContext) -> Callable[[str], str]:
    """Document -> the partition that stands for it in this run: itself, or in shard mode
    its shard."""
    shard_of = _SHARD_OF.get(context.run_id) or {}
    return lambda document: shard_of.get(document, document)


def for_each_document(
    context: AssetExecutionContext, keys: Iterable[str], step: Callable[[str], Outcome], threads: int = 1
) -> list[Outcome]:
    """Each document's outcome, in the keys' order; with ``threads`` > 1 that many documents
    run at once (``step`` must then be safe to call side by side), and their outcomes are
    logged and reported here, in order, as they finish. Every batch asset comes through
    here, in whatever process runs it, so the process collects garbage less often from
    here on (``collector``)."""
    fewer_collections()
    if threads > 1:
        with ThreadPoolExecutor(threads, thread_name_prefix="document") as pool:
            return _told(context, pool.map(step, keys))
    return _told(context, map(step, keys))


def _told(context: AssetExecutionContext, results: Iterable[Outcome]) -> list[Outcome]:
    outcomes = []
    asset = context.asset_key.to_user_string()
    for outcome in results:
        if outcome.status == "failed":
            context.log.warning(f"{outcome.document}: {display_name(outcome.detail.get('reason'))}")
        progress.report(asset, outcome)  # live progress for an in-process run (the CLI)
        outcomes.append(outcome)
    return outcomes


def _value(value: Any) -> Any:
    if isinstance(value, MetadataValue):
        return value
    if isinstance(value, (dict, list, tuple)):
        return MetadataValue.json(list(value) if isinstance(value, tuple) else value)
    if isinstance(value, bool) or value is None:
        return MetadataValue.text(str(value))
    if isinstance(value, int):
        return MetadataValue.int(value)
    if isinstance(value, float):
        return MetadataValue.float(value)
    return MetadataValue.text(display_name(value))  # a name in it is printed escaped


def outcome_metadata(outcome: Outcome, extra: Mapping[str, Any] | None = None) -> dict[str, MetadataValue]:
    """One document's metadata: its status first (with the reason when it failed), then its own
    counts."""
    status = outcome.status
    if status == "failed":
        stage = outcome.detail.get("stage")
        reason = outcome.detail.get("reason") or outcome.detail.get("error") or "failed"
        headline = f"FAILED{' in ' + stage if stage else ''}: {display_name(reason)}"
    elif outcome.detail.get("failed_upstream"):  # skipped, or asked about a verdict page (A13)
        first = outcome.detail["failed_upstream"][0]
        headline = f"FAILED upstream, in {first['stage']}: {display_name(first['reason'])}"
    else:
        headline = STATUS_TEXT.get(status, status)
    metadata: dict[str, MetadataValue] = {"status": MetadataValue.text(headline)}
    for key, value in outcome.detail.items():
        if key == "stage" or (key == "reason" and status == "failed"):  # already in the headline
            continue
        metadata[key] = _value(value)
    for key, value in (extra or {}).items():
        metadata[key] = _value(value)
    return metadata


def report_partitions(
    context: AssetExecutionContext,
    outcomes: Sequence[Outcome],
    started: float,
    extra: Callable[[Outcome], Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, MetadataValue]]:
    """Each partition's story: every document's own metadata under its partition (in shard
    mode, its shard's: a count per status and a row per document); the step's failures are
    counted on the run's tags."""
    stories: dict[str, dict[str, MetadataValue]] = {}
    shard_of = _SHARD_OF.get(context.run_id)
    if shard_of is not None:
        seconds = round(time.perf_counter() - started, 3)
        by_shard: dict[str, list[Outcome]] = {}
        for outcome in outcomes:
            by_shard.setdefault(shard_of.get(outcome.document, outcome.document), []).append(outcome)
        for shard, members in by_shard.items():
            metadata: dict[str, Any] = {
                "documents": MetadataValue.int(len(members)),
                "run_seconds": MetadataValue.float(seconds),
            }
            for status in sorted({o.status for o in members}):
                metadata[f"documents_{status}"] = MetadataValue.int(sum(o.status == status for o in members))
            metadata["per_document"] = findings_table(
                [
                    {"document": o.document, "status": o.status, "reason": o.detail.get("reason", "")}
                    for o in members
                ]
            )
            stories[shard] = metadata
    else:  # the run's own figures (documents, seconds) are the run page's, not repeated here
        for outcome in outcomes:
            stories[outcome.document] = outcome_metadata(outcome, extra(outcome) if extra else None)
    tag_failures(context, outcomes)
    return stories


EACH_DOCUMENT = (
    "its partition (Partitions tab): its status first (with the stage and reason when it failed), "
    "its own counts and, on chunk maps and chunker versions, every chunk and pictures of its pages; "
    "its latest check results (Checks tab, then a check's Partitions)"
)


def about_asset(files: str, query: str = "", search: str = "") -> dict[str, MetadataValue]:
    """An asset's definition metadata, which its Overview shows: where its output lands, a
    query over every document's rows (DuckDB SQL through the command line) or a search of
    them, and where one document's own story is."""
    return {
        "files": MetadataValue.text(files),
        **({"query": MetadataValue.text(f'ingest-pipeline query "{query}"')} if query else {}),
        **({"search": MetadataValue.text(search)} if search else {}),
        "each_document": MetadataValue.text(EACH_DOCUMENT),
    }


def lake_files(table: str) -> str:
    """Where a per-document table's Parquet lands, under the data root."""
    return f"lake/{table}/<document id>.parquet, one file per document"


def tag_failures(context: AssetExecutionContext, outcomes: Sequence[Outcome]) -> None:
    """Count the step's failed documents on its run's tags (``run_tags.failure_tags``)."""
    failed = sum(o.status == "failed" for o in outcomes)
    if not failed:
        return
    run = context.instance.get_run_by_id(context.run_id)
    existing = dict(run.tags) if run is not None else {}
    context.instance.add_run_tags(context.run_id, failure_tags(existing, context.op_def.name, failed))


def findings_table(rows: Sequence[Mapping[str, Any]], limit: int = 50) -> MetadataValue:
    """A check's failing pages or chunks as a Markdown table (the UI renders it)."""
    if not rows:
        return MetadataValue.md("none")
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:limit]:
        lines.append(
            "| "
            + " | ".join(str(row.get(c, "")).replace("|", "/").replace("\n", " ")[:160] for c in columns)
            + " |"
        )
    if len(rows) > limit:
        lines.append(f"\n{len(rows) - limit} more not shown")
    return MetadataValue.md("\n".join(lines))


LISTING_BYTES = 64 * 1024  # text one partition's chunk listing shows before it points to inspect


def chunk_listing(
    rows: Sequence[dict], path: str, profile: str, budget: int = LISTING_BYTES
) -> MetadataValue:
    """Every chunk of a document, readable: its number, page, role, box, heading path and
    chunk id over its full text; past ``budget`` bytes of text, the command that lists the
    rest."""
    rest = f"ingest-pipeline inspect '{display_name(path)}' --profile {profile}"
    return piece_listing(rows, rest, lambda row: f"`{row.get('chunk_id')}`", budget)


def claim_listing(table: pa.Table, path: str, chunker: str, budget: int = LISTING_BYTES) -> MetadataValue:
    """Every piece a chunker version cut from a document (its claim table, before any
    profile chose from it), readable as ``chunk_listing`` shows chunks, each named by page
    and piece; only the rows the budget shows are turned into Python objects."""
    table = table.sort_by([("page", "ascending"), ("piece", "ascending")])
    sizes = pc.fill_null(pc.utf8_length(table.column("text")), len("[image]")).to_numpy(zero_copy_only=False)
    shown = max(1, int((sizes.cumsum() <= budget).sum())) + 1  # one past the budget says what is left
    rows = table.slice(0, shown).to_pylist()
    rest = f"ingest-pipeline inspect '{display_name(path)}' --stage claims --chunker {chunker}"
    return piece_listing(
        rows, rest, lambda row: f"piece {row.get('piece')}", budget, noun="pieces", total=table.num_rows
    )


def piece_listing(
    rows: Sequence[dict],
    rest_command: str,
    label: Callable[[dict], str],
    budget: int = LISTING_BYTES,
    noun: str = "chunks",
    total: int | None = None,
) -> MetadataValue:
    """Rows of pieces as Markdown: per row a line of its number, page, role, box, heading
    path and ``label``, then its whole text quoted; past ``budget`` bytes of text, how many
    are left (of ``total``, when ``rows`` are only its first) and ``rest_command``, which
    lists them."""
    total = len(rows) if total is None else total
    lines, used = [], 0
    for number, row in enumerate(rows, start=1):
        text = row.get("text") or "[image]"
        if used and used + len(text) > budget:
            lines.append(f"*{total - number + 1} more {noun}:* `{rest_command}`")
            break
        used += len(text)
        bbox = row.get("bbox")
        box = (
            f"[{bbox['x0']:.3f}, {bbox['y0']:.3f}, {bbox['x1']:.3f}, {bbox['y1']:.3f}]"
            if bbox
            else row.get("bbox_reason") or "no box"
        )
        heading = " › ".join(row.get("header_path") or [])
        head = f"**{number}** · page {row.get('page')} · {row.get('role')} · {box}"
        lines.append(head + (f" · {heading}" if heading else "") + f" · {label(row)}")
        lines.extend("> " + (line.replace("|", "/") or " ") for line in text.split("\n"))
        lines.append("")
    return MetadataValue.md("\n".join(lines))
