"""The LanceDB side: one table per profile, upserts by chunk id, full-text and hybrid search."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ingest_pipeline.storage.tables import BBOX

_PROCESS_LOCK = threading.Lock()
_CLIENT_LOAD = threading.Lock()
_client_loading = False


def load_client_ahead() -> None:
    """Import the LanceDB client on a thread of its own, once per process: its import takes
    seconds, which a run that embeds spends while the model works rather than
    after it, when writing the rows is all that is left to do."""
    global _client_loading
    with _CLIENT_LOAD:
        if _client_loading:
            return
        _client_loading = True
    threading.Thread(target=_import_client, name="lancedb-import", daemon=True).start()


def _import_client() -> None:
    try:
        import lancedb  # noqa: F401 - loaded now, used by the run's LanceDB step
    except Exception:  # noqa: BLE001 - the step imports it again and says what is wrong
        pass


SEARCH_MODES = ("vector", "text", "hybrid")
KEYWORD_COLUMN = "search_text"  # the column the full-text index covers


def keyword_column(table) -> str:
    """The column a table's full-text index covers: the keyword column, or ``text`` in a
    table an older version wrote and no ingest has upgraded yet."""
    return KEYWORD_COLUMN if KEYWORD_COLUMN in table.schema.names else "text"


def search_text(row: dict[str, Any]) -> str | None:
    """A chunk row's keyword text: what the model embedded (title and headings in front of
    the text), else its text; words of the text the embedding text leaves out (pdf@4 leaves
    out standalone numbers) follow it, so keyword search still finds "1,330"."""
    embed, text = row.get("embed_text"), row.get("text")
    if not embed:
        return text
    if not text or embed.endswith(text):
        return embed
    left = Counter(text.split()) - Counter(embed.split())
    return embed + "\n" + " ".join(left.elements()) if left else embed


def built_with(table) -> str:
    """The model id a table records (a table from before records none: the legacy model)."""
    raw = (table.schema.metadata or {}).get(EMBEDDER_KEY)
    return json.loads(raw)["model_id"] if raw is not None else LEGACY_MODEL_ID


def table_name(profile: str) -> str:
    return f"chunks_{profile}"


# The schema metadata key under which a table records the embedder it was built with.
EMBEDDER_KEY = b"ingest_pipeline.embedder"
# What a table from before embedders were recorded was built with: the only model there was.
LEGACY_MODEL_ID = "all-minilm-l6-v2-onnx-int8"


@dataclass(frozen=True)
class TableModel:
    """The embedder a table's vectors come from: its key, width and identity (no secret)."""

    model_id: str
    dim: int
    identity: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def metadata(self) -> dict[bytes, bytes]:
        record = {"model_id": self.model_id, "dim": self.dim, "identity": dict(self.identity)}
        return {EMBEDDER_KEY: json.dumps(record, sort_keys=True).encode("utf-8")}


class EmbedderMismatch(RuntimeError):
    """A table is asked for with another embedder than the one that built it."""


def index_schema(dim: int, model: TableModel | None = None) -> pa.Schema:
    schema = _schema(dim)
    return schema.with_metadata(model.metadata()) if model else schema


