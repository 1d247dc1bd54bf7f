"""What ``inspect DOCUMENT`` shows: a document's source and, at one stage (pages, one or
every chunker's claims, or a profile's chunks), every item complete — text, metadata, box,
role, heading path, ids, lineage, cache status and vector — then size statistics.

Records are plain dicts with a ``record`` kind. As JSON Lines they are complete and come
back unchanged through :func:`records_from_jsonl`: binary values travel as
``<name>_base64`` (the source's bytes as ``content_base64``), timestamps as ISO text.
Every value reaches SQL as a ``?`` parameter.
"""

from __future__ import annotations

import base64
import json
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ingest_pipeline.identity import canonical_json, display_name, real_name
from ingest_pipeline.storage import queries
from ingest_pipeline.storage.catalog import query
from ingest_pipeline.storage.lake import Lake

STAGES = ("sources", "pages", "claims", "chunks")
TIMESTAMPS = ("mtime", "observed_at", "at")
TEXT_FIELDS = ("text", "embed_text", "content")


def find_source(lake: Lake, ref: str) -> dict[str, Any] | None:
    """The sources row of a document named by its document_id or its path."""
    rows = query(lake, queries.SOURCE_BY_ID_OR_PATH, [ref, ref]).to_pylist()
    return rows[0] if rows else None


def source_record(source: dict[str, Any], route: dict[str, Any] | None = None) -> dict[str, Any]:
    """The source row with its bytes (as they are on disk now) and, when they are UTF-8, its
    text; ``route``: the settings of the route it takes, as written."""
    record = {"record": "source", **source, **({"route_settings": route} if route else {})}
    try:
        with open(real_name(source["uri"]), "rb") as handle:
            content = handle.read()
    except OSError:
        record["content"] = None
        record["content_missing"] = True
        return record
    record["content"] = content
    try:
        record["text"] = content.decode("utf-8")
    except UnicodeDecodeError:
        record["text"] = None
    return record


def page_records(lake: Lake, document: str) -> list[dict[str, Any]]:
    rows = query(lake, queries.PAGES_OF_DOCUMENT, [document]).to_pylist()
    lines = {r["page"]: r["n"] for r in query(lake, queries.LINE_COUNTS_BY_PAGE, [document]).to_pylist()}
    return [{"record": "page", **row, "located_lines": lines.get(row["page"], 0)} for row in rows]


def claim_records(lake: Lake, document: str, chunker: str | None = None) -> list[dict[str, Any]]:
    rows = query(lake, queries.CLAIMS_OF_DOCUMENT, [document, chunker, chunker]).to_pylist()
    return _positioned([{"record": "claim", **row} for row in rows], key="chunker")


def chunk_records(
    lake: Lake, document: str, profile: str, chunker: str | None = None
) -> list[dict[str, Any]]:
    """The profile's chunks of the document, each with its vector and cache status."""
    rows = query(lake, queries.CHUNKS_OF_DOCUMENT, [document, profile, chunker, chunker]).to_pylist()
    vectors = {
        r["chunk_id"]: r for r in query(lake, queries.VECTORS_OF_DOCUMENT, [document, profile]).to_pylist()
    }
    records = []
    for row in rows:
        emb = vectors.get(row["chunk_id"], {})
        records.append(
            {
                "record": "chunk",
                **row,
                "vector": emb.get("vector"),
                "model": emb.get("model"),
                "text_sha256": emb.get("text_sha256"),
                "cache": emb.get("cache"),
                "cache_run_id": emb.get("run_id"),
            }
        )
    return _positioned(records)


def _positioned(records: list[dict[str, Any]], key: str | None = None) -> list[dict[str, Any]]:
    """Number items 1..n in document order (per ``key`` value when given): their position in the parent."""
    totals: dict[Any, int] = {}
    for r in records:
        totals[r.get(key) if key else None] = totals.get(r.get(key) if key else None, 0) + 1
    seen: dict[Any, int] = {}
    for r in records:
        group = r.get(key) if key else None
        seen[group] = seen.get(group, 0) + 1
        r["parent_document"] = r["document_id"]
        r["position"] = seen[group]
        r["of"] = totals[group]
    return records


def error_records(lake: Lake, document: str) -> list[dict[str, Any]]:
    rows = query(lake, queries.ERRORS_OF_DOCUMENT, [document]).to_pylist()
    return [{"record": "error", **row} for row in rows]


