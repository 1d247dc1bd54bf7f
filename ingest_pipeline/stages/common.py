"""What every stage shares: the outcome of one document's stage, the failures a stage
raises, input fingerprints and stage versions, the force switch, and the errors rows that
``guarded`` writes when one document fails (so the batch goes on)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.storage.store import Store

# Bump a stage's version when its output for the same input changes. Keyed by asset family
# (``chunks`` is every ``chunks/<id>_v<version>`` asset); only the numbers enter fingerprints.
STAGE_VERSIONS = {"sources": 1, "pages": 1, "chunks": 2, "chunk_map": 1, "embeddings": 1, "lancedb": 2}


class StageError(Exception):
    """A per-document failure with a one-line reason."""


class NoChunks(StageError):
    """The chunk map of a document is empty because pages failed or chunkers raised; the
    reason says what its pages were. (A document with nothing to chunk is no error.)"""


class UpstreamMissing(Exception):
    """A stage's input is absent because an earlier stage failed for this document."""


# Run tag (set by ``ingest --force``, or in the launchpad) that makes every stage recompute
# whatever its fingerprint says; the ``ingest`` resource's ``force`` config does the same.
FORCE_TAG = "ingest/force"
# Run tag on the runs the command line executes with ``execute_in_process``: every step in
# the one process, whatever executor the settings name.
IN_PROCESS_TAG = "ingest/in_process"
# What an unchanged outcome says about itself, so a skip is never silent.
UNCHANGED = {
    "skipped_because": "inputs' fingerprint unchanged",
    "to_recompute": f"run with tag {FORCE_TAG}=true or resource config ingest.force = true "
    "(ingest --force PATH)",
}


@dataclass
class Finding:
    """One check's verdict over a batch of documents, as plain data: the failing items
    (a table under metadata key ``table``) and further counts. The assets turn it into an
    asset check result."""

    check: str
    passed: bool
    table: str
    rows: list[dict[str, Any]]
    counts: dict[str, Any] = field(default_factory=dict)
    warn: bool = False  # a failure warns instead of erroring
    description: str | None = None


@dataclass
class Outcome:
    document: str
    status: str  # new | unchanged | failed | skipped
    detail: dict[str, Any] = field(default_factory=dict)
    # What the stage still holds in memory of what it just wrote or found (rows, metadata),
    # for its asset's checks and metadata, so they need not read it back. Never metadata.
    kept: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def now() -> datetime:
    return datetime.now(timezone.utc)


def fingerprint_of(*parts: Any) -> str:
    return sha256_text(canonical_json(parts))


# ---------------------------------------------------------------- errors


def record_error(
    store: Store, stage: str, document: str, exc: BaseException, run_id: str, path: str | None = None
) -> dict[str, Any]:
    """The document's errors row for ``stage``; ``path``: its label when the inventory has none."""
    entry = store.entry(document)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    row = {
        "document_id": document,
        "path": entry.path if entry else path,
        "stage": stage,
        "error": type(exc).__name__,
        "reason": reason[:500],
        "run_id": run_id,
        "at": now(),
    }
    detail = "".join(traceback.format_exception(exc)) if not isinstance(exc, StageError) else ""
    store.write_error(stage, document, row, detail[-4000:])
    return row


def clear_error(store: Store, stage: str, document: str) -> None:
    store.clear_error(stage, document)


def error_traceback(store: Store, stage: str, document: str) -> str:
    """The traceback stored with a document's error at ``stage`` ('' if none)."""
    return store.error_traceback(stage, document)


def skipped(store: Store, document: str, reason: str) -> Outcome:
    """A document this stage had no input for; ``failed_upstream`` names the earlier stages
    that failed on it, with their reasons, when that is why."""
    detail: dict[str, Any] = {"reason": reason}
    earlier = [{"stage": e["stage"], "reason": e["reason"]} for e in store.document_errors(document)]
    if earlier:
        detail["failed_upstream"] = earlier
    return Outcome(document, "skipped", detail)


def guarded(store: Store, stage: str, document: str, run_id: str, fn, *args, **kwargs) -> Outcome:
    """Run one document's stage; a failure becomes an errors row and a 'failed' outcome."""
    try:
        outcome = fn(*args, **kwargs)
    except UpstreamMissing as exc:
        return skipped(store, document, str(exc))
    except Exception as exc:  # one document's failure must not fail the batch
        row = record_error(store, stage, document, exc, run_id)
        return Outcome(document, "failed", {"reason": row["reason"], "error": row["error"], "stage": stage})
    if outcome.status != "failed":  # a stage may record its own failure and still return
        clear_error(store, stage, document)
    return outcome


def direct(fn, *args):
    """Call ``fn`` in this process (the stages' stand-in for a parse worker)."""
    return fn(*args)


def parsed(parser, limits: dict[str, Any], fn, *args):
    """``fn(*args)`` in the parse worker under ``limits`` (a route's), or here without one."""
    return parser.call(fn, *args, **limits) if parser else fn(*args)