def _schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("document_id", pa.string()),
            ("path", pa.string()),
            ("profile", pa.string()),
            ("page", pa.int32()),
            ("index", pa.int32()),
            ("label", pa.string()),
            ("text", pa.string()),
            # What keyword search reads: the embedding text (the document's title, the heading
            # path, the text), so a word of the title or a heading finds the chunk as the vector does.
            ("search_text", pa.string()),
            ("bbox", BBOX),
            ("bbox_reason", pa.string()),
            ("role", pa.string()),
            ("content_type", pa.string()),
            ("header_path", pa.list_(pa.string())),
            ("chunker", pa.string()),
            ("config_hash", pa.string()),
            ("reader", pa.string()),
            ("source_sha256", pa.string()),
            ("run_id", pa.string()),
            ("modality", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


_COLUMN = re.compile(r"^[a-z_][a-z0-9_]*$")


def filter_literal(value: str) -> str:
    """The one way a value enters a LanceDB filter: a SQL string literal with its quotes
    doubled (LanceDB's filters are DataFusion SQL, where a backslash is an ordinary
    character). Only strings: anything else is refused, not stringified."""
    if not isinstance(value, str):
        raise TypeError(f"a LanceDB filter value must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise ValueError("a LanceDB filter value cannot hold a NUL character")
    return "'" + value.replace("'", "''") + "'"


def _column(name: str) -> str:
    if not _COLUMN.match(name):
        raise ValueError(f"not a column name: {name!r}")
    return name


def where_equals(column: str, value: str) -> str:
    """``column = 'value'``, safely built."""
    return f"{_column(column)} = {filter_literal(value)}"


def where_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')``, safely built; an empty list matches nothing."""
    literals = [filter_literal(v) for v in values]
    if not literals:
        return "false"
    return f"{_column(column)} IN ({', '.join(literals)})"


def with_keywords(rows: pa.Table) -> pa.Table:
    """``rows`` with their keyword column filled: a row that has none is found by its text."""
    import pyarrow.compute as pc

    if KEYWORD_COLUMN not in rows.column_names:
        return rows.append_column(KEYWORD_COLUMN, rows.column("text"))
    filled = pc.coalesce(rows.column(KEYWORD_COLUMN), rows.column("text"))
    return rows.set_column(rows.column_names.index(KEYWORD_COLUMN), KEYWORD_COLUMN, filled)


class VectorIndex:
    """LanceDB tables under one URI. Writers are serialized (concurrent upserts to one
    table conflict): a lock per process and, on a local folder, a lock file. On an object
    store there is no lock file; across processes the ``lancedb`` pool (one slot, in the
    Dagster instance) serializes the writing steps."""

    def __init__(self, uri: str, dim: int) -> None:
        self.uri = uri
        self.dim = dim
        self._db = None

    @property
    def db(self):
        if self._db is None:
            import lancedb

            from ingest_pipeline.storage.object_store import lancedb_storage_options

            if "://" not in self.uri:
                os.makedirs(self.uri, exist_ok=True)
            self._db = lancedb.connect(self.uri, storage_options=lancedb_storage_options(self.uri))
        return self._db

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        with _PROCESS_LOCK:
            if "://" in self.uri:
                yield
                return
            import fcntl

            os.makedirs(self.uri, exist_ok=True)
            with open(os.path.join(self.uri, ".write.lock"), "w") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def tables(self) -> list[str]:
        listing = self.db.list_tables()
        names = getattr(listing, "tables", listing)
        return sorted(names)

    def open(self, profile: str, create: bool = False, model: TableModel | None = None):
        """The profile's table; ``create``: made if missing, and made anew (empty) when it
        was built with another embedder than ``model``'s (each document's rows are written
        again as its new vectors arrive)."""
        name = table_name(profile)
        if name in self.tables():
            table = self.db.open_table(name)
            if not create:
                return table
            if model is None or built_with(table) == model.model_id:
                return self._upgrade(table)
            self.db.drop_table(name)
        elif not create:
            return None
        return self.db.create_table(name, schema=index_schema(model.dim if model else self.dim, model))

    def model_of(self, profile: str) -> dict[str, Any] | None:
        """What the profile's table records of the embedder it was built with (None: no table)."""
        table = self.open(profile)
        if table is None:
            return None
        raw = (table.schema.metadata or {}).get(EMBEDDER_KEY)
        if raw is None:
            return {"model_id": LEGACY_MODEL_ID, "dim": table.schema.field("vector").type.list_size}
        return json.loads(raw)

    def check_model(self, profile: str, model_id: str) -> None:
        """Refuse to serve a table with another embedder than the one that built it."""
        recorded = self.model_of(profile)
        if recorded is not None and recorded["model_id"] != model_id:
            raise EmbedderMismatch(
                f"LanceDB table {table_name(profile)} was built with embedder {recorded['model_id']}, "
                f"and profile '{profile}' now uses {model_id}: its vectors are not comparable. "
                f"Run `ingest-pipeline ingest` to rebuild it with the profile's embedder."
            )

    def _upgrade(self, table):
        """Add the columns a newer schema has to a table an older version created (as
        nulls); rows are refreshed as their documents are re-indexed."""
        have = set(table.schema.names)
        missing = [f for f in index_schema(self.dim) if f.name not in have]
        if missing:
            sql_types = {pa.string(): "STRING", pa.int32(): "INT", pa.float64(): "DOUBLE"}
            unsupported = [f.name for f in missing if f.type not in sql_types]
            if unsupported:
                raise RuntimeError(
                    f"LanceDB table {table.name} lacks columns {unsupported}; drop it and re-ingest"
                )
            # keyword search keeps finding old rows by their text until their documents are re-indexed
            table.add_columns(
                {
                    f.name: "text" if f.name == KEYWORD_COLUMN else f"CAST(NULL AS {sql_types[f.type]})"
                    for f in missing
                }
            )
        return table

    def sync_document(
        self, profile: str, document: str, rows: pa.Table, model: TableModel | None = None
    ) -> dict[str, int]:
        """Make the document's rows exactly ``rows``: upsert by chunk id and delete its other
        rows in one merge, so one commit moves it from its old rows to its new ones (a
        killed run never leaves a mix of the two to be served)."""
        from ingest_pipeline.runtime.faults import crash_point

        schema = index_schema(model.dim if model else self.dim)
        rows = with_keywords(rows).select(schema.names).cast(schema)
        with self.writing():
            table = self.open(profile, create=True, model=model)
            mine = where_equals("document_id", document)
            before = table.count_rows(mine)
            (
                table.merge_insert("chunk_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(mine)
                .execute(rows, on_bad_vectors="null")
            )
            crash_point("lancedb")
            after = table.count_rows(mine)
        return {"rows_before": before, "rows": after}

    def delete_document(self, document: str) -> int:
        return self.delete_documents([document])

    def delete_documents(self, documents: Sequence[str], chunk: int = 500) -> int:
        """Delete these documents' rows from every table: one delete per table and chunk of ids."""
        removed = 0
        documents = sorted(set(documents))
        with self.writing():
            for name in self.tables():
                table = self.db.open_table(name)
                for start in range(0, len(documents), chunk):
                    where = where_in("document_id", documents[start : start + chunk])
                    n = table.count_rows(where)
                    if n:
                        table.delete(where)
                        removed += n
        return removed

    def refresh_text_index(self, profile: str) -> None:
        from lancedb.index import FTS

        with self.writing():
            table = self.open(profile)
            if table is not None and table.count_rows():
                table.create_index(KEYWORD_COLUMN, config=FTS(), replace=True)

    def count(self, profile: str, document: str | None = None) -> int:
        table = self.open(profile)
        if table is None:
            return 0
        return table.count_rows(where_equals("document_id", document) if document else None)

    def counts(self, profile: str, documents: Iterable[str] | None = None) -> dict[str, int]:
        """Rows per document in one scan of the ``document_id`` column (of ``documents`` only,
        when given), instead of one counting query per document."""
        table = self.open(profile)
        found: dict[str, int] = {}
        if table is None:
            return found
        wanted = None if documents is None else list(documents)
        if wanted == []:
            return found
        query = table.search().select(["document_id"])
        if wanted is not None:
            query = query.where(where_in("document_id", wanted))
        for doc in query.limit(None).to_arrow().column("document_id").to_pylist():
            found[doc] = found.get(doc, 0) + 1
        return found

    def search(
        self,
        profile: str,
        query: str,
        vector: Sequence[float] | None,
        k: int = 5,
        mode: str = "hybrid",
        documents: Iterable[str] | None = None,
        model_id: str | None = None,
        where: str | None = None,
    ) -> list[dict[str, Any]]:
        """Hits of ``query`` (and ``vector``), only among ``documents`` when given and rows
        satisfying ``where`` (SQL built by ``retrieval.filters``, never by hand);
        ``model_id``: the embedder that made ``vector``, refused unless it built the table."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}")
        if model_id is not None and mode != "text":
            self.check_model(profile, model_id)
        table = self.open(profile)
        if table is None or table.count_rows() == 0:
            return []
        keywords = keyword_column(table)
        if mode == "vector":
            builder = table.search(list(vector), query_type="vector", vector_column_name="vector").metric(
                "cosine"
            )
        elif mode == "text":
            builder = table.search(query, query_type="fts", fts_columns=keywords)
        else:
            builder = (
                table.search(query_type="hybrid", vector_column_name="vector", fts_columns=keywords)
                .vector(list(vector))
                .text(query)
            )
        conditions = [where_in("document_id", documents)] if documents is not None else []
        conditions += [where] if where else []
        if conditions:
            builder = builder.where(" AND ".join(f"({c})" for c in conditions), prefilter=True)
        hits = builder.limit(k).to_arrow().to_pylist()
        for hit in hits:
            hit.pop("vector", None)
            hit.pop(KEYWORD_COLUMN, None)  # the text with its title and headings: the hit has them apart
            if "_relevance_score" in hit:
                hit["score"] = hit.pop("_relevance_score")
            elif "_distance" in hit:
                hit["score"] = 1.0 - hit.pop("_distance")
            elif "_score" in hit:
                hit["score"] = hit.pop("_score")
        return hits
