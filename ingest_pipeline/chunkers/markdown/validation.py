"""markdown@1's validator and metrics (SPEC C56-C61), found from the chunks' own text."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from ingest_pipeline.chunkers.markdown.config import MarkdownConfig
from ingest_pipeline.chunkers.markdown.scanner import scan_blocks
from ingest_pipeline.chunkers.markdown.sections import ParsedMarkdown
from ingest_pipeline.contract import CheckOutcome, ChunkPiece


def validate(text: str, pieces: Sequence[ChunkPiece], config: MarkdownConfig) -> tuple[CheckOutcome, ...]:
    """SPEC C56–C60: fences closed, no heading-only chunk, sizes, coverage, unique ids.

    Each chunk's Markdown is scanned on its own, so a chunk that cuts a fence or holds
    only a heading is found from its text, not from what the chunker says about it."""
    cfg = config
    broken, heading_only, sparse_heading_only, too_big, too_small, bad_overflow, ids = _scan_chunks(
        pieces, cfg
    )
    missing, mismatched = coverage_gaps(text, pieces, cfg)
    dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
    sequential = ids == [f"chk_{k:06d}" for k in range(1, len(ids) + 1)]
    return (
        CheckOutcome(
            name="fences_closed",
            passed=not broken,
            severity="error" if cfg.fail_on_broken_fence else "warn",
            description="no chunk holds a code fence that is opened and never closed",
            metadata={"broken": broken[:20], "count": len(broken)},
        ),
        CheckOutcome(
            name="no_heading_only_chunk",
            passed=not heading_only and not sparse_heading_only,
            severity="error" if heading_only else "warn",
            description="no chunk holds only a heading (one flagged is_sparse is a warning)",
            metadata={"unflagged": heading_only[:20], "flagged_sparse": sparse_heading_only[:20]},
        ),
        CheckOutcome(
            name="sizes_within_bounds",
            passed=not too_big and not bad_overflow and not too_small,
            severity="error" if (too_big or bad_overflow) else "warn",
            description=(
                f"every chunk within {cfg.max_chars} characters unless it is one block "
                f"flagged is_overflow; chunks under {cfg.min_chars} are flagged is_sparse"
            ),
            metadata={
                "over_max_unflagged": too_big[:20],
                "overflow_not_single_block": bad_overflow[:20],
                "under_min_unflagged": too_small[:20],
            },
        ),
        CheckOutcome(
            name="source_lines_covered",
            passed=not missing and not mismatched,
            severity="error" if (cfg.fail_on_content_loss or mismatched) else "warn",
            description="every significant source line is in a chunk (skipped sections exempt)",
            metadata={
                "missing_lines": missing[:50],
                "missing_count": len(missing),
                "chunks_not_matching_source": mismatched[:20],
            },
        ),
        CheckOutcome(
            name="chunk_ids_unique",
            passed=not dupes and sequential,
            description="chunk ids are unique and run chk_000001, chk_000002, ...",
            metadata={"duplicates": dupes[:20], "sequential": sequential},
        ),
    )


def _scan_chunks(pieces: Sequence[ChunkPiece], cfg: MarkdownConfig) -> tuple[list[str], ...]:
    """Each chunk's own Markdown read for the checks: ids of chunks with an unclosed fence,
    holding only a heading (unflagged, then flagged sparse), over the maximum unflagged,
    under the minimum unflagged, overflowing with more than one block; and every id."""
    broken: list[str] = []
    heading_only: list[str] = []
    sparse_heading_only: list[str] = []
    too_big: list[str] = []
    too_small: list[str] = []
    bad_overflow: list[str] = []
    ids: list[str] = []
    for p in pieces:
        m = p.meta
        cid = str(m.get("chunk_id"))
        ids.append(cid)
        flags = m.get("flags") or {}
        body = p.text or ""
        lines, blocks = scan_blocks(body)
        for b in blocks:
            if b.kind == "code" and b.broken:
                broken.append(f"{cid}: {lines[b.start].strip()[:40]!r} is never closed")
        content = [b for b in blocks if b.kind != "heading"]
        if blocks and not content:
            (sparse_heading_only if flags.get("is_sparse") else heading_only).append(cid)
        size = len(body)
        if size > cfg.max_chars:
            if not flags.get("is_overflow"):
                too_big.append(cid)
            elif len(content) != 1:
                bad_overflow.append(cid)
        if size < cfg.min_chars and not flags.get("is_sparse"):
            too_small.append(cid)
    return broken, heading_only, sparse_heading_only, too_big, too_small, bad_overflow, ids


def coverage_gaps(
    text: str, pieces: Sequence[ChunkPiece], config: MarkdownConfig
) -> tuple[list[int], list[str]]:
    """(1-based source lines with content that no chunk covers and no skip explains,
    chunks whose text is not the source at their stated offsets). A line is content when
    it holds more than whitespace and block-quote markers; all its non-blank characters
    must lie in some chunk."""
    layout = ParsedMarkdown(text, config.skip_headings, config.skip_pre_heading)
    spans = []
    mismatched = []
    for p in pieces:
        m = p.meta
        a, b = m.get("start_char"), m.get("end_char")
        if not isinstance(a, int) or not isinstance(b, int) or text[a:b] != p.text:
            mismatched.append(str(m.get("chunk_id")))
            continue
        spans.append((a, b))
        joined = m.get("joined_heading")  # a heading with no body that joined this chunk (markdown@2)
        if isinstance(joined, dict) and text[joined["start_char"] : joined["end_char"]] == joined.get("text"):
            spans.append((joined["start_char"], joined["end_char"]))
    for s, e in layout.skipped:
        spans.append((layout.off(s), layout.end_off(e)))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1][1] = b
        else:
            merged.append([a, b])
    missing = []
    starts = [m[0] for m in merged]
    for k, line in enumerate(layout.lines):
        if not line.strip(" \t>"):  # blank, or only block-quote markers
            continue
        base = layout.off(k)
        pos = base
        end = base + len(line)
        # every non-whitespace character of the line lies in some span
        while pos < end:
            if text[pos].isspace():
                pos += 1
                continue
            j = bisect_right(starts, pos) - 1
            if j < 0 or merged[j][1] <= pos:
                missing.append(k + 1)
                break
            pos = merged[j][1]
    return missing, mismatched


def chunk_metrics(pieces: Sequence[ChunkPiece], config: MarkdownConfig) -> dict[str, Any]:
    sizes = [len(p.text or "") for p in pieces]
    flags = [(p.meta.get("flags") or {}) for p in pieces]
    total = len(pieces)
    within = sum(1 for s in sizes if config.min_chars <= s <= config.max_chars)
    return {
        "total_chunks": total,
        "total_chars": sum(sizes),
        "avg_chars": round(sum(sizes) / total, 1) if total else 0.0,
        "min_chars_actual": min(sizes) if sizes else 0,
        "max_chars_actual": max(sizes) if sizes else 0,
        "overflow_count": sum(1 for f in flags if f.get("is_overflow")),
        "sparse_count": sum(1 for f in flags if f.get("is_sparse")),
        "atomic_count": sum(1 for p in pieces if p.content_type == "atomic_block"),
        "size_compliance": round(100.0 * within / total, 2) if total else 100.0,
    }
