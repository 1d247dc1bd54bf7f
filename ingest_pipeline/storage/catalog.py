"""DuckDB views over the lake: the project's public tables, queryable with SQL. The store
says where each public table's files are; the SQL here reads only those views.

Every function takes the lake (or the store over it)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from ingest_pipeline.storage import tables
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.store import Store

VIEWS = Store.TABLES


def _store(lake: Lake | Store) -> Store:
    return lake if isinstance(lake, Store) else Store(lake)


def _lake(lake: Lake | Store) -> Lake:
    return lake.lake if isinstance(lake, Store) else lake


def _location(lake: Lake, path: str) -> str:
    """A lake path as DuckDB names it: a local path, or ``s3://bucket/key``."""
    return f"{lake.uri.split('://', 1)[0]}://{path}" if is_remote(lake) else path


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def is_remote(lake: Lake | Store) -> bool:
    return "://" in lake.uri


def view_sql(lake: Lake | Store, table: str) -> str:
    store = _store(lake)
    has_files = next(iter(store.table_files(table)), None) is not None
    if has_files:
        source = _location(store.lake, store.table_glob(table))
        return (
            f"SELECT * FROM read_parquet({_sql_string(source)}, union_by_name=true, hive_partitioning=false)"
        )
    return f"SELECT * FROM read_parquet({_sql_string(_location(store.lake, store.schema_file(table)))})"


# ---------------------------------------------------------------- object storage
# DuckDB reads s3:// through its httpfs extension. Extensions are never downloaded at run
# time: where httpfs is installed (``INSTALL httpfs`` once, on a machine with network, or
# baked into the image), views read the bucket directly with a temporary secret built from
# the AWS variables (kept in memory, never in the catalog file); where it is not, an
# in-memory connection reads the same Parquet files through pyarrow's S3 filesystem: each
# public table is a ``pyarrow.dataset`` of the lake's files registered on the connection,
# under a view of the table's own name, so the SQL is the same as on a local root. (No
# httpfs build for DuckDB 2.0.1 is on PyPI: the duckdb_extension_httpfs 1.5.5 wheel's
# extension refuses to load, "built specifically for DuckDB version 'v1.5.5'".)


def s3_secret_sql(environ: dict[str, str] | None = None) -> str:
    """``CREATE TEMPORARY SECRET`` from the AWS variables (endpoint, region, keys)."""
    env = dict(os.environ if environ is None else environ)
    parts = ["TYPE s3"]
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        parts += [f"KEY_ID {_sql_string(key)}", f"SECRET {_sql_string(secret)}"]
        if env.get("AWS_SESSION_TOKEN"):
            parts.append(f"SESSION_TOKEN {_sql_string(env['AWS_SESSION_TOKEN'])}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        parts.append(f"REGION {_sql_string(region)}")
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        parts += [
            f"ENDPOINT {_sql_string(host.rstrip('/'))}",
            "URL_STYLE 'path'",
            f"USE_SSL {'true' if scheme == 'https' else 'false'}",
        ]
    return f"CREATE OR REPLACE TEMPORARY SECRET ingest_s3 ({', '.join(parts)})"


def load_httpfs(con: Any) -> bool:
    """Load DuckDB's httpfs if it is installed; never download it."""
    import duckdb

    con.execute("SET autoinstall_known_extensions = false")
    try:
        con.execute("LOAD httpfs")
    except duckdb.Error:
        return False
    con.execute(s3_secret_sql())
    return True


def _register_datasets(con: Any, lake: Lake | Store, only: tuple[str, ...] | None = None) -> dict[str, str]:
    """Temporary views over pyarrow datasets of the lake's files (any pyarrow filesystem)."""
    import pyarrow.dataset as ds

    store = _store(lake)
    created = {}
    for table in only or VIEWS:
        schema = tables.PUBLIC[table]
        files = list(store.table_files(table))
        data = (
            ds.dataset(files, schema=schema, filesystem=store.lake.fs, format="parquet")
            if files
            else pa.Table.from_pylist([], schema=schema)
        )
        con.register(f"lake_{table}", data)
        sql = f'SELECT * FROM "lake_{table}"'
        con.execute(f'CREATE OR REPLACE TEMP VIEW "{table}" AS {sql}')
        created[table] = sql
    for name, sql in ({} if only else DERIVED).items():
        con.execute(f'CREATE OR REPLACE TEMP VIEW "{name}" AS {sql}')
        created[name] = sql
    return created


# Views over the public ones, for audits. ``chunk_lineage``: every chunk with the source it
# came from now (``current`` is false once the file's bytes changed since the chunk was cut).
# ``chunker_comparison``: two chunker versions on the same page: how many pieces each cut and
# the words one has that the other lacks.
DERIVED = {
    "chunk_lineage": """
        SELECT c.chunk_id, c.label, c.profile, c.document_id, c.path, c.page, c."index", c.bbox,
               c.bbox_reason,
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
                               string_split_regex(lower(coalesce(b.text, '')), '\\s+'), w))
                   AS words_only_in_a,
               list_filter(list_distinct(string_split_regex(lower(coalesce(b.text, '')), '\\s+')),
                           lambda w: w <> '' AND NOT list_contains(
                               string_split_regex(lower(coalesce(a.text, '')), '\\s+'), w)) AS words_only_in_b
        FROM claims_per_page a JOIN claims_per_page b USING (document_id, page)
        WHERE a.chunker <> b.chunker""",
}


def create_views(con: Any, lake: Lake | Store, only: tuple[str, ...] | None = None) -> dict[str, str]:
    """(Re)create every public view on a DuckDB connection (or ``only`` those tables' views,
    without the derived ones); returns the SQL of each."""
    if is_remote(lake) and not load_httpfs(con):
        return _register_datasets(con, lake, only)
    created = {}
    for table in only or VIEWS:
        sql = view_sql(lake, table)
        con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {sql}')
        created[table] = sql
    for name, sql in ({} if only else DERIVED).items():
        con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')
        created[name] = sql
    return created


def build_catalog(lake: Lake | Store, path: str) -> dict[str, int]:
    """Write the views into the catalog file (views only, no data); returns row counts.
    On an object store without httpfs no file can hold the views: the counts come from
    an in-memory connection and the file is left alone."""
    import duckdb

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    con = duckdb.connect(":memory:" if is_remote(lake) and not _httpfs_available() else path)
    try:
        create_views(con, lake)
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in VIEWS}
    finally:
        con.close()


