"""What both sensor modes share: the cursor of seen files and pending batches, settling the
batches whose runs ended (retried, or given up with an errors row), and the run and
partition requests a tick makes."""

from __future__ import annotations

import base64
import json
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    DagsterRunStatus,
    DeleteDynamicPartitionsRequest,
    RunRequest,
    RunsFilter,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.stages import PartitionPlan

# A cursor past this size is stored compressed (10,000 seen files are ~0.5 MB of JSON).
COMPRESS_CURSOR_OVER = 32 * 1024
BATCH_TAG = "ingest_pipeline/batch"
SOURCE_TAG = "ingest_pipeline/source"
# A requested batch whose run never appears (the request was lost) is requested again after this.
LOST_AFTER_SECONDS = 600
_ENDED_BADLY = {DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def range_tags(start: str, end: str) -> dict[str, str]:
    return {ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end}


@dataclass
class SensorCursor:
    """``seen``: path -> [size, mtime_ns] of files whose run ended; ``pending``: batch id ->
    the files (path -> signature) it covers, how often it was tried, and when it was asked."""

    seen: dict[str, list] = field(default_factory=dict)
    pending: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, raw: str | None) -> "SensorCursor":
        if raw and raw.startswith(_COMPRESSED):
            raw = zlib.decompress(base64.b64decode(raw[len(_COMPRESSED) :])).decode("utf-8")
        data = json.loads(raw) if raw else {}
        return cls(seen=data.get("seen", {}), pending=data.get("pending", {}))

    def dump(self) -> str:
        text = json.dumps({"seen": self.seen, "pending": self.pending}, sort_keys=True)
        if len(text) <= COMPRESS_CURSOR_OVER:
            return text
        return _COMPRESSED + base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")

    def pending_paths(self) -> set[str]:
        return {rel for batch in self.pending.values() for rel in batch["files"]}


_COMPRESSED = "zlib:"


def _latest_runs(instance, batch_ids: list[str]) -> dict:
    """The newest run of each pending batch, in one query for all of them."""
    if not batch_ids:
        return {}
    latest: dict = {}
    for run in instance.get_runs(filters=RunsFilter(tags={BATCH_TAG: batch_ids})):  # newest first
        latest.setdefault(run.tags.get(BATCH_TAG), run)
    return latest


@dataclass
class Settlement:
    """What one tick learned from the runs of pending batches. ``retry``: key -> (signature,
    tries so far) to request again; ``gave_up``: (key, signature, why, run id, tries) of
    batches past their retries, already marked seen (the caller writes their errors rows)."""

    settled: int = 0
    retry: dict[str, tuple[list, int]] = field(default_factory=dict)
    gave_up: list[tuple[str, Any, str, str, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def settle_pending(instance, cursor: SensorCursor, retries: int, now: float) -> Settlement:
    """Settle the pending batches whose runs ended: success marks their keys seen, a failed or
    cancelled run (or one never launched) asks again up to ``retries`` times, then gives up.
    Shared by the per-document sensor (keys are paths) and shard mode (keys are shards)."""
    out = Settlement()
    latest = _latest_runs(instance, list(cursor.pending))
    for batch_id, batch in list(cursor.pending.items()):
        run = latest.get(batch_id)
        if run is None:
            if now - batch["at"] < LOST_AFTER_SECONDS:
                continue
            status, run_id = None, None
        elif not run.is_finished:
            continue
        else:
            status, run_id = run.status, run.run_id
        del cursor.pending[batch_id]
        out.settled += 1
        if status == DagsterRunStatus.SUCCESS:
            cursor.seen.update(batch["files"])
            continue
        tries = batch["tries"] + 1
        why = f"run {run_id} ended {status.value}" if status else "its run was never launched"
        if tries <= retries:
            out.notes.append(f"batch {batch_id}: {why}; asking again ({tries}/{retries})")
            for key, sig in batch["files"].items():
                out.retry[key] = (sig, tries)
            continue
        out.notes.append(f"batch {batch_id}: {why}, {tries} times; giving up until the files change")
        for key, sig in batch["files"].items():
            out.gave_up.append((key, sig, why, run_id or "", tries))
            cursor.seen[key] = sig
    return out


def request_batches(
    cursor: SensorCursor,
    batches: list[list[str]],
    wanted: dict[str, tuple[str, Any]],
    retry: dict[str, tuple[Any, int]],
    job_name: str,
    now: float,
) -> list[RunRequest]:
    """One run per planned batch of partition keys (``stages.reconcile``; ``wanted``: key ->
    (cursor key, its signature)), each recorded as pending under its batch tag until its run
    ends."""
    requests = []
    for batch in batches:
        batch_id = uuid.uuid4().hex[:12]
        files = dict(wanted[k] for k in batch)
        tries = max((retry.get(key, (None, 0))[1] for key in files), default=0)
        cursor.pending[batch_id] = {"files": files, "tries": tries, "at": now}
        requests.append(
            RunRequest(
                job_name=job_name,
                tags={**range_tags(batch[0], batch[-1]), BATCH_TAG: batch_id, SOURCE_TAG: "sensor"},
            )
        )
    return requests


def partition_requests_for(plan: PartitionPlan) -> list:
    """The requests that add and remove the partitions a plan says (nothing when it changes none)."""
    requests: list = []
    if plan.add:
        requests.append(AddDynamicPartitionsRequest(DOCUMENTS, plan.add))
    if plan.remove:
        requests.append(DeleteDynamicPartitionsRequest(DOCUMENTS, plan.remove))
    return requests
