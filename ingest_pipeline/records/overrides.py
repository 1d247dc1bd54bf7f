"""A person's word over the heuristics: fields set in a sidecar file beside the document
(``<file name>.record.json``) or in the settings (``[documents."<glob>"]``)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping

from ingest_pipeline.records.record import FIELDS, DocumentRecord, Found

SIDECAR_SUFFIX = ".record.json"
_SIDECAR_BYTES = 64 * 1024


class BadOverride(ValueError):
    """An override that names an unknown field or gives a value that is not text."""


def checked(fields: Mapping[str, object], origin: str) -> dict[str, str]:
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise BadOverride(f"{origin}: unknown document field(s) {unknown}; known: {', '.join(FIELDS)}")
    wrong = sorted(k for k, v in fields.items() if not isinstance(v, (str, int)))
    if wrong:
        raise BadOverride(f"{origin}: field(s) {wrong} must be text (or a year)")
    return {k: str(v) for k, v in fields.items()}


def apply_settings(record: DocumentRecord, by_glob: Mapping[str, Mapping[str, str]]) -> None:
    """Fields of every ``[documents."<glob>"]`` table whose glob matches the document's path,
    later tables over earlier ones."""
    for pattern, fields in by_glob.items():
        if fnmatch.fnmatchcase(record.path, pattern):
            for name, value in fields.items():
                record.found[name] = Found(value, {"settings": f'documents."{pattern}".{name}'})


def apply_sidecar(record: DocumentRecord, raw: bytes | None, sidecar: str) -> None:
    if raw is None:
        return
    if len(raw) > _SIDECAR_BYTES:
        raise BadOverride(f"{sidecar}: a record sidecar holds at most {_SIDECAR_BYTES} bytes")
    try:
        fields = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadOverride(f"{sidecar}: not JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise BadOverride(f"{sidecar}: must hold a JSON object of document fields")
    for name, value in checked(fields, sidecar).items():
        record.found[name] = Found(value, {"sidecar": sidecar})
