"""The store: the lake's tables and partitions behind one typed method per need, and the
row <-> contract codecs. This is the only module that names a lake table or a path in the
lake; everything else asks the store (``tables`` holds the schemas it writes with).

On disk, ``<lake>/<table>/[<sub>/]<document>.parquet``, one file per (table, [profile or
chunker asset,] document), written atomically by ``Lake``. The file's metadata (the stage's
fingerprint and summary) travels with it. Asset and table share a name where they can;
where they do not, it is said here:

- asset ``chunks/<id>_v<n>`` writes table ``claims/<id>_v<n>``;
- asset ``chunk_map_<profile>`` writes table ``chunks/<profile>`` (the public view
  ``chunks``);
- asset ``lancedb_<profile>`` writes the marker table ``indexed/<profile>``.

Over 500 lines: one typed method for each need of every stage, in one place, is what lets
no other module name a lake table or a path in the lake.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest_pipeline.contract import ChunkPiece, Layout, LocatedLine, PageOutput
from ingest_pipeline.documents import DocumentEntry
from ingest_pipeline.identity import real_name, stored_name
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.stage_names import StageName

Meta = dict[str, Any]


# ---------------------------------------------------------------- row <-> contract codecs


# One encoder for every piece's meta (json.dumps with options builds a new one per call).
_META_JSON = json.JSONEncoder(sort_keys=True, default=str)


def piece_row(piece: ChunkPiece) -> dict[str, Any]:
    """The columns a piece fills in ``claims`` and ``chunks``."""
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
        "meta": meta_json(piece.meta) if piece.meta else None,
    }


def meta_json(meta: Mapping[str, Any]) -> str:
    """A piece's meta as its ``meta`` column holds it."""
    return _META_JSON.encode(dict(meta))


def claim_pieces(table: pa.Table) -> list[tuple[int, ChunkPiece]]:
    """A claim table's (page, piece) pairs in (page, piece) order, the pieces built column by
    column: a claim of pdf@1 holds thousands of lines, and turning each row into a dict
    first took as long as making the pieces."""
    table = table.sort_by([("page", "ascending"), ("piece", "ascending")])
    boxes = table.column("bbox").combine_chunks()
    corners = [pc.struct_field(boxes, name).to_pylist() for name in ("x0", "y0", "x1", "y1")]
    boxed = boxes.is_valid().to_pylist()
    names = (
        "page",
        "text",
        "image",
        "bbox_reason",
        "layout",
        "header_path",
        "content_type",
        "embed_text",
        "meta",
    )
    columns = [table.column(name).to_pylist() for name in names]
    from_json, loads = Layout.from_json, json.loads
    return [
        (
            page,
            ChunkPiece(
                text=text,
                image=image,
                bbox=(x0, y0, x1, y1) if box else None,
                bbox_reason=reason,
                layout=from_json(layout),
                header_path=tuple(path or ()),
                content_type=kind,
                embed_text=embed,
                meta=loads(meta) if meta else {},
            ),
        )
        for box, x0, y0, x1, y1, page, text, image, reason, layout, path, kind, embed, meta in zip(
            boxed, *corners, *columns
        )
    ]


def line_row(document: str, page: int, number: int, line: LocatedLine) -> dict[str, Any]:
    w, h = line.space
    return {
        "document_id": document,
        "page": page,
        "line": number,
        "text": line.text,
        "x0": line.box[0],
        "y0": line.box[1],
        "x1": line.box[2],
        "y1": line.box[3],
        "space_width": w,
        "space_height": h,
        "confidence": line.confidence,
        "bbox": tables.bbox_value(line.bbox()),
    }


def row_line(row: Mapping[str, Any]) -> LocatedLine:
    return LocatedLine(
        row["text"],
        (row["x0"], row["y0"], row["x1"], row["y1"]),
        (row["space_width"], row["space_height"]),
        row["confidence"],
    )


def _entry_row(entry: DocumentEntry, at: Any) -> dict[str, Any]:
    return {
        "document_id": entry.document_id,
        "path": entry.path,
        "uri": stored_name(entry.uri),
        "root": stored_name(entry.root),
        "registered_at": at,
    }


_NONE = pa.table({})


