"""The ``chunks/<id>_v<version>`` stage: ask one chunker version about one document and
store its claims (table ``claims``); and load a claim back for the chunk map."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ingest_pipeline.contract import ChunkingError, ChunkPiece, PageChunks, PageOutput
from ingest_pipeline.identity import with_reader_settings
from ingest_pipeline.registry import ChunkerInfo, ChunkerRegistry, stated_config
from ingest_pipeline.runtime.isolation import ParseWorker
from ingest_pipeline.settings import Settings
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Finding,
    Outcome,
    StageError,
    clear_error,
    fingerprint_of,
    parsed,
    record_error,
)
from ingest_pipeline.stages.merge import Claim
from ingest_pipeline.stages.pages import load_pages
from ingest_pipeline.stages.routes import check_chunker_routed
from ingest_pipeline.stages.sources import load_source, parse_limits, password_of, source_bytes
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.configs import code_version, remember
from ingest_pipeline.storage.lake import as_stored
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.store import Store, piece_row


def run_chunker(
    settings: Settings,
    store: Store,
    chunker: Any,
    info: ChunkerInfo,
    document: str,
    run_id: str,
    parser: ParseWorker | None = None,
    force: bool = False,
    keep_pieces: bool = False,
    registry: ChunkerRegistry | None = None,
) -> Outcome:
    """Ask one chunker version about one document and store its claims (``keep_pieces``:
    the outcome keeps the pieces it cut too, as ``pieces``, with the document's ``path``).

    A chunker that raises is recorded (an errors row and the claim's error) and its
    claim is empty, so the chunk map moves on to the next chunker. Every chunker is asked
    about every document (its ``media_types`` only advertise, SPEC B33) unless its own fast
    answer, ``disclaims(media_type)``, disclaims it unread: then its claim is empty.
    """
    source, _ = load_source(store, document)
    if registry is not None:  # a version the document's route does not use skips it
        check_chunker_routed(settings, registry, source, info.ref)
    pages, pages_fp = load_pages(store, document)
    reader_identity = (store.pages_meta(document) or {}).get("reader_identity") or {}
    cfg_hash = with_reader_settings(info.config_hash, reader_identity)
    fingerprint = fingerprint_of(STAGE_VERSIONS["chunks"], pages_fp, info.ref, cfg_hash)
    previous = store.claim_meta(info.asset_name, document)
    _remember_configs(store, chunker, info, cfg_hash, reader_identity)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        return _upstream(
            store,
            document,
            Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED}, {"meta": previous}),
        )
    started = time.perf_counter()
    worked, error = _ask(
        settings, store, chunker, info, document, source, pages, cfg_hash, run_id, parser, keep_pieces
    )
    summary = {
        "pieces": worked.table.num_rows,
        "config_hash": cfg_hash,
        "seconds": round(time.perf_counter() - started, 4),
    }
    meta = {
        "fingerprint": fingerprint,
        "chunker": info.ref,
        "config_hash": cfg_hash,
        "chunker_config_hash": info.config_hash,
        "reader_settings": reader_identity,
        # the hash the claim had before this one, when it differs: old and new side by side
        "previous_config_hash": (
            previous.get("config_hash")
            if previous and previous.get("config_hash") != cfg_hash
            else (previous or {}).get("previous_config_hash")
        ),
        "claimed_pages": worked.pages,
        "left_out_pages": worked.left_out,
        "error": error,
        "content": worked.content,
        "summary": summary,
        "checks": worked.checks,
        "metrics": worked.metrics,
    }
    store.write_claim(info.asset_name, document, worked.table, meta)
    kept: dict[str, Any] = {"meta": as_stored(meta)}
    if keep_pieces:
        kept.update(pieces=worked.pieces or [], path=source["path"])
    status, detail = "failed" if error else "new", {**summary, **({"error": error} if error else {})}
    return _upstream(store, document, Outcome(document, status, detail, kept))


def _upstream(store: Store, document: str, outcome: Outcome) -> Outcome:
    """A document no reader opened was still handed to the chunkers (its verdict page,
    SPEC A13); its outcome says it failed upstream, as a skipped stage's would."""
    if not (store.pages_meta(document) or {}).get("unopened"):
        return outcome
    earlier = [{"stage": e["stage"], "reason": e["reason"]} for e in store.document_errors(document)]
    return Outcome(
        outcome.document, outcome.status, {**outcome.detail, "failed_upstream": earlier}, outcome.kept
    )


def _remember_configs(
    store: Store, chunker: Any, info: ChunkerInfo, cfg_hash: str, reader: dict[str, Any]
) -> None:
    """Keep the values behind the claim's config hash (and the chunker's own, when the
    reader's settings made them differ) in the ``configs`` table."""
    stated = stated_config(chunker)
    version = code_version(chunker)
    remember(store, info.config_hash, info.ref, {"chunker": info.ref, "config": stated}, version)
    if cfg_hash != info.config_hash:
        values = {
            "chunker": info.ref,
            "config": stated,
            "reader": reader,
            "chunker_config_hash": info.config_hash,
        }
        remember(store, cfg_hash, info.ref, values, version)


def _ask(
    settings: Settings,
    store: Store,
    chunker: Any,
    info: ChunkerInfo,
    document: str,
    source: dict[str, Any],
    pages: list,
    cfg_hash: str,
    run_id: str,
    parser: ParseWorker | None,
    keep_pieces: bool,
) -> tuple[WorkedClaim, str | None]:
    """The chunker's claim of the document (in the parse worker when there is one) and the
    error it raised, recorded as an errors row; an empty claim when it raised or its own
    fast answer (``disclaims``) disclaimed the document's media type unread."""
    error = None
    worked: WorkedClaim | None = None
    try:
        if not _disclaims_unread(chunker, source["media_type"]):  # else an empty claim, unasked
            stamp = {
                "document_id": document,
                "chunker": info.ref,
                "config_hash": cfg_hash,
                "source_sha256": source["sha256"],
                "run_id": run_id,
            }
            worked = parsed(
                parser,
                parse_limits(settings, source),
                claim_document,
                chunker,
                source_bytes(source),
                source["media_type"],
                pages,
                password_of(settings, source),
                stamp,
                info.ref,
                info.config_hash,
                keep_pieces,
            )
    except ChunkingError as exc:  # the chunker's own verdict: this document cannot be split
        error = f"could not be split: {exc}".splitlines()[0][:500]
        record_error(store, StageName.chunker(info.ref).stage, document, ChunkingError(error), run_id)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        record_error(store, StageName.chunker(info.ref).stage, document, exc, run_id)
    else:
        clear_error(store, StageName.chunker(info.ref).stage, document)
    if worked is None:
        empty = tables.CLAIMS.empty_table()
        worked = WorkedClaim(empty, [], _claim_content(empty, [], error, info.ref, info.config_hash))
    return worked, error


def _disclaims_unread(chunker: Any, media_type: str) -> bool:
    """The chunker's own fast answer (the built-ins: nothing outside their media types);
    a chunker without one is asked."""
    fast = getattr(chunker, "disclaims", None)
    return bool(fast(media_type)) if callable(fast) else False


@dataclass
class WorkedClaim:
    """A chunker's answer for a document as the parse worker hands it back: the claim's
    rows as one Arrow table (pickled whole, where the pieces themselves were pickled and
    rebuilt one object at a time), the pages it claimed, the hash of what it says, its own
    checks and metrics, and its pieces only when the caller keeps them."""

    table: pa.Table
    pages: list[int]
    content: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    pieces: list[ChunkPiece] | None = None
    # pages it claimed with no pieces -> what it said it left out of them (B36)
    left_out: dict[str, list[str]] = field(default_factory=dict)


def claim_document(
    chunker: Any,
    content: bytes,
    media_type: str,
    pages: tuple[PageOutput, ...],
    password: str | None,
    stamp: dict[str, Any],
    ref: str,
    config_hash: str,
    keep_pieces: bool,
) -> WorkedClaim:
    """``chunk_document`` in the parse worker, its answer made into the claim's rows there
    (``stamp``: the columns every row of the claim shares)."""
    answer, checks, metrics = chunk_document(chunker, content, media_type, pages, password)
    rows = [
        {**stamp, "page": page_answer.page, "piece": number, **piece_row(piece)}
        for page_answer in answer
        for number, piece in enumerate(page_answer.pieces)
    ]
    claimed = sorted({a.page for a in answer if a.claims})  # zero pieces, nothing said: no claim (B36)
    table = pa.Table.from_pylist(rows, schema=tables.CLAIMS)
    return WorkedClaim(
        table,
        claimed,
        _claim_content(table, claimed, None, ref, config_hash),
        checks,
        metrics,
        [piece for page_answer in answer for piece in page_answer.pieces] if keep_pieces else None,
        {str(a.page): list(a.left_out) for a in answer if a.left_out and not a.pieces},
    )


_CONTENT_COLUMNS = ["page", "piece", *(name for name, _ in tables.PIECE_FIELDS)]


def _claim_content(table: pa.Table, pages: list[int], error: str | None, ref: str, config_hash: str) -> str:
    """A hash of what a claim says (not of how it was asked): a chunker that disclaims a
    document says the same thing under any configuration, so the chunk map downstream of
    it stays as it is when only that configuration changes. The pieces' columns are
    hashed as one Arrow IPC stream (about a sixth of the CPU of hashing them as JSON)."""
    digest = None
    if table.num_rows:
        sink = pa.BufferOutputStream()
        pieces = table.select(_CONTENT_COLUMNS)
        with pa.ipc.new_stream(sink, pieces.schema) as writer:
            writer.write_table(pieces)
        digest = hashlib.sha256(sink.getvalue()).hexdigest()
    # Chunk ids hash the config, so a claim with pieces depends on it.
    return fingerprint_of(ref, config_hash if table.num_rows else None, pages, error, digest)


def chunk_document(
    chunker: Any, content: bytes, media_type: str, pages: tuple[PageOutput, ...], password: str | None
) -> tuple[tuple[PageChunks, ...], list[dict[str, Any]], dict[str, Any]]:
    """One chunker's answer for a document, its own checks and metrics (runs in the parse
    worker, so everything here is picklable). The password reaches the chunker inside
    its content (SourceBytes)."""
    from ingest_pipeline.contract import SourceBytes

    answer = tuple(chunker.chunk(SourceBytes(content, password), media_type, pages) or ())
    ref = f"{getattr(chunker, 'id', '?')}@{getattr(chunker, 'version', '?')}"
    for item in answer:
        if not isinstance(item, PageChunks):
            raise TypeError(f"{ref} answered {type(item).__name__}, not PageChunks")
    checks = []
    if hasattr(chunker, "check"):
        for outcome in chunker.check(content, media_type, pages, answer):
            checks.append(
                {
                    "name": outcome.name,
                    "passed": outcome.passed,
                    "severity": outcome.severity,
                    "description": outcome.description,
                    "metadata": dict(outcome.metadata),
                }
            )
    metrics = dict(chunker.metrics(answer)) if hasattr(chunker, "metrics") and answer else {}
    return answer, checks, metrics


def claim_metas(store: Store, order: Sequence[ChunkerInfo], document: str) -> list[dict[str, Any]]:
    """The metadata of each chunker version's claim of a document, in order (its pieces
    are not read)."""
    metas = []
    for info in order:
        meta = store.claim_meta(info.asset_name, document)
        if meta is None:
            raise StageError(
                f"{StageName.chunker(info.ref).asset} has not been materialized for this document"
            )
        metas.append(meta)
    return metas


def claim_content(meta: dict[str, Any]) -> str:
    """The hash of what a claim says, from its metadata."""
    return meta.get("content") or meta.get("fingerprint", "")


def load_winning_claims(
    store: Store,
    order: Sequence[ChunkerInfo],
    metas: Sequence[dict[str, Any]],
    document: str,
    pages: Sequence[PageOutput],
) -> list[Claim]:
    """The claims of a chunker order as ``merge_claims`` uses them, reading only what can
    reach the chunk map: the pages each claim wins (first in order), and pages the document
    does not have (so the merge can count what it drops there). A claim that wins nothing
    is passed without pieces; its metadata says which pages it claimed."""
    known = {p.page for p in pages}
    taken: set[int] = set()
    claims = []
    for info, meta in zip(order, metas, strict=True):
        config_hash = meta.get("config_hash", info.config_hash)
        if meta.get("error") is not None:
            claims.append(Claim(chunker=info.ref, config_hash=config_hash, error=meta["error"]))
            continue
        claimed = meta.get("claimed_pages")
        wanted = None
        if claimed is not None:
            wins = {p for p in claimed if p in known and p not in taken}
            wanted = wins | {p for p in claimed if p not in known}
            taken |= wins
            if not wanted:
                claims.append(Claim(chunker=info.ref, config_hash=config_hash))
                continue
        _, by_page = store.claim(info.asset_name, document, pages=wanted, meta=meta)
        if claimed is None:
            taken |= {p for p in by_page if p in known}
        said = meta.get("left_out_pages") or {}
        empty = {p: () for p in wanted or () if p not in by_page}  # claimed with no pieces (B36)
        answers = sorted({**empty, **by_page}.items())
        claims.append(
            Claim(
                chunker=info.ref,
                config_hash=config_hash,
                pages=tuple(
                    PageChunks(page=p, pieces=tuple(v), left_out=() if v else _said(said, p))
                    for p, v in answers
                ),
            )
        )
    return claims


def _said(left_out_pages: dict[str, list[str]], page: int) -> tuple[str, ...]:
    """What a claim said it left out of a page it claimed with no pieces (a claim stored
    before that was kept claimed pages with no pieces, and says so)."""
    return tuple(left_out_pages.get(str(page)) or ("claimed with no pieces",))


def claim_detail(meta: dict[str, Any], info: ChunkerInfo, failed: bool) -> dict[str, Any]:
    """What a document's claim says about itself, for its materialization: the chunker, the
    pages it claimed, whether it applies to the document at all, its own metrics."""
    claimed = len(meta.get("claimed_pages") or [])
    detail: dict[str, Any] = {"chunker": info.ref, "config_hash": info.config_hash, "claimed_pages": claimed}
    if not failed and meta and claimed == 0:
        detail["applies"] = f"not applicable: {info.ref} claims no page of this document"
    elif claimed:
        detail["applies"] = f"claims {claimed} page(s)"
    if meta.get("metrics"):
        detail["chunker_metrics"] = meta["metrics"]
    return detail


def flagged_pages(meta: Mapping[str, Any]) -> list[int]:
    """The pages a claim's failing checks name, the way the built-in checks name them: a
    ``page`` in a list of findings, or a page number as the key of a mapping."""
    pages: set[int] = set()
    for check in meta.get("checks") or ():
        if check.get("passed"):
            continue
        for value in (check.get("metadata") or {}).values():
            if isinstance(value, list):
                named = (v.get("page") for v in value if isinstance(v, dict))
            elif isinstance(value, dict):
                named = iter(value)
            else:
                continue
            pages |= {int(p) for p in named if str(p).isdigit()}
    return sorted(pages)


def claim_findings(metas: dict[str, dict[str, Any]], check_names: Sequence[str]) -> list[Finding]:
    """The chunker's own checks over a batch, from the claims' metadata (read once per
    document): per check, the documents that failed it."""
    findings = []
    for name in check_names:
        failures, warn, description = [], False, None
        for doc, meta in metas.items():
            for c in meta.get("checks", []):
                if c["name"] != name:
                    continue
                description = description or c.get("description")
                if not c["passed"]:
                    failures.append({"document": doc, **c.get("metadata", {})})
                    warn = warn or c.get("severity") == "warn"
        findings.append(
            Finding(
                name,
                not failures,
                "failing",
                failures,
                {"documents_failing": len(failures), "documents_checked": len(metas)},
                warn=warn,
                description=description,
            )
        )
    return findings
