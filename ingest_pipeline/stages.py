"""The pipeline's stages as plain functions over the lake, one document at a time.

Each stage reads its inputs from the lake, writes its output atomically, and stores an
input fingerprint with it: when the fingerprint is unchanged the stage does nothing, so a
second run over the same bytes and configuration rewrites and re-embeds nothing.
Assets and the CLI are thin callers of these.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa

from ingest_pipeline import media_types, object_store, tables
from ingest_pipeline.contract import ChunkPiece, Layout, LocatedLine, PageChunks, PageOutput
from ingest_pipeline.documents import DocumentEntry, UntrustedSource, check_trusted, load_entry
from ingest_pipeline.embedding import Embedder
from ingest_pipeline.faults import crash_point
from ingest_pipeline.identity import canonical_json, sha256_bytes, sha256_text, with_reader_settings
from ingest_pipeline.isolation import ParseWorker
from ingest_pipeline.lake import Lake
from ingest_pipeline.merge import Claim, merge_claims
from ingest_pipeline.readers import changed_settings, read_pages, reader_ids, reader_settings
from ingest_pipeline.readers.ocr import ocr_concerns
from ingest_pipeline.readers.base import ReadOptions, password_for
from ingest_pipeline.registry import ChunkerInfo, ChunkerRegistry
from ingest_pipeline.settings import Profile, Settings
from ingest_pipeline.token_limits import bounded_counts, over_limit, relink, split_to_limit, table_problems
from ingest_pipeline.vector_index import VectorIndex, index_schema

# Bump a stage's version when its output for the same input changes.
STAGE_VERSIONS = {"sources": 1, "pages": 1, "claims": 1, "chunks": 1, "embeddings": 1, "index": 1}


class StageError(Exception):
    """A per-document failure with a one-line reason."""


class NoChunks(StageError):
    """The chunk map of a document is empty because pages failed or chunkers raised; the
    reason says what its pages were. (A document with nothing to chunk is no error.)"""


def empty_reason(lake: Lake, profile: str, document: str) -> str | None:
    """Why a document has zero chunks in a profile's chunk map, when that is a success."""
    meta = lake.meta("chunks", profile, document) or {}
    return meta.get("no_chunks") if meta.get("empty") else None


class UpstreamMissing(Exception):
    """A stage's input is absent because an earlier stage failed for this document."""


# Run tag (set by ``ingest --force``, or in the launchpad) that makes every stage recompute
# whatever its fingerprint says; the ``ingest`` resource's ``force`` config does the same.
FORCE_TAG = "ingest/force"
# What an unchanged outcome says about itself, so a skip is never silent.
UNCHANGED = {"skipped_because": "inputs' fingerprint unchanged",
             "to_recompute": f"run with tag {FORCE_TAG}=true or resource config ingest.force = true "
                             "(ingest --force PATH)"}


@dataclass
class Outcome:
    document: str
    status: str  # new | unchanged | failed | skipped
    detail: dict[str, Any] = field(default_factory=dict)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _fingerprint(*parts: Any) -> str:
    return sha256_text(canonical_json(parts))


# ---------------------------------------------------------------- errors


def record_error(lake: Lake, stage: str, document: str, exc: BaseException, run_id: str) -> dict[str, Any]:
    entry = load_entry(lake, document)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    row = {
        "document_id": document,
        "path": entry.path if entry else None,
        "stage": stage,
        "error": type(exc).__name__,
        "reason": reason[:500],
        "run_id": run_id,
        "at": _now(),
    }
    detail = "".join(traceback.format_exception(exc)) if not isinstance(exc, StageError) else ""
    lake.write("errors", (_stage_dir(stage), document), pa.Table.from_pylist([row], schema=tables.ERRORS),
               meta={"traceback": detail[-4000:]})
    return row


def clear_error(lake: Lake, stage: str, document: str) -> None:
    lake.delete("errors", _stage_dir(stage), document)


def error_traceback(lake: Lake, stage: str, document: str) -> str:
    """The traceback stored with a document's error at ``stage`` ('' if none)."""
    return str((lake.meta("errors", _stage_dir(stage), document) or {}).get("traceback") or "")


def _stage_dir(stage: str) -> str:
    return stage.replace("/", "__").replace("@", "_v")