def _httpfs_available() -> bool:
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("LOAD httpfs")
        return True
    except duckdb.Error:
        return False
    finally:
        con.close()


def _httpfs_loaded(con: Any) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM duckdb_extensions() WHERE extension_name = 'httpfs' AND loaded"
        ).fetchall()[0][0]
    )


def connect(lake: Lake | Store, only: tuple[str, ...] | None = None):
    """An in-memory DuckDB connection with the views (or ``only`` those tables' views: each
    view reads the footer of every file of its table when it is created), for queries that
    must not contend for the catalog file's single writer."""
    import duckdb

    con = duckdb.connect(":memory:")
    create_views(con, lake, only)
    return con


def query(lake: Lake | Store, sql: str, params: list[Any] | None = None, con: Any = None) -> pa.Table:
    """Run ``sql`` over the views; values go in as ``?`` parameters, never into the text.
    ``con``: a connection from ``connect(lake)`` to reuse (creating the views reads every
    table's files, so a caller with several queries in a row opens one)."""
    own = con is None
    con = connect(lake) if own else con
    try:
        return con.sql(sql, params=params or None).to_arrow_table()
    finally:
        if own:
            con.close()


sql_string = _sql_string  # the one literal builder, for SQL that cannot take a parameter

# Statements an analyst's SQL may not run: they write files outside the database.
_WRITING_STATEMENTS = ("COPY", "EXPORT", "COPY_DATABASE")


def analyst_connection(lake: Lake | Store, catalog_path: str):
    """A connection for a person's own SQL (``query``): the catalog file opened read-only,
    fresh views over the lake as temporary views, file access limited to reading the lake,
    and the configuration locked so the SQL cannot lift those limits."""
    import duckdb
    import pyarrow.fs as pafs

    if is_remote(lake):
        con = connect(lake)
        if not _httpfs_loaded(con):
            # The views read the bucket through pyarrow datasets registered on the connection
            # (pyarrow does the reading), so DuckDB itself needs no file access at all.
            con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        return con
    if not os.path.exists(catalog_path):
        build_catalog(lake, catalog_path)
    try:
        con = duckdb.connect(catalog_path, read_only=True)
    except duckdb.Error:
        # A run is rewriting the catalog (DuckDB's single writer holds the file): the same
        # views in memory serve the query, under the same limits.
        con = duckdb.connect(":memory:")
    try:
        for table in VIEWS:
            con.execute(f'CREATE OR REPLACE TEMP VIEW "{table}" AS {view_sql(lake, table)}')
        for name, sql in DERIVED.items():
            con.execute(f'CREATE OR REPLACE TEMP VIEW "{name}" AS {sql}')
        if isinstance(_lake(lake).fs, pafs.LocalFileSystem):
            root = os.path.abspath(_lake(lake).root).rstrip("/") + "/"
            con.execute("SET allowed_directories = ?", [[root]])
            con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except Exception:
        con.close()
        raise
    return con


def analyst_query(lake: Lake | Store, catalog_path: str, sql: str) -> pa.Table:
    """Full SQL for a local analyst, over a read-only catalog: reads anything in the lake,
    writes nothing (statements that write files are refused)."""
    con = analyst_connection(lake, catalog_path)
    try:
        statements = con.extract_statements(sql)
        if not statements:
            raise ValueError("no SQL statement given")
        for statement in statements:
            if statement.type.name in _WRITING_STATEMENTS:
                raise PermissionError(f"query is read-only: {statement.type.name} statements are refused")
        result = None
        for statement in statements:
            result = con.sql(statement.query)
        return result.to_arrow_table() if result is not None else pa.table({})
    finally:
        con.close()
