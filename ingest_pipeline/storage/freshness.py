"""Whether a document is already current, so ``ingest`` need not run the graph for it.

A Dagster run costs seconds before any stage looks at its fingerprints (every partition's
materialization is an event in the instance's SQLite log), so a re-run over an unchanged
tree spent most of its time telling the instance that nothing changed. Instead, after an
``ingest`` in which a document finished without failure, its *current* marker records:

- the sha256 of its bytes and where they resolve to;
- the run identity: every stage version, reader, reader setting, chunker version and
  config hash, profile, parse limit and embedding model that can change an output;
- whether a password is configured for it (never the password);
- a digest of the fingerprints its assets stored, its row count in each indexed LanceDB
  table, and its recorded errors (a document whose failure is in its bytes fails the same
  way again; one that ran out of time or whose run broke is never marked, so it is tried
  again).

The next ``ingest`` compares all of them with what is true now. Any difference — new
bytes, a changed setting, an asset another run rewrote (the UI, the sensor), rows missing
from LanceDB — sends the document through the graph again, where each stage's own
fingerprint decides what is recomputed. ``--force`` ignores the markers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.settings import PASSWORDS_FILE
from ingest_pipeline.storage import object_store
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.store import Store

# Failures that depend on the machine's load, the run or the network, not on the document:
# a document that has one is never marked current, so the next run retries it.
TRANSIENT_ERRORS = {"ParseLimitExceeded", "SourceUnavailable", "SourceChanged"}


def run_identity(parts) -> str:
    """One hash of everything besides a document's bytes that can change its outputs."""
    from ingest_pipeline import media_types
    from ingest_pipeline.readers import reader_ids, reader_settings
    from ingest_pipeline.records.record import RECORD_VERSION
    from ingest_pipeline.stages import STAGE_VERSIONS
    from ingest_pipeline.stages.sources import password_file_path

    settings, registry, embedder = parts.settings, parts.registry, parts.embedder
    return sha256_text(
        canonical_json(
            {
                "stages": STAGE_VERSIONS,
                "readers": sorted(reader_ids()),
                "reader_settings": reader_settings(media_types.PDF),
                # Only the versions some profile's order uses, by ref and config hash: installing a
                # version no profile uses, or its advertised media types, changes nothing (B34).
                "chunkers": sorted(
                    {
                        (i.ref, i.config_hash)
                        for p in settings.profiles
                        for i in map(registry.info, registry.order_for(p.chunkers, p.name))
                    }
                ),
                "profiles": [
                    (p.name, list(p.chunkers), p.options(), settings.is_indexed(p)) for p in settings.profiles
                ],
                "served": settings.default_profile,
                # How each document is treated; a route's password file by its version.
                "routes": [
                    [r.described(), _file_version(password_file_path(settings, r.password_file))]
                    if r.password_file
                    else r.described()
                    for r in settings.routes.routes
                ],
                "limits": [
                    settings.max_file_bytes,
                    dict(settings.max_bytes),
                    list(settings.link_roots),
                    settings.parse_timeout,
                    settings.parse_memory_bytes,
                ],
                # How document records are read, and the fields a person set for them.
                "records": [RECORD_VERSION, {g: dict(f) for g, f in settings.document_fields.items()}],
                "models": [  # each profile's embedder: its settings, identity key and token limit
                    (p.name, settings.embedder_of(p), *_model_of(embedder.for_profile(p.name)))
                    for p in settings.profiles
                ],
                # Any edit of the passwords file (whose values are never stored) looks at every
                # document again: a corrected password must reach the document it failed.
                "passwords_file": _file_version(
                    os.environ.get("INGEST_PASSWORDS") or object_store.join(settings.data, PASSWORDS_FILE)
                ),
            }
        )
    )


def _model_of(model) -> tuple[str, int]:
    return model.model_id, model.max_tokens


def _sidecar_version(real: str) -> list[int] | None:
    """The version of a document's record sidecar (records.overrides): editing it reads the
    document's record again."""
    from ingest_pipeline.records.overrides import SIDECAR_SUFFIX

    return None if object_store.is_uri(real) else _file_version(real + SIDECAR_SUFFIX)


def _file_version(path: str) -> list[int] | None:
    try:
        found = object_store.stat(path)
    except (FileNotFoundError, OSError):
        return None
    return [found.size, found.mtime_ns]


def _unchanged_detail(asset: str, meta: dict[str, Any]) -> dict[str, Any]:
    """What the stage itself says of an unchanged document (see the stages' early returns)."""
    if asset == "sources":
        return {"sha256": meta.get("sha256")}
    if asset.startswith("lancedb_"):
        return {"rows": meta.get("rows")}
    summary = dict(meta.get("summary") or {})
    if asset.startswith("embeddings_"):
        kept = int(summary.get("vectors", 0) or 0)
        return {"vectors": kept, "embedded": 0, "cached": kept}
    return summary