def size_stats(records: Sequence[dict[str, Any]], max_tokens: int, count_tokens=None) -> dict[str, Any]:
    """Items, characters and tokens (min / mean / max) and how many are over the token limit."""
    texts = [r.get("embed_text") or r.get("text") or "" for r in records]
    chars = [len(r.get("text") or "") for r in records]
    if any("tokens" in r for r in records):  # chunks carry their count (None for an image chunk)
        tokens = [r["tokens"] for r in records if r.get("tokens") is not None]
    elif count_tokens is not None:  # pages and claims: counted here, as the model would see them
        tokens = list(count_tokens([t for t in texts if t])) if any(texts) else []
    else:
        tokens = []

    def spread(values: list[int]) -> dict[str, Any]:
        if not values:
            return {"min": None, "mean": None, "max": None}
        return {"min": min(values), "mean": round(statistics.fmean(values), 1), "max": max(values)}

    return {
        "record": "summary",
        "items": len(records),
        "characters": spread(chars),
        "tokens": spread(tokens),
        "total_characters": sum(chars),
        "over_token_limit": sum(1 for t in tokens if t > max_tokens),
        "max_tokens": max_tokens,
    }


# --------------------------------------------------------------------------- text limits


def limit_lines(text: str | None, content_lines: int | None) -> tuple[str | None, int]:
    """The first and last ``content_lines`` lines around a marker, and how many were left out."""
    if text is None or content_lines is None:
        return text, 0
    lines = text.split("\n")
    if len(lines) <= 2 * content_lines + 1:
        return text, 0
    omitted = len(lines) - 2 * content_lines
    head = lines[:content_lines]
    tail = lines[len(lines) - content_lines :] if content_lines else []
    return "\n".join([*head, f"… {omitted} lines omitted …", *tail]), omitted


def limited(record: dict[str, Any], content_lines: int | None) -> dict[str, Any]:
    if content_lines is None:
        return record
    out = dict(record)
    for name in TEXT_FIELDS:
        if isinstance(out.get(name), str):
            out[name], omitted = limit_lines(out[name], content_lines)
            if omitted:
                out[f"{name}_omitted_lines"] = omitted
    return out


# --------------------------------------------------------------------------- JSON Lines