def _stage_dir(stage: str) -> str:
    """An errors subfolder for a stage name (``chunks/pdf@1`` -> ``chunks__pdf_v1``)."""
    return stage.replace("/", "__").replace("@", "_v")


# ---------------------------------------------------------------- the store


class Store:
    """One storage root's lake, addressed by what is stored rather than where."""

    # The public tables, one catalog view each (the project's data model).
    TABLES: tuple[str, ...] = tuple(tables.PUBLIC)

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    @classmethod
    def at(cls, root: str) -> "Store":
        return cls(Lake(root))

    @property
    def uri(self) -> str:
        return self.lake.uri

    # ------------------------------------------------------------ inventory

    def save_inventory(self, entries: Iterable[DocumentEntry]) -> None:
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc)
        for entry in entries:
            self.lake.write(
                "inventory",
                (entry.document_id,),
                pa.Table.from_pylist([_entry_row(entry, now)], schema=tables.INVENTORY),
            )

    def entry(self, document: str) -> DocumentEntry | None:
        table = self.lake.read("inventory", document)
        if table is None or table.num_rows == 0:
            return None
        row = table.to_pylist()[0]
        return DocumentEntry(
            row["document_id"], row["path"], real_name(row["uri"]), real_name(row.get("root"))
        )

    def inventory(self) -> dict[str, DocumentEntry]:
        entries = {}
        for path in self.lake.files("inventory"):
            entry = self.entry(path.rsplit("/", 1)[-1][: -len(".parquet")])
            if entry is not None:
                entries[entry.document_id] = entry
        return entries

    # ------------------------------------------------------------ sources

    def source(self, document: str) -> dict[str, Any] | None:
        """The document's source row (None when it has none)."""
        table = self.lake.read("sources", document)
        return table.to_pylist()[0] if table is not None and table.num_rows else None

    def source_meta(self, document: str) -> Meta | None:
        return self.lake.meta("sources", document)

    def write_source(self, document: str, row: Mapping[str, Any], meta: Meta) -> None:
        self.lake.write(
            "sources", (document,), pa.Table.from_pylist([dict(row)], schema=tables.SOURCES), meta=meta
        )

    def turn_away_source(self, document: str, reason: str) -> None:
        """The routes skip the document: no source row (so nothing downstream reads it), and
        the reason in the metadata, for the stages after to say."""
        empty = tables.SOURCES.empty_table()
        self.lake.write("sources", (document,), empty, meta={"turned_away": reason})

    def delete_source(self, document: str) -> None:
        self.lake.delete("sources", document)

    # ------------------------------------------------------------ document records

    def record_meta(self, document: str) -> Meta | None:
        return self.lake.meta("documents", document)

    def write_record(self, document: str, row: Mapping[str, Any], meta: Meta) -> None:
        self.lake.write(
            "documents", (document,), pa.Table.from_pylist([dict(row)], schema=tables.DOCUMENTS), meta=meta
        )

    def record_rows(self, documents: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Document records, of ``documents`` only when given."""
        if documents is not None:
            return [row for d in documents for row in (self.lake.read("documents", d) or _NONE).to_pylist()]
        import pyarrow.dataset as ds

        files = list(self.lake.files("documents"))
        if not files:
            return []
        data = ds.dataset(files, schema=tables.DOCUMENTS, format="parquet", filesystem=self.lake.fs)
        return data.to_table().to_pylist()

    # ------------------------------------------------------------ pages

    def pages_meta(self, document: str) -> Meta | None:
        return self.lake.meta("pages", document)

    def write_pages(
        self, document: str, outputs: Sequence[PageOutput], columns: Sequence[Mapping[str, Any]], meta: Meta
    ) -> None:
        """One row per page (``columns[i]``: the columns page ``outputs[i]`` adds to its
        reader's), and its located lines in ``page_lines``."""
        page_rows, line_rows = [], []
        for out, extra in zip(outputs, columns):
            page_rows.append({**out.to_row(), "document_id": document, **extra})
            for number, line in enumerate(out.lines or (), start=1):
                line_rows.append(line_row(document, out.page, number, line))
        self.lake.write(
            "page_lines", (document,), pa.Table.from_pylist(line_rows, schema=tables.PAGE_LINES), meta=meta
        )
        self.lake.write("pages", (document,), pa.Table.from_pylist(page_rows, schema=tables.PAGES), meta=meta)

    def delete_pages(self, document: str) -> None:
        self.lake.delete("pages", document)
        self.lake.delete("page_lines", document)

    def pages(self, document: str) -> tuple[PageOutput, ...] | None:
        """Page outputs with their located lines (None when the document has no pages)."""
        table = self.lake.read("pages", document)
        if table is None:
            return None
        lines_by_page: dict[int, list[LocatedLine]] = {}
        lines = self.lake.read("page_lines", document)
        if lines is not None:
            for row in lines.to_pylist():
                lines_by_page.setdefault(row["page"], []).append(row_line(row))
        return tuple(
            PageOutput(
                page=r["page"],
                status=r["status"],
                reader=r["reader"],
                text=r["text"],
                reason=r["reason"],
                width=r["width"],
                height=r["height"],
                lines=tuple(lines_by_page[r["page"]]) if r["page"] in lines_by_page else None,
            )
            for r in table.to_pylist()
        )

    def page_rows(self, document: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        table = self.lake.read("pages", document, columns=columns)
        return table.to_pylist() if table is not None else []

    # ------------------------------------------------------------ claims (asset chunks/<id>_v<n>)

    def claim_meta(self, chunker_asset: str, document: str) -> Meta | None:
        return self.lake.meta("claims", chunker_asset, document)

    def write_claim(self, chunker_asset: str, document: str, table: pa.Table, meta: Meta) -> None:
        """Write a claim: its rows as the parse worker made them (schema ``tables.CLAIMS``)."""
        self.lake.write("claims", (chunker_asset, document), table, meta=meta)

    def claim(
        self, chunker_asset: str, document: str, pages: Iterable[int] | None = None, meta: Meta | None = None
    ) -> tuple[Meta, dict[int, list[ChunkPiece]]] | None:
        """A chunker version's claim of a document: its metadata and its pieces per page in
        reading order (every claimed page present, if empty); None if it never answered.
        ``pages`` keeps only those pages (the rest are not turned into pieces); ``meta``,
        when the caller has read it already, is not read again."""
        meta = meta if meta is not None else self.claim_meta(chunker_asset, document)
        if meta is None:
            return None
        table = self.lake.read("claims", chunker_asset, document)
        by_page: dict[int, list[ChunkPiece]] = {p: [] for p in meta.get("claimed_pages", [])}
        if pages is not None:
            wanted = set(pages)
            by_page = {p: v for p, v in by_page.items() if p in wanted}
            if table is not None:
                page = table.column("page")
                table = table.filter(pc.is_in(page, value_set=pa.array(sorted(wanted), page.type)))
        if table is not None and table.num_rows:
            for page, piece in claim_pieces(table):
                by_page.setdefault(page, []).append(piece)
        return meta, by_page

    def claim_table(self, chunker_asset: str, document: str) -> pa.Table | None:
        """A chunker version's stored claim of a document as it is (None if there is none)."""
        return self.lake.read("claims", chunker_asset, document)

    # ------------------------------------------------------------ chunk map (asset chunk_map_<profile>)

    def chunk_map(self, profile: str, document: str, columns: list[str] | None = None) -> pa.Table | None:
        return self.lake.read("chunks", profile, document, columns=columns)

    def chunk_rows(self, profile: str, document: str) -> list[dict[str, Any]]:
        """A document's chunk rows without image bytes ([] when it has no chunk map)."""
        table = self.chunk_map(profile, document)
        return table.drop_columns(["image"]).to_pylist() if table is not None else []

    def chunk_map_meta(self, profile: str, document: str) -> Meta | None:
        return self.lake.meta("chunks", profile, document)

    def write_chunk_map(self, profile: str, document: str, table: pa.Table, meta: Meta) -> None:
        """Write a document's chunk map (a table of ``tables.CHUNKS``)."""
        self.lake.write("chunks", (profile, document), table, meta=meta)

    def withdraw(self, profile: str, document: str, version: str, at: Any) -> None:
        """Move a document's chunk map and vectors into the lake's history (out of the public
        views and of search)."""
        for table in ("chunks", "embeddings"):
            data = self.lake.read(table, profile, document)
            if data is not None:
                self.lake.write(
                    f"history/{table}",
                    (profile, document, version),
                    data,
                    meta={**(self.lake.meta(table, profile, document) or {}), "withdrawn_at": at},
                )
                self.lake.delete(table, profile, document)

    # ------------------------------------------------------------ embeddings (asset embeddings_<profile>)

    def embeddings(self, profile: str, document: str) -> pa.Table | None:
        return self.lake.read("embeddings", profile, document)

    def embeddings_meta(self, profile: str, document: str) -> Meta | None:
        return self.lake.meta("embeddings", profile, document)

    def write_embeddings(self, profile: str, document: str, table: pa.Table, meta: Meta) -> None:
        """Write a document's vectors (schema ``tables.EMBEDDINGS``)."""
        self.lake.write("embeddings", (profile, document), table, meta=meta)

    # ------------------------------------------------------------ the embedding cache

    def embedding_cache_files(self, model: str) -> list[str]:
        return sorted(self.lake.files(f"embedding_cache/{model}"))

    def cached_vectors(
        self, model: str, shas: Iterable[str], skip: str | None = None
    ) -> dict[str, np.ndarray]:
        """The cache's vectors of these text hashes (those it has), leaving out the shards
        whose name starts with ``skip`` (a writer that knows what it wrote itself)."""
        wanted = set(shas)
        found: dict[str, np.ndarray] = {}
        if not wanted:
            return found
        import pyarrow.dataset as ds

        for attempt in range(3):
            files = self.embedding_cache_files(model)
            if skip:
                files = [f for f in files if not f.rsplit("/", 1)[-1].startswith(skip)]
            if not files:
                return found
            dataset = ds.dataset(
                files, filesystem=self.lake.fs, format="parquet", schema=tables.EMBEDDING_CACHE
            )
            try:
                table = dataset.to_table(filter=pc.field("text_sha256").isin(list(wanted)))
                break
            except (FileNotFoundError, OSError):
                if attempt == 2:  # housekeeping folded shards away between listing and reading
                    raise
        for sha, vector in zip(
            table.column("text_sha256").to_pylist(), table.column("vector").to_numpy(zero_copy_only=False)
        ):
            found[sha] = np.asarray(vector, dtype=np.float32)
        return found

    def add_cached_vectors(self, model: str, shard: str, vectors: Mapping[str, np.ndarray]) -> None:
        """A new shard of the append-only cache."""
        if not vectors:
            return
        data = pa.table(
            {
                "text_sha256": list(vectors),
                "vector": pa.array([v.tolist() for v in vectors.values()], type=pa.list_(pa.float32())),
            },
            schema=tables.EMBEDDING_CACHE,
        )
        self.lake.write(f"embedding_cache/{model}", (shard,), data)

    def read_cache_file(self, path: str) -> pa.Table:
        import pyarrow.parquet as pq

        with self.lake.fs.open_input_file(path) as source:
            return pq.read_table(source, schema=tables.EMBEDDING_CACHE)

    def replace_cache_files(self, model: str, merged: pa.Table, name: str, old: Sequence[str]) -> int:
        """Write ``merged`` as the cache shard ``name``, then delete the ``old`` shards (a
        kill in between leaves duplicates, never a gap); returns the shards left."""
        written = self.lake.write(f"embedding_cache/{model}", (name,), merged)
        for path in old:
            if path != written:
                self.lake.fs.delete_file(path)
        return len(self.embedding_cache_files(model))

    # ------------------------------------------------------------ LanceDB markers (asset lancedb_<profile>)

    def index_marker(self, profile: str, document: str) -> Meta | None:
        """The metadata of a document's index marker, the last thing a run writes for it."""
        return self.lake.meta("indexed", profile, document)

    def has_index_marker(self, profile: str, document: str) -> bool:
        return self.lake.exists("indexed", profile, document)

    def write_index_marker(self, profile: str, document: str, rows: int, meta: Meta) -> None:
        self.lake.write("indexed", (profile, document), pa.table({"rows": [rows]}), meta=meta)

    def delete_index_marker(self, profile: str, document: str) -> None:
        self.lake.delete("indexed", profile, document)

    def indexed_documents(self, profile: str) -> set[str]:
        """The documents a profile has an index marker for."""
        return {f.rsplit("/", 1)[-1][: -len(".parquet")] for f in self.lake.files(f"indexed/{profile}")}

    # ------------------------------------------------------------ errors

    def write_error(self, stage: str, document: str, row: Mapping[str, Any], traceback: str) -> None:
        data = pa.Table.from_pylist([dict(row)], schema=tables.ERRORS)
        self.lake.write("errors", (_stage_dir(stage), document), data, meta={"traceback": traceback})

    def clear_error(self, stage: str, document: str) -> None:
        self.lake.delete("errors", _stage_dir(stage), document)

    def document_errors(self, document: str) -> list[dict[str, Any]]:
        """The document's errors rows, at every stage that has one."""
        found = []
        for stage_dir in self.lake.subtables("errors"):
            table = self.lake.read("errors", stage_dir, document)
            if table is not None:
                found += table.to_pylist()
        return found

    def error_traceback(self, stage: str, document: str) -> str:
        return str((self.lake.meta("errors", _stage_dir(stage), document) or {}).get("traceback") or "")

    # ------------------------------------------------------------ shard manifests

    def manifest(self, mode: str, shard: str) -> pa.Table | None:
        return self.lake.read(f"shard_manifests/{mode}", shard)

    def write_manifest(self, mode: str, shard: str, data: pa.Table) -> None:
        self.lake.write(f"shard_manifests/{mode}", (shard,), data)

    def delete_manifest(self, mode: str, shard: str) -> None:
        self.lake.delete(f"shard_manifests/{mode}", shard)

    # ------------------------------------------------------------ per asset, and current markers

    @staticmethod
    def keeps_asset(asset: str) -> bool:
        """Whether a per-document asset of the ingest job writes a table of the lake."""
        return _asset_table(asset, "") is not None

    def asset_meta(self, asset: str, document: str) -> Meta | None:
        """The metadata (its stage's fingerprint and summary) of what a per-document asset
        (``sources``, ``chunks/pdf_v1``, ``chunk_map_default`` ...) stored for a document."""
        where = _asset_table(asset, document)
        return self.lake.meta(where[0], *where[1]) if where else None

    def current_marker(self, document: str) -> Meta | None:
        """The ``freshness`` marker of a document: the state it was last current in."""
        return self.lake.meta("current", document)

    def write_current_marker(self, document: str, state: Mapping[str, Any]) -> None:
        self.lake.write(
            "current", (document,), pa.table({"document_id": [document]}), meta={"state": dict(state)}
        )

    def forget_current_marker(self, document: str) -> None:
        self.lake.delete("current", document)

    # ------------------------------------------------------------ whole documents, whole lake

    def delete_documents(self, documents: Iterable[str]) -> int:
        """Every file of these documents, from every table, in one walk; returns how many."""
        return self.lake.delete_documents(documents)

    def sweep_temporary_files(self, older_than_seconds: float) -> int:
        """Delete the temporary files of writes killed before their rename."""
        return self.lake.sweep_temporary(older_than_seconds)

    # ------------------------------------------------------------ the catalog's tables

    def table_files(self, table: str) -> Iterator[str]:
        """Every Parquet file of a public table, as paths DuckDB (or pyarrow) can read."""
        return self.lake.files(_public(table))

    def table_glob(self, table: str) -> str:
        return f"{self.lake.root}/{_public(table)}/**/*.parquet"

    def schema_file(self, table: str) -> str:
        """An empty Parquet file with a public table's schema, so a view exists before any data."""
        import pyarrow.parquet as pq

        fs, folder = self.lake.fs, f"{self.lake.root}/_schemas"
        path = f"{folder}/{_public(table)}.parquet"
        if fs.get_file_info(path).type.name != "File":
            fs.create_dir(folder, recursive=True)
            with fs.open_output_stream(path) as sink:
                pq.write_table(pa.Table.from_pylist([], schema=tables.PUBLIC[table]), sink)
        return path


def _asset_table(asset: str, document: str) -> tuple[str, tuple[str, ...]] | None:
    """The table and partition a per-document asset of the ingest job writes for a document."""
    stage = StageName.of_asset(asset)
    if stage is None or stage.table is None:
        return None
    return stage.table, stage.partition(document)


def _public(table: str) -> str:
    if table not in tables.PUBLIC:
        raise KeyError(f"{table!r} is not a public table ({', '.join(tables.PUBLIC)})")
    return table