@dataclass
class Check:
    """What was found for one document: current or not, and the stages' stored outcomes."""

    current: bool
    state: dict[str, Any] = field(default_factory=dict)
    # What each asset's stage would say of the document now: asset -> (status, detail).
    outcomes: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


class Freshness:
    """Reads and writes the current markers of one storage root for one ingest."""

    def __init__(self, parts, assets: list[str], documents: list[str]) -> None:
        self.store: Store = parts.store
        self.settings = parts.settings
        self.index = parts.index
        self.assets = sorted(a for a in assets if Store.keeps_asset(a))
        self.identity = run_identity(parts)
        self.reload_errors(documents)

    def reload_errors(self, documents: list[str], con: Any = None) -> None:
        """Forget what was read of the errors rows and LanceDB row counts (the runs rewrite
        both): they are read again, once, for ``documents`` when next needed. ``con``: an
        open connection with the views to read them through (else one is opened then)."""
        self._documents, self._con = list(documents), con
        self._errors: dict[str, list[dict[str, Any]]] | None = None
        self._rows: dict[str, dict[str, int]] = {}

    @property
    def errors(self) -> dict[str, list[dict[str, Any]]]:
        if self._errors is None:
            from ingest_pipeline.storage.catalog import query

            self._errors = {}
            if self._documents:
                for row in query(
                    self.store,
                    "SELECT document_id, stage, error, reason FROM errors "
                    "WHERE list_contains(?, document_id) ORDER BY stage",
                    [self._documents],
                    con=self._con,
                ).to_pylist():
                    self._errors.setdefault(row.pop("document_id"), []).append(row)
        return self._errors

    def _index_rows(self, profile: str) -> dict[str, int]:
        if profile not in self._rows:
            self._rows[profile] = self.index.counts(profile)
        return self._rows[profile]

    def state(self, entry) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The document's state now, and each asset's stored metadata."""
        from ingest_pipeline.readers.base import password_for

        real = entry.uri if object_store.is_uri(entry.uri) else os.path.realpath(entry.uri)
        metas: dict[str, dict[str, Any]] = {}
        fingerprints, rows = [], {}
        for asset in self.assets:
            meta = self.store.asset_meta(asset, entry.document_id) or {}
            metas[asset] = meta
            fingerprints.append((asset, meta.get("fingerprint")))
            if asset.startswith("lancedb_"):
                profile = asset[len("lancedb_") :]
                rows[profile] = [meta.get("rows"), self._index_rows(profile).get(entry.document_id, 0)]
        return {
            "sha256": object_store.sha256(real),
            "resolved": real,
            "identity": self.identity,
            "password": password_for(entry.path, self.settings.passwords) is not None,
            "record_sidecar": _sidecar_version(entry.uri),
            "fingerprints": sha256_text(canonical_json(fingerprints)),
            "rows": rows,
            "errors": self.errors.get(entry.document_id, []),
        }, metas

    def check(self, entry) -> Check:
        """Whether ``entry`` is current; on any doubt (unreadable, never marked), it is not."""
        marker = self.store.current_marker(entry.document_id)
        if not marker:  # never finished (a cold root): nothing to compare, so nothing to read
            return Check(False)
        try:
            state, metas = self.state(entry)
        except (OSError, ValueError):
            return Check(False)
        if not marker or marker.get("state") != state or not self._settled(state):
            return Check(False, state)
        failed = {
            stage.asset: e["reason"] for e in state["errors"] if (stage := StageName.of_stage(e["stage"]))
        }
        outcomes = {}
        unopened = bool((metas.get("pages") or {}).get("unopened"))  # a verdict page only (A13)
        for asset, meta in metas.items():
            if asset in failed and (not meta or asset == "pages"):
                outcomes[asset] = ("failed", {"reason": failed[asset]})
            elif meta and not (unopened and asset not in ("sources", "pages")):
                outcomes[asset] = ("unchanged", _unchanged_detail(asset, meta))
            else:
                outcomes[asset] = ("skipped", {"reason": "an upstream stage has no output for this document"})
        return Check(True, state, outcomes)

    @staticmethod
    def _settled(state: dict[str, Any]) -> bool:
        rows_agree = all((stored or 0) == found for stored, found in state["rows"].values())
        return rows_agree and not any(e["error"] in TRANSIENT_ERRORS for e in state["errors"])

    def mark(self, entry) -> None:
        """Record that ``entry`` finished every asset as it is now (its errors included)."""
        state, _ = self.state(entry)
        if self._settled(state):
            self.store.write_current_marker(entry.document_id, state)

    def forget(self, document: str) -> None:
        self.store.forget_current_marker(document)
