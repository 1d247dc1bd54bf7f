"""DuckDB views over the lake: the project's public tables, queryable with SQL."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ingest_pipeline import tables
from ingest_pipeline.lake import Lake

VIEWS = tuple(tables.PUBLIC)


def _schema_file(lake: Lake, table: str) -> str:
    """An empty Parquet file with the table's schema, so a view exists before any data."""
    path = f"{lake.root}/_schemas/{table}.parquet"
    if lake.fs.get_file_info(path).type.name != "File":
        lake.fs.create_dir(f"{lake.root}/_schemas", recursive=True)
        with lake.fs.open_output_stream(path) as sink:
            pq.write_table(pa.Table.from_pylist([], schema=tables.PUBLIC[table]), sink)
    return path


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def view_sql(lake: Lake, table: str) -> str:
    has_files = next(iter(lake.files(table)), None) is not None
    if has_files:
        source = f"{lake.root}/{table}/**/*.parquet"
        return (f"SELECT * FROM read_parquet({_sql_string(source)}, union_by_name=true, "
                f"hive_partitioning=false)")
    return f"SELECT * FROM read_parquet({_sql_string(_schema_file(lake, table))})"


# Views over the public ones, for audits. ``chunk_lineage``: every chunk with the source it
# came from now (``current`` is false once the file's bytes changed since the chunk was cut).
# ``chunker_comparison``: two chunker versions on the same page: how many pieces each cut and
# the words one has that the other lacks.
DERIVED = {
    "chunk_lineage": """
        SELECT c.chunk_id, c.label, c.profile, c.document_id, c.path, c.page, c."index", c.bbox, c.bbox_reason,
               c.chunker, c.config_hash, c.reader, c.source_sha256, s.sha256 AS current_sha256,
               c.source_sha256 = s.sha256 AS current, s.uri, s.media_type, c.run_id
        FROM chunks c LEFT JOIN sources s USING (document_id)""",
    "claims_per_page": """
        SELECT document_id, page, chunker, config_hash, count(*) AS pieces,
               count(*) FILTER (WHERE image IS NOT NULL) AS images,
               string_agg(text, ' ' ORDER BY piece) AS text
        FROM claims GROUP BY ALL""",
    "chunker_comparison": """
        SELECT a.document_id, a.page, a.chunker AS chunker_a, b.chunker AS chunker_b,
               a.pieces AS pieces_a, b.pieces AS pieces_b,
               list_filter(list_distinct(string_split_regex(lower(coalesce(a.text, '')), '\\s+')),
                           lambda w: w <> '' AND NOT list_contains(
                               string_split_regex(lower(coalesce(b.text, '')), '\\s+'), w)) AS words_only_in_a,
               list_filter(list_distinct(string_split_regex(lower(coalesce(b.text, '')), '\\s+')),
                           lambda w: w <> '' AND NOT list_contains(
                               string_split_regex(lower(coalesce(a.text, '')), '\\s+'), w)) AS words_only_in_b
        FROM claims_per_page a JOIN claims_per_page b USING (document_id, page)
        WHERE a.chunker <> b.chunker""",
}


def create_views(con: Any, lake: Lake) -> dict[str, str]:
    """(Re)create every public view on a DuckDB connection; returns the SQL of each."""
    created = {}
    for table in VIEWS:
        sql = view_sql(lake, table)
        con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {sql}')
        created[table] = sql
    for name, sql in DERIVED.items():
        con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')
        created[name] = sql
    return created


def build_catalog(lake: Lake, path: str) -> dict[str, int]:
    """Write the views into the catalog file (views only, no data); returns row counts."""
    import duckdb

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    con = duckdb.connect(path)
    try:
        create_views(con, lake)
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in VIEWS}
    finally:
        con.close()


def connect(lake: Lake):
    """An in-memory DuckDB connection with the views, for queries that must not contend
    for the catalog file's single writer."""
    import duckdb

    con = duckdb.connect(":memory:")
    create_views(con, lake)
    return con


def query(lake: Lake, sql: str) -> pa.Table:
    con = connect(lake)
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()
