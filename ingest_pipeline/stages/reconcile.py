"""Folder <-> partitions: which partitions to add and remove and which contiguous batches of
them to run (``plan_partitions``, for the CLI's ``ingest``, the source sensor and its shard
mode alike), and, in document mode, forgetting the documents whose files are gone (their
rows leave LanceDB and the lake) while registering the ones found (``reconcile``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ingest_pipeline.documents import DocumentEntry
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import VectorIndex


@dataclass
class PartitionPlan:
    add: list[str]  # partition keys seen for the first time
    remove: list[str]  # partition keys that go
    ordered: list[str]  # the partition keys once the plan is applied, in the instance's order
    batches: list[list[str]]  # contiguous ranges of ``ordered`` covering exactly the keys to run


def plan_partitions(
    partition_keys: Sequence[str], run: Iterable[str], gone: Iterable[str], batch_size: int
) -> PartitionPlan:
    """``partition_keys``: the current ones in order (read once); ``run``: the keys to run
    (new ones go after the current ones); ``gone``: keys whose documents (or shards) are
    gone. A key is added or removed only if that changes the partitions."""
    run = list(dict.fromkeys(run))
    known = set(partition_keys)
    add = [k for k in run if k not in known]
    remove = sorted({k for k in gone if k in known})
    dropped = set(remove)
    ordered = [k for k in partition_keys if k not in dropped] + add
    return PartitionPlan(add, remove, ordered, contiguous_batches(ordered, set(run), batch_size))


def reconcile(
    store: Store,
    index: VectorIndex,
    entries: Sequence[DocumentEntry],
    gone: Iterable[str],
    partition_keys: Sequence[str],
    batch_size: int,
) -> PartitionPlan:
    """Document mode: forget the ``gone`` documents, write the inventory rows of
    ``entries``, and plan their partitions (each document is its own partition)."""
    gone = sorted(set(gone))
    if gone:
        remove_documents(store, index, gone)
    store.save_inventory(entries)
    return plan_partitions(partition_keys, [e.document_id for e in entries], gone, batch_size)


def contiguous_batches(ordered: Sequence[str], wanted: set[str], size: int) -> list[list[str]]:
    """Runs of consecutive partition keys covering exactly ``wanted``, each at most ``size``
    long: a batch is one run over a range of partitions."""
    batches: list[list[str]] = []
    run: list[str] = []
    for key in ordered:
        if key in wanted:
            run.append(key)
            if len(run) == size:
                batches.append(run)
                run = []
        elif run:
            batches.append(run)
            run = []
    if run:
        batches.append(run)
    return batches


def remove_document(store: Store, index: VectorIndex, document: str) -> dict[str, int]:
    """Forget a document: its rows leave every LanceDB table and every lake table."""
    return remove_documents(store, index, [document])


def remove_documents(store: Store, index: VectorIndex, documents: Sequence[str]) -> dict[str, int]:
    """Forget many documents at once: LanceDB rows first (search stops serving them), then
    their lake files, in one pass over each."""
    rows = index.delete_documents(documents)
    files = store.delete_documents(documents)
    return {"lancedb_rows": rows, "lake_files": files}
