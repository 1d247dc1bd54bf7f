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


def create_views(con: Any, lake: Lake) -> dict[str, str]:
    """(Re)create every public view on a DuckDB connection; returns the SQL of each."""
    created = {}
    for table in VIEWS:
        sql = view_sql(lake, table)
        con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {sql}')
        created[table] = sql
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
