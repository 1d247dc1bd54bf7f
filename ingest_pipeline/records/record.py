"""A document's record: its fields and, for each, where it was read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Bumped when what a record holds or how it is read changes: stored records of an older
# version are read again on the next ingest (from the stored pages: nothing is parsed again).
RECORD_VERSION = 2

FIELDS = ("title", "organisation", "period", "kind", "language")


@dataclass(frozen=True)
class Found:
    """A field's value and where it was read: ``{"metadata": "Title"}``, ``{"page": 1, "bbox":
    [x0, y0, x1, y1]}``, ``{"file name": "..."}``, ``{"sidecar": path}``, ``{"settings": key}``."""

    value: str
    where: dict[str, Any]


@dataclass
class DocumentRecord:
    document_id: str
    path: str
    pages: int = 0
    found: dict[str, Found] = field(default_factory=dict)
    # Other spellings of the organisation a query may use (the file name's, the metadata's).
    names: list[str] = field(default_factory=list)
    note: str = ""

    def value(self, name: str) -> str | None:
        hit = self.found.get(name)
        return hit.value if hit else None

    def year(self) -> int | None:
        period = self.value("period") or ""
        return int(period[:4]) if period[:4].isdigit() else None

    def setdefault(self, name: str, value: str | None, where: dict[str, Any]) -> None:
        """Keep the first source that gave a field a value."""
        if value and name not in self.found:
            self.found[name] = Found(value, where)

    def to_row(self, run_id: str, source_sha256: str | None) -> dict[str, Any]:
        row: dict[str, Any] = {"document_id": self.document_id, "path": self.path}
        row.update({name: self.value(name) for name in FIELDS})
        row["year"] = self.year()
        row["pages"] = self.pages
        row["names"] = list(self.names)
        row["read_from"] = json.dumps({k: v.where for k, v in sorted(self.found.items())}, sort_keys=True)
        row["note"] = self.note or None
        row["source_sha256"] = source_sha256
        row["run_id"] = run_id
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "DocumentRecord":
        where = json.loads(row.get("read_from") or "{}")
        found = {name: Found(row[name], where.get(name, {})) for name in FIELDS if row.get(name)}
        return cls(
            row["document_id"],
            row["path"],
            pages=row.get("pages") or 0,
            found=found,
            names=list(row.get("names") or []),
            note=row.get("note") or "",
        )