def guarded(lake: Lake, stage: str, document: str, run_id: str, fn, *args, **kwargs) -> Outcome:
    """Run one document's stage; a failure becomes an errors row and a 'failed' outcome."""
    try:
        outcome = fn(*args, **kwargs)
    except UpstreamMissing as exc:
        return Outcome(document, "skipped", {"reason": str(exc)})
    except Exception as exc:  # one document's failure must not fail the batch
        row = record_error(lake, stage, document, exc, run_id)
        return Outcome(document, "failed", {"reason": row["reason"], "error": row["error"], "stage": stage})
    if outcome.status != "failed":  # a stage may record its own failure and still return
        clear_error(lake, stage, document)
    return outcome


# ---------------------------------------------------------------- sources


def observe_source(settings: Settings, lake: Lake, document: str, run_id: str, force: bool = False) -> Outcome:
    """Record a document's bytes: media type from the bytes, size, sha256, mtime, path.

    A file that cannot be observed (refused link, over its size limit, gone) loses its
    previous source row, so nothing downstream keeps serving what that row described."""
    entry = load_entry(lake, document)
    if entry is None:
        raise StageError(f"document {document} is not in the inventory; ingest its file first")
    try:
        return _observe(settings, lake, entry, run_id, force)
    except Exception:
        lake.delete("sources", document)
        raise