def _encode(record: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            out[f"{key}_base64"] = base64.b64encode(bytes(value)).decode("ascii")
        elif isinstance(value, datetime):
            out[key] = value.isoformat()
        else:
            out[key] = value
    return out


def to_jsonl(records: Iterable[dict[str, Any]], content_lines: int | None = None) -> str:
    """One JSON object per line, complete (binary content as base64) unless lines are limited."""
    lines = []
    for record in records:
        encoded = _encode(record)
        if content_lines is not None:  # the text is shortened for display; the bytes stay whole
            encoded = limited(encoded, content_lines)
        lines.append(json.dumps(encoded, ensure_ascii=False, sort_keys=False))
    return "\n".join(lines) + ("\n" if lines else "")


def records_from_jsonl(text: str) -> list[dict[str, Any]]:
    """The records of :func:`to_jsonl`, with bytes and timestamps restored."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        record: dict[str, Any] = {}
        for key, value in raw.items():
            if key.endswith("_base64") and isinstance(value, str):
                record[key[: -len("_base64")]] = base64.b64decode(value)
            elif key in TIMESTAMPS and isinstance(value, str):
                record[key] = datetime.fromisoformat(value)
            else:
                record[key] = value
        records.append(record)
    return records


# --------------------------------------------------------------------------- rich


def _box(bbox: dict | None) -> str | None:
    if not bbox:
        return None
    return f"[{bbox['x0']:.4f}, {bbox['y0']:.4f}, {bbox['x1']:.4f}, {bbox['y1']:.4f}]"


def _vector(vector: Sequence[float] | None, shown: int = 4) -> str | None:
    if vector is None:
        return None
    head = ", ".join(f"{v:+.4f}" for v in vector[:shown])
    return f"[{head}{', …' if len(vector) > shown else ''}] ({len(vector)} dims)"


def _cache(record: dict[str, Any]) -> str:
    run = (record.get("cache_run_id") or "")[:8]
    if record.get("cache") == "embedded":
        return f"embedded now (by the model, run {run})"
    if record.get("cache") == "cached":
        return f"from cache (vector already known, run {run})"
    if record.get("image") is not None:
        return "image chunk: no vector"
    return "no vector" if record.get("vector") is None else "unknown (written before cache status was kept)"


def _fields(record: dict[str, Any], max_tokens: int, content_lines: int | None = None):
    """(name, value) pairs shown under an item, in reading order; empty values left out."""
    kind = record["record"]
    pairs: list[tuple[str, Any]] = []
    if kind == "page":
        pairs += [
            ("status", record["status"]),
            ("reason", record.get("reason")),
            ("reader", record["reader"]),
            ("size", f"{record['width']:g} × {record['height']:g}" if record.get("width") else None),
            ("located lines", record.get("located_lines")),
            ("chars", len(record.get("text") or "")),
            ("run", record.get("run_id")),
        ]
    else:
        layout = json.loads(record["layout"]) if record.get("layout") else None
        pairs += [
            ("chunk id", record.get("chunk_id")),
            ("label", record.get("label")),
            ("chunker", record.get("chunker")),
            ("config hash", record.get("config_hash")),
            ("reader", record.get("reader")),
            ("box", _box(record.get("bbox")) or record.get("bbox_reason")),
            ("role", record.get("role")),
            ("content type", record.get("content_type")),
            ("heading path", " › ".join(record.get("header_path") or []) or None),
            ("table", f"{len(layout.get('cells') or [])} cells" if layout and layout.get("cells") else None),
            (
                "parent",
                f"{record['parent_document']}, {record['position']} of {record['of']} "
                f"(page {record['page']}, "
                + (f"index {record['index']})" if "index" in record else f"piece {record['piece']})"),
            ),
            (
                "size",
                f"{record.get('chars', len(record.get('text') or ''))} chars"
                + (
                    f", {record['tokens']} tokens"
                    + (" — over the limit" if record["tokens"] > max_tokens else "")
                    if record.get("tokens") is not None
                    else ""
                ),
            ),
            ("image", f"{len(record['image'])} bytes" if record.get("image") is not None else None),
            ("meta", record.get("meta")),
            (
                "embedding text",
                limit_lines(record["embed_text"], content_lines)[0]
                if record.get("embed_text") not in (None, record.get("text"))
                else None,
            ),
        ]
        if kind == "chunk":
            pairs += [
                ("cache", _cache(record)),
                ("model", record.get("model")),
                ("vector", _vector(record.get("vector"))),
                ("source sha256", record.get("source_sha256")),
                ("run", record.get("run_id")),
            ]
        else:
            pairs += [("source sha256", record.get("source_sha256")), ("run", record.get("run_id"))]
    return [(k, v) for k, v in pairs if v not in (None, "", [])]


def render(
    console,
    records: Sequence[dict[str, Any]],
    content_lines: int | None,
    max_tokens: int,
    show_source_text: bool = False,
) -> None:
    """Print records for a person: a panel of literal text per item, its fields, the statistics."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    for record in records:
        kind = record["record"]
        if kind == "source":
            grid = Table.grid(padding=(0, 2))
            for name in ("document_id", "media_type", "bytes", "sha256", "mtime", "uri", "run_id", "route"):
                grid.add_row(Text(name, style="dim"), Text(display_name(record.get(name)), overflow="fold"))
            if record.get("route_settings"):
                settings = canonical_json({k: v for k, v in record["route_settings"].items() if k != "name"})
                grid.add_row(Text("route sets", style="dim"), Text(settings, overflow="fold"))
            console.print(
                Panel(
                    grid, title=escape(display_name(record["path"])), title_align="left", border_style="blue"
                )
            )
            if show_source_text:
                if record.get("text") is not None:
                    text, _ = limit_lines(record["text"], content_lines)
                    console.print(Panel(Text(text), title="content (UTF-8)", title_align="left"))
                else:
                    console.print(
                        Text(
                            f"{record['bytes']} bytes of binary content: --format jsonl has them "
                            f"as content_base64",
                            style="dim",
                        )
                    )
        elif kind in ("page", "claim", "chunk"):
            if kind == "page":
                title = f"page {record['page']}"
            else:
                title = record.get("label") or f"page:{record['page']}/piece:{record['piece']}"
                title += f" · {record['chunker']} · {record['position']}/{record['of']}"
            body = record.get("text")
            if body is None and record.get("image") is not None:
                shown = Text(f"[image, {len(record['image'])} bytes]", style="italic")
            else:
                text, _ = limit_lines(body or "", content_lines)
                shown = Text(text)
            console.print(
                Panel(shown, title=escape(display_name(title)), title_align="left", border_style="cyan")
            )
            grid = Table.grid(padding=(0, 2))
            for name, value in _fields(record, max_tokens, content_lines):
                grid.add_row(Text(name, style="dim"), Text(display_name(value), overflow="fold"))
            console.print(grid)
        elif kind == "empty":
            console.print(Text(record["reason"], style="yellow"))
        elif kind == "error":
            console.print(
                Text(
                    f"error at {record['stage']}: {record['error']}: {record['reason']} "
                    f"(run {record['run_id']})",
                    style="red",
                )
            )
        elif kind == "summary":
            c, t = record["characters"], record["tokens"]
            line = Text(f"{record['items']} {record.get('stage', 'items')}", style="bold")
            line.append(f" · characters min {c['min']} / mean {c['mean']} / max {c['max']}", style=None)
            line.append(f" · tokens min {t['min']} / mean {t['mean']} / max {t['max']}")
            over = record["over_token_limit"]
            line.append(
                f" · {over} over the {record['max_tokens']}-token limit", style="red" if over else None
            )
            console.print(line)
