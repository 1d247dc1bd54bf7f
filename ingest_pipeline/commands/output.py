"""How the commands print: JSON for machines, plain tables for people."""

from __future__ import annotations

import json
from typing import Any

from ingest_pipeline.identity import display_name


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=jsonable)


def jsonable(value: Any):
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def table(columns: list[str], rows: list[dict[str, Any]], width: int = 60) -> str:
    def cell(v: Any) -> str:
        text = jsonable(v) if isinstance(v, bytes) else ("" if v is None else str(v))
        text = display_name(text.replace("\n", " "))
        return text if len(text) <= width else text[: width - 1] + "…"

    cells = [[cell(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