def _observe(settings: Settings, lake: Lake, entry: DocumentEntry, run_id: str, force: bool) -> Outcome:
    document = entry.document_id
    try:
        real = check_trusted(settings, entry)
    except UntrustedSource as exc:
        raise StageError(str(exc)) from None
    try:
        stat = object_store.stat(real)
        media = media_types.detect_stream(lambda: object_store.open_input(real), stat.size, entry.path)
    except FileNotFoundError:
        raise StageError(f"source file is gone: {entry.path}") from None
    if stat.size > settings.max_file_bytes:
        raise StageError(f"file is {stat.size} bytes, over the limit of {settings.max_file_bytes}")
    family = media_types.size_family(media)
    limit = settings.max_bytes.get(family)
    if limit is not None and stat.size > limit:
        raise StageError(f"{media} file of {stat.size / MIB:.1f} MiB is over the {family} limit of "
                         f"{limit / MIB:g} MiB ([limits.max_mib] {family}); not loaded")
    try:
        sha = object_store.sha256(real, _HASH_BLOCK)
    except FileNotFoundError:
        raise StageError(f"source file is gone: {entry.path}") from None
    fingerprint = _fingerprint(STAGE_VERSIONS["sources"], sha, media, entry.path)
    previous = lake.meta("sources", document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        return Outcome(document, "unchanged", {"sha256": sha, "media_type": media, **UNCHANGED})
    row = {
        "document_id": document,
        "path": entry.path,
        "uri": entry.uri,
        "media_type": media,
        "bytes": stat.size,
        "sha256": sha,
        "mtime": datetime.fromtimestamp(stat.mtime, timezone.utc),
        "status": "observed",
        "observed_at": _now(),
        "run_id": run_id,
    }
    lake.write("sources", (document,), pa.Table.from_pylist([row], schema=tables.SOURCES),
               meta={"fingerprint": fingerprint, "sha256": sha})
    status = "changed" if previous else "new"
    return Outcome(document, status, {"sha256": sha, "media_type": media, "bytes": stat.size})


MIB = 1024 * 1024
_HASH_BLOCK = 4 * MIB


def load_source(lake: Lake, document: str) -> tuple[dict[str, Any], dict[str, Any]]:
    table = lake.read("sources", document)
    if table is None or table.num_rows == 0:
        raise UpstreamMissing(f"no source row for {document}")
    return table.to_pylist()[0], lake.meta("sources", document) or {}


def source_bytes(source: dict[str, Any]) -> bytes:
    """The bytes the source row describes; refuses bytes that changed since."""
    try:
        content = object_store.read_bytes(source["uri"])
    except FileNotFoundError:
        raise StageError(f"source file is gone: {source['path']}") from None
    if sha256_bytes(content) != source["sha256"]:
        raise StageError("source bytes changed since they were observed; the next run picks them up")
    return content


# ---------------------------------------------------------------- pages


def read_document(settings: Settings, lake: Lake, document: str, run_id: str,
                  parser: ParseWorker | None = None, force: bool = False) -> Outcome:
    """Run the page readers; one row per page, located lines in their own table.

    The fingerprint covers the bytes, the readers, whether a password was given and, for a
    document with image-only pages, the OCR settings that differ from their defaults: so
    turning OCR on or changing its resolution re-reads exactly the scanned documents.
    """
    try:
        source, source_meta = load_source(lake, document)
    except UpstreamMissing:
        lake.delete("pages", document)  # pages of bytes that can no longer be observed
        lake.delete("page_lines", document)
        raise
    password = password_for(source["path"], settings.passwords)
    stated = reader_settings(source["media_type"])
    previous = lake.meta("pages", document)

    def fingerprint_for(ocr_matters: bool) -> str:
        changed = changed_settings(stated) if ocr_matters else {}
        return _fingerprint(STAGE_VERSIONS["pages"], source_meta.get("fingerprint"), sorted(reader_ids()),
                            password is not None, *([changed] if changed else []))

    if previous and previous.get("fingerprint") == fingerprint_for(_ocr_mattered(previous)) and not force:
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    content = source_bytes(source)
    options = ReadOptions(name=source["path"], password=password,
                          ocr=stated.get("ocr"), ocr_dpi=stated.get("ocr_dpi"))
    try:
        outputs = (parser.call if parser else _direct)(read_pages, content, source["media_type"], options)
    except Exception:
        lake.delete("pages", document)
        lake.delete("page_lines", document)
        raise
    ocr_pages = sum(1 for out in outputs if ocr_concerns(out)) if stated else 0
    fingerprint = fingerprint_for(ocr_pages > 0)
    with_password = {"password": True} if password is not None else {}
    page_config = {**stated, **with_password}
    other_config = canonical_json(with_password) if with_password else None
    page_rows, line_rows = [], []
    for out in outputs:
        page_rows.append({**out.to_row(), "document_id": document, "source_sha256": source["sha256"],
                          "run_id": run_id,
                          "reader_config": canonical_json(page_config) if stated and ocr_concerns(out)
                          else other_config})
        for number, line in enumerate(out.lines or (), start=1):
            w, h = line.space
            line_rows.append({
                "document_id": document, "page": out.page, "line": number, "text": line.text,
                "x0": line.box[0], "y0": line.box[1], "x1": line.box[2], "y1": line.box[3],
                "space_width": w, "space_height": h, "confidence": line.confidence,
                "bbox": tables.bbox_value(line.bbox()),
            })
    summary: dict[str, Any] = {"pages": len(outputs)}
    for out in outputs:
        summary[out.status] = summary.get(out.status, 0) + 1
    summary["readers"] = sorted({o.reader for o in outputs})
    # reader_identity: the non-default settings this document's output depends on; the
    # chunkers' config hashes for it take them in (identity.with_reader_settings).
    identity = changed_settings(stated) if ocr_pages else {}
    meta = {"fingerprint": fingerprint, "summary": summary, "ocr_pages": ocr_pages,
            "reader_config": {**(stated if ocr_pages else {}), **with_password}, "reader_identity": identity}
    lake.write("page_lines", (document,), pa.Table.from_pylist(line_rows, schema=tables.PAGE_LINES), meta=meta)
    lake.write("pages", (document,), pa.Table.from_pylist(page_rows, schema=tables.PAGES), meta=meta)
    crash_point("reading")
    return Outcome(document, "new", summary)


def _ocr_mattered(previous: dict[str, Any]) -> bool:
    """Whether the OCR settings decided part of a document's last read (older pages
    metadata has no ``ocr_pages``: then an OCR reader or an unreadable page says so)."""
    if "ocr_pages" in previous:
        return bool(previous["ocr_pages"])
    summary = previous.get("summary") or {}
    return bool(summary.get("unreadable")) or any(r.startswith("rapidocr@") for r in summary.get("readers", []))


def load_pages(lake: Lake, document: str) -> tuple[tuple[PageOutput, ...], str]:
    """Page outputs with their located lines, and the pages' fingerprint."""
    table = lake.read("pages", document)
    if table is None:
        raise UpstreamMissing(f"no pages for {document}")
    meta = lake.meta("pages", document) or {}
    lines_by_page: dict[int, list[LocatedLine]] = {}
    lines = lake.read("page_lines", document)
    if lines is not None:
        for row in lines.to_pylist():
            lines_by_page.setdefault(row["page"], []).append(
                LocatedLine(row["text"], (row["x0"], row["y0"], row["x1"], row["y1"]),
                            (row["space_width"], row["space_height"]), row["confidence"])
            )
    outputs = tuple(
        PageOutput(
            page=r["page"], status=r["status"], reader=r["reader"], text=r["text"], reason=r["reason"],
            width=r["width"], height=r["height"],
            lines=tuple(lines_by_page[r["page"]]) if r["page"] in lines_by_page else None,
        )
        for r in table.to_pylist()
    )
    return outputs, meta.get("fingerprint", "")


# ---------------------------------------------------------------- claims


def _piece_row(piece: ChunkPiece) -> dict[str, Any]:
    return {
        "text": piece.text,
        "image": piece.image,
        "bbox": tables.bbox_value(piece.bbox),
        "bbox_reason": piece.bbox_reason,
        "role": piece.layout.role if piece.layout else None,
        "layout": piece.layout.to_json() if piece.layout else None,
        "header_path": list(piece.header_path),
        "content_type": piece.content_type,
        "embed_text": piece.embed_text,
        "meta": json.dumps(dict(piece.meta), sort_keys=True, default=str) if piece.meta else None,
    }


def _row_piece(row: dict[str, Any]) -> ChunkPiece:
    return ChunkPiece(
        text=row["text"], image=row["image"], bbox=tables.bbox_tuple(row["bbox"]),
        bbox_reason=row["bbox_reason"], layout=Layout.from_json(row["layout"]),
        header_path=tuple(row["header_path"] or ()), content_type=row["content_type"],
        embed_text=row["embed_text"], meta=json.loads(row["meta"]) if row["meta"] else {},
    )


def run_chunker(
    settings: Settings, lake: Lake, chunker: Any, info: ChunkerInfo, document: str, run_id: str,
    parser: ParseWorker | None = None, force: bool = False,
) -> Outcome:
    """Ask one chunker version about one document and store its claims.

    A chunker that raises is recorded (an errors row and the claim's error) and its
    claim is empty, so the chunk map moves on to the next chunker. A chunker whose media
    types exclude the document gets an empty claim without being asked.
    """
    source, _ = load_source(lake, document)
    pages, pages_fp = load_pages(lake, document)
    reader_identity = (lake.meta("pages", document) or {}).get("reader_identity") or {}
    cfg_hash = with_reader_settings(info.config_hash, reader_identity)
    fingerprint = _fingerprint(STAGE_VERSIONS["claims"], pages_fp, info.ref, cfg_hash)
    previous = lake.meta("claims", info.asset_name, document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    content = source_bytes(source)
    error = None
    checks: list[dict[str, Any]] = []
    metrics: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        if info.media_types and source["media_type"] not in info.media_types:
            answer = ()  # not a format it reads: an empty claim, without a worker call
        else:
            answer, checks, metrics = (parser.call if parser else _direct)(
                chunk_document, chunker, content, source["media_type"], pages,
                password_for(source["path"], settings.passwords))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        record_error(lake, f"chunks/{info.ref}", document, exc, run_id)
        answer = ()
    else:
        clear_error(lake, f"chunks/{info.ref}", document)
    rows = []
    for page_answer in answer:
        for number, piece in enumerate(page_answer.pieces):
            rows.append({"document_id": document, "chunker": info.ref, "config_hash": cfg_hash,
                         "page": page_answer.page, "piece": number, **_piece_row(piece),
                         "source_sha256": source["sha256"], "run_id": run_id})
    summary = {"pages_claimed": len({a.page for a in answer}), "pieces": len(rows), "config_hash": cfg_hash,
               "seconds": round(time.perf_counter() - started, 4)}
    meta = {"fingerprint": fingerprint, "chunker": info.ref, "config_hash": cfg_hash,
            "chunker_config_hash": info.config_hash, "reader_settings": reader_identity,
            # the hash the claim had before this one, when it differs: old and new side by side
            "previous_config_hash": (previous.get("config_hash") if previous and previous.get("config_hash") != cfg_hash
                                     else (previous or {}).get("previous_config_hash")),
            "claimed_pages": sorted({a.page for a in answer}), "error": error,
            "content": _claim_content(rows, sorted({a.page for a in answer}), error, info),
            "summary": summary, "checks": checks, "metrics": metrics}
    lake.write("claims", (info.asset_name, document), pa.Table.from_pylist(rows, schema=tables.CLAIMS), meta=meta)
    return Outcome(document, "failed" if error else "new", {**summary, **({"error": error} if error else {})})


def _claim_content(rows: list[dict[str, Any]], pages: list[int], error: str | None, info: ChunkerInfo) -> str:
    """A hash of what a claim says (not of how it was asked): a chunker that disclaims a
    document says the same thing under any configuration, so the chunk map downstream of
    it stays as it is when only that configuration changes."""
    pieces = [[r["page"], r["piece"], r["text"], sha256_bytes(r["image"]) if r["image"] else None, r["bbox"],
               r["bbox_reason"], r["layout"], r["header_path"], r["content_type"], r["embed_text"], r["meta"]]
              for r in rows]
    # Chunk ids hash the config, so a claim with pieces depends on it.
    return _fingerprint(info.ref, info.config_hash if rows else None, pages, error, pieces)


def _direct(fn, *args):
    return fn(*args)


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
            checks.append({"name": outcome.name, "passed": outcome.passed, "severity": outcome.severity,
                           "description": outcome.description, "metadata": dict(outcome.metadata)})
    metrics = dict(chunker.metrics(answer)) if hasattr(chunker, "metrics") and answer else {}
    return answer, checks, metrics


def load_claim(lake: Lake, info: ChunkerInfo, document: str) -> tuple[Claim, str]:
    meta = lake.meta("claims", info.asset_name, document)
    if meta is None:
        raise StageError(f"chunks/{info.asset_name} has not been materialized for this document")
    table = lake.read("claims", info.asset_name, document)
    by_page: dict[int, list[ChunkPiece]] = {p: [] for p in meta.get("claimed_pages", [])}
    for row in sorted(table.to_pylist(), key=lambda r: (r["page"], r["piece"])):
        by_page.setdefault(row["page"], []).append(_row_piece(row))
    claim = Claim(
        chunker=info.ref, config_hash=meta.get("config_hash", info.config_hash), error=meta.get("error"),
        pages=tuple(PageChunks(page=p, pieces=tuple(pieces)) for p, pieces in sorted(by_page.items())),
    )
    return claim, meta.get("content") or meta.get("fingerprint", "")


# ---------------------------------------------------------------- chunk map


def build_chunk_map(
    lake: Lake, registry: ChunkerRegistry, profile: Profile, embedder: Embedder, document: str, run_id: str,
    force: bool = False,
) -> Outcome:
    """Merge the claims of the profile's chunker order into the document's chunk map."""
    try:
        source, _ = load_source(lake, document)
        pages, pages_fp = load_pages(lake, document)
    except UpstreamMissing as exc:
        withdrawn = withdraw_chunk_map(lake, profile.name, document)
        if withdrawn is None:
            raise
        raise StageError(f"withdrawn from search: the file no longer reads ({exc}); its {withdrawn} chunks "
                         f"stay in the lake's history") from None
    order = [registry.info(c) for c in registry.order_for(profile.chunkers)]
    claims, claim_fps = [], []
    for info in order:
        claim, fp = load_claim(lake, info, document)
        claims.append(claim)
        claim_fps.append(fp)
    fingerprint = _fingerprint(STAGE_VERSIONS["chunks"], profile.name, profile.options(), pages_fp, claim_fps,
                               embedder.model_id, embedder.max_tokens)
    previous = lake.meta("chunks", profile.name, document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        if previous.get("no_chunks") and not previous.get("empty"):
            raise NoChunks(previous["no_chunks"])
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    chunk_map = merge_claims(document, pages, claims, expand=_expander(profile, embedder, source["path"]))
    relinked = relink([c.piece for c in chunk_map.chunks])
    chunk_map = replace(chunk_map, chunks=tuple(replace(c, piece=p) for c, p in zip(chunk_map.chunks, relinked)))
    readers = {p.page: p.reader for p in pages}
    texts = [(c.piece.embed_text or c.piece.text) for c in chunk_map.chunks if not c.piece.is_image]
    token_counts = iter(bounded_counts(embedder.token_offsets, texts, embedder.count_tokens)) if texts else iter(())
    rows = []
    for chunk in chunk_map.chunks:
        piece = chunk.piece
        rows.append({
            "chunk_id": chunk.chunk_id, "label": chunk.label, "profile": profile.name, "document_id": document,
            "path": source["path"], "page": chunk.page, "index": chunk.index, **_piece_row(piece),
            "chars": len(piece.text) if piece.text else 0,
            "tokens": None if piece.is_image else next(token_counts),
            "chunker": chunk.chunker, "config_hash": chunk.config_hash, "reader": readers.get(chunk.page),
            "source_sha256": source["sha256"], "run_id": run_id,
        })
    by_chunker: dict[str, int] = {}
    for chunk in chunk_map.chunks:
        by_chunker[chunk.chunker] = by_chunker.get(chunk.chunker, 0) + 1
    grid_problems = table_problems([c.piece for c in chunk_map.chunks])
    summary = {"chunks": len(rows), "by_chunker": by_chunker, "dropped": chunk_map.dropped,
               "failed_chunkers": [c.chunker for c in claims if c.error],
               "split_parts": sum(1 for c in chunk_map.chunks if "token_split" in c.piece.meta),
               "table_grid_problems": [{"label": chunk_map.chunks[p["index"]].label, "problem": p["problem"]}
                                       for p in grid_problems][:20]}
    no_chunks = None if rows else _why_no_chunks(pages, summary)
    # Nothing to chunk is not an error (SPEC F06) when every page read and no chunker
    # raised: a blank file, blank pages, Markdown whose only content is skipped. Pages that
    # failed or chunkers that raised leave a broken document, and that stays a failure.
    empty = bool(no_chunks) and not summary["failed_chunkers"] and all(p.readable for p in pages)
    if empty:
        if any(p.status == "read" for p in pages):
            no_chunks += "; the chunkers kept nothing of the read pages"
        summary["no_chunks"] = no_chunks
    lake.write("chunks", (profile.name, document), pa.Table.from_pylist(rows, schema=tables.CHUNKS),
               meta={"fingerprint": fingerprint, "summary": summary, "order": [i.ref for i in order],
                     "no_chunks": no_chunks, "empty": empty})
    crash_point("chunk_maps")
    if no_chunks and not empty:
        raise NoChunks(no_chunks)
    return Outcome(document, "empty" if empty else "new", summary)


def withdraw_chunk_map(lake: Lake, profile: str, document: str) -> int | None:
    """Move a document's served chunk map and vectors into the lake's history (out of the
    public views and of search); returns how many chunks it held, None if it had none."""
    chunks = lake.read("chunks", profile, document)
    if chunks is None:
        return None
    shas = sorted(set(chunks.column("source_sha256").to_pylist()) - {None}) or ["unknown"]
    version = f"{shas[0][:16]}-{_now().strftime('%Y%m%dT%H%M%S%f')}"
    for table in ("chunks", "embeddings"):
        data = lake.read(table, profile, document)
        if data is not None:
            lake.write(f"history/{table}", (profile, document, version), data,
                       meta={**(lake.meta(table, profile, document) or {}), "withdrawn_at": _now()})
            lake.delete(table, profile, document)
    return chunks.num_rows


def document_title(path: str) -> str:
    """A document's title for embedding context: its file name without the extension."""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return " ".join(stem.replace("_", " ").split())


def _expander(profile: Profile, embedder: Embedder, path: str):
    title = document_title(path) if profile.document_context else ""

    def expand(piece: ChunkPiece) -> list[ChunkPiece]:
        if title:
            piece = replace(piece, embed_text=f"{title}\n{piece.embed_text or piece.text}")
        if not profile.split_oversized:
            if over_limit(embedder.token_offsets, piece.embed_text or piece.text, embedder.max_tokens - 2):
                return [replace(piece, meta={**piece.meta, "token_overflow": True})]
            return [piece]
        return split_to_limit(piece, embedder.token_offsets, embedder.max_tokens)

    return expand


def _why_no_chunks(pages: Sequence[PageOutput], summary: dict[str, Any]) -> str:
    """Say why a document yields no chunk, from its pages' verdicts."""
    statuses: dict[str, int] = {}
    for page in pages:
        statuses[page.status] = statuses.get(page.status, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(statuses.items())]
    reasons = sorted({p.reason for p in pages if p.reason and p.status in ("failed", "unreadable")})
    text = f"no chunks: {len(pages)} page(s), " + ", ".join(parts or ["none"])
    if reasons:
        text += " (" + "; ".join(reasons)[:200] + ")"
    if summary.get("failed_chunkers"):
        text += "; chunkers that raised: " + ", ".join(summary["failed_chunkers"])
    return text


# ---------------------------------------------------------------- embeddings


class EmbeddingCache:
    """Vectors keyed by (model id, sha256 of the text), as append-only Parquet shards."""

    def __init__(self, lake: Lake, model_id: str) -> None:
        self.lake = lake
        self.model_id = model_id

    def get(self, shas: Iterable[str]) -> dict[str, np.ndarray]:
        wanted = set(shas)
        found: dict[str, np.ndarray] = {}
        if not wanted:
            return found
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        for attempt in range(3):
            files = list(self.lake.files(f"embedding_cache/{self.model_id}"))
            if not files:
                return found
            dataset = ds.dataset(files, filesystem=self.lake.fs, format="parquet", schema=tables.EMBEDDING_CACHE)
            try:
                table = dataset.to_table(filter=pc.field("text_sha256").isin(list(wanted)))
                break
            except (FileNotFoundError, OSError):
                if attempt == 2:  # housekeeping folded shards away between listing and reading
                    raise
        for sha, vector in zip(table.column("text_sha256").to_pylist(), table.column("vector").to_numpy(
                zero_copy_only=False)):
            found[sha] = np.asarray(vector, dtype=np.float32)
        return found

    def put(self, vectors: dict[str, np.ndarray], shard: str) -> None:
        if not vectors:
            return
        data = pa.table({
            "text_sha256": list(vectors),
            "vector": pa.array([v.tolist() for v in vectors.values()], type=pa.list_(pa.float32())),
        }, schema=tables.EMBEDDING_CACHE)
        self.lake.write(f"embedding_cache/{self.model_id}", (shard,), data)


def embed_documents(
    lake: Lake, embedder: Embedder, profile: Profile, documents: Sequence[str], run_id: str,
    on_done: Callable[[Outcome], None] | None = None, force: bool = False,
) -> list[Outcome]:
    """Vectors for the text chunks of many documents at once: texts are deduplicated
    across the batch, looked up in the cache, and only the missing ones are embedded.

    Documents are finished in order, a model batch of missing texts at a time, so
    ``on_done`` hears of each document soon after its vectors exist (and a killed run
    keeps the vectors it computed in the cache)."""
    outcomes: list[Outcome] = []

    def finish(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    pending: list[tuple[str, pa.Table, str]] = []
    for document in documents:
        try:
            table = lake.read("chunks", profile.name, document)
            if table is None:
                finish(Outcome(document, "skipped", {"reason": "no chunk map"}))
                continue
            chunks_fp = (lake.meta("chunks", profile.name, document) or {}).get("fingerprint")
            fingerprint = _fingerprint(STAGE_VERSIONS["embeddings"], chunks_fp, embedder.model_id)
            previous = lake.meta("embeddings", profile.name, document)
            if previous and previous.get("fingerprint") == fingerprint and not force:
                # Nothing embedded or looked up in this run: every vector is reused as it is.
                vectors_kept = int((previous.get("summary") or {}).get("vectors", 0) or 0)
                finish(Outcome(document, "unchanged", {"vectors": vectors_kept, "embedded": 0,
                                                       "cached": vectors_kept, **UNCHANGED}))
                continue
            pending.append((document, table, fingerprint))
        except Exception as exc:
            row = record_error(lake, f"embeddings/{profile.name}", document, exc, run_id)
            finish(Outcome(document, "failed", {"reason": row["reason"]}))

    def texts_of(table: pa.Table) -> list[tuple[str, str]]:
        found = []
        for chunk_id, text, embed_text, image in zip(
            table.column("chunk_id").to_pylist(), table.column("text").to_pylist(),
            table.column("embed_text").to_pylist(), table.column("image").to_pylist(),
        ):
            if image is None and text:
                found.append((chunk_id, embed_text or text))
        return found

    texts = {document: texts_of(table) for document, table, _ in pending}
    cache = EmbeddingCache(lake, embedder.model_id)
    vectors = cache.get({sha256_text(t) for doc_texts in texts.values() for _, t in doc_texts})
    known = set(vectors)
    queue: dict[str, str] = {}  # sha -> text, waiting for the model
    waiting: list[tuple[str, pa.Table, str, set[str]]] = []
    step = max(1, int(getattr(embedder, "batch_size", 64) or 64))

    def flush() -> None:
        if queue:
            shas = list(queue)
            fresh = embedder.embed([queue[s] for s in shas])
            new = {sha: fresh[i] for i, sha in enumerate(shas)}
            cache.put(new, shard=f"{run_id}-{sha256_text(canonical_json(sorted(shas)))[:12]}")
            vectors.update(new)
            queue.clear()
        for document, table, fingerprint, first_here in waiting:
            finish(_write_embeddings(lake, embedder, profile, document, table, fingerprint, texts[document],
                                     vectors, first_here, run_id))
        waiting.clear()

    for document, table, fingerprint in pending:
        first_here = set()
        for _, text in texts[document]:
            sha = sha256_text(text)
            if sha not in known:
                known.add(sha)
                first_here.add(sha)
                queue[sha] = text
        waiting.append((document, table, fingerprint, first_here))
        if len(queue) >= step:
            flush()
    flush()
    return outcomes


def _write_embeddings(lake: Lake, embedder: Embedder, profile: Profile, document: str, table: pa.Table,
                      fingerprint: str, texts: list[tuple[str, str]], vectors: dict[str, np.ndarray],
                      first_here: set[str], run_id: str) -> Outcome:
    """One document's embeddings file; a text the model embedded for it in this run is
    ``embedded``, one whose vector was already known is ``cached``."""
    rows = []
    first_here = set(first_here)
    for chunk_id, text in texts:
        sha = sha256_text(text)
        status = "embedded" if sha in first_here else "cached"
        first_here.discard(sha)  # a text repeated in the document is embedded once
        rows.append({"chunk_id": chunk_id, "profile": profile.name, "document_id": document,
                     "model": embedder.model_id, "text_sha256": sha, "vector": vectors[sha].tolist(),
                     "cache": status, "run_id": run_id})
    embedded = sum(1 for r in rows if r["cache"] == "embedded")
    summary = {"vectors": len(rows), "embedded": embedded, "cached": len(rows) - embedded,
               "images_without_vector": sum(1 for i in table.column("image").to_pylist() if i is not None)}
    lake.write("embeddings", (profile.name, document), pa.Table.from_pylist(rows, schema=tables.EMBEDDINGS),
               meta={"fingerprint": fingerprint, "summary": summary})
    clear_error(lake, f"embeddings/{profile.name}", document)
    crash_point("embedding")
    return Outcome(document, "new", summary)


# ---------------------------------------------------------------- LanceDB


def index_document(lake: Lake, index: VectorIndex, profile: Profile, document: str, run_id: str,
                   force: bool = False) -> Outcome:
    """Make the profile's LanceDB table hold exactly this document's current chunks."""
    chunks = lake.read("chunks", profile.name, document)
    vectors = lake.read("embeddings", profile.name, document)
    if chunks is None and lake.exists("indexed", profile.name, document):
        # The chunk map was withdrawn (the file no longer reads): its rows leave search.
        empty = pa.Table.from_pylist([], schema=index_schema(index.dim))
        removed = index.sync_document(profile.name, document, empty)
        lake.delete("indexed", profile.name, document)
        return Outcome(document, "skipped", {"reason": "chunk map withdrawn", "rows_removed": removed["rows_before"]})
    if chunks is None or vectors is None:
        raise UpstreamMissing(f"no chunks or embeddings for {document}")
    emb_fp = (lake.meta("embeddings", profile.name, document) or {}).get("fingerprint")
    fingerprint = _fingerprint(STAGE_VERSIONS["index"], emb_fp)
    marker = lake.meta("indexed", profile.name, document)
    if not force and marker and marker.get("fingerprint") == fingerprint and index.count(
            profile.name, document) == marker.get("rows"):
        return Outcome(document, "unchanged", {"rows": marker.get("rows"), **UNCHANGED})
    by_id = dict(zip(vectors.column("chunk_id").to_pylist(), vectors.column("vector").to_pylist()))
    rows = []
    for row in chunks.drop_columns(["image"]).to_pylist():
        # Image chunks are indexed without a vector until an image embedder is configured:
        # a filter finds them, vector search skips them.
        is_image = row["text"] is None
        rows.append({**row, "modality": "image" if is_image else "text", "vector": by_id.get(row["chunk_id"])})
    data = pa.Table.from_pylist(rows, schema=index_schema(index.dim))
    result = index.sync_document(profile.name, document, data)
    shas = set(chunks.column("source_sha256").to_pylist())
    lake.write("indexed", (profile.name, document), pa.table({"rows": [result["rows"]]}),
               meta={"fingerprint": fingerprint, "rows": result["rows"], "run_id": run_id,
                     "source_sha256": shas.pop() if len(shas) == 1 else None})
    return Outcome(document, "new", result)


def finished(lake: Lake, profile: str, document: str) -> dict[str, Any] | None:
    """The document's completion marker for a profile, if it covers its current bytes.

    The index marker is the last thing a run writes for a document, so a document is done
    only once it exists for the sha256 its source row holds; a run killed earlier leaves
    none (or one for older bytes), and the next run's report counts it as new work."""
    marker = lake.meta("indexed", profile, document)
    source = lake.meta("sources", document)
    if not marker or not source:
        return None
    if marker.get("source_sha256") not in (None, source.get("sha256")):
        return None
    return marker


def remove_document(lake: Lake, index: VectorIndex, document: str) -> dict[str, int]:
    """Forget a document: its rows leave every LanceDB table and every lake table."""
    return remove_documents(lake, index, [document])


def remove_documents(lake: Lake, index: VectorIndex, documents: Sequence[str]) -> dict[str, int]:
    """Forget many documents at once: LanceDB rows first (search stops serving them), then
    their lake files, in one pass over each."""
    rows = index.delete_documents(documents)
    files = lake.delete_documents(documents)
    return {"lancedb_rows": rows, "lake_files": files}
