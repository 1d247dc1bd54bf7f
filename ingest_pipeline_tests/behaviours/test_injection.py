"""No injection: quote, UNION and comment payloads through every command option that reaches
DuckDB SQL or a LanceDB filter find nothing of other documents, and `query` cannot write."""

import json

import pyarrow as pa
import pytest

from ingest_pipeline.commands import cli
from ingest_pipeline.storage.catalog import analyst_query, query
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.vector_index import (
    VectorIndex,
    filter_literal,
    index_schema,
    where_equals,
    where_in,
)

PAYLOADS = (
    "x' OR '1'='1",
    "x' OR 1=1 --",
    "x' UNION SELECT path, path, path, path FROM sources --",
    "x'; SELECT * FROM sources; --",
    "x' /* comment */ OR '1'='1",
    "') OR ('1'='1",
    "x\\' OR 1=1 --",
    'x" OR "1"="1',
)


def run(capsys, data, *args):
    code = cli.main(["--data", str(data), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.samples import write_samples

    data = tmp_path_factory.mktemp("inject") / "data"
    write_samples(str(data / "sources"))
    (data / "sources" / "o'brien notes.txt").write_text("Notes by O'Brien about the irrigation pump.\n")
    p = parts_for(str(data))
    report = ingest(p)
    assert not report.failed, report.failed
    docs = query(p.lake, "select document_id, path from sources order by path").to_pylist()
    chunk = query(p.lake, "select chunk_id from chunks where profile = 'retrieval' limit 1").to_pylist()[0]
    return data, docs, chunk["chunk_id"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_inspect_takes_every_option_as_a_value(ingested, capsys, payload):
    data, docs, chunk_id = ingested
    notes = next(d for d in docs if d["path"] == "maintenance_notes.txt")

    code, out, err = run(capsys, data, "inspect", payload, "--json")
    assert code == 1 and out == "" and "no document" in err

    code, out, _ = run(capsys, data, "inspect", notes["document_id"], "--profile", payload, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["source"]["document_id"] == notes["document_id"]
    assert shown["chunks"] == []  # no profile has that name: nothing, of this document or any other
    assert {e["stage"] for e in shown["errors"]} == set()

    for args in (("--chunk", payload), ("--chunk", chunk_id, "--profile", payload)):
        code, out, err = run(capsys, data, "inspect", *args, "--json")
        assert code == 1 and "no chunk" in err


@pytest.mark.parametrize("payload", PAYLOADS[:3])
def test_search_and_eval_take_the_profile_as_a_value(ingested, capsys, payload):
    data, _, _ = ingested
    for mode in ("text", "hybrid"):
        code, out, err = run(
            capsys,
            data,
            "search",
            "irrigation pump",
            "--profile",
            payload,
            "--mode",
            mode,
            "--explain",
            "--json",
        )
        # An unknown profile is refused by name, as a value: no query ran, nothing is printed.
        assert code == 2 and out == "" and payload in err
    code, out, _ = run(capsys, data, "search", payload, "--mode", "text", "--json")
    assert code == 0 and isinstance(json.loads(out), list)
    code, out, err = run(
        capsys,
        data,
        "eval",
        "--questions",
        "samples",
        "--skip-ingest",
        "--no-baselines",
        "--profile",
        payload,
        "--json",
    )
    assert code != 0 and out == "" and payload in err  # refused by name; nothing measured or leaked


def test_a_path_with_a_quote_names_exactly_its_document(ingested, capsys):
    data, docs, _ = ingested
    obrien = next(d for d in docs if d["path"] == "o'brien notes.txt")
    code, out, _ = run(capsys, data, "inspect", "o'brien notes.txt", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["source"]["document_id"] == obrien["document_id"]
    assert {c["text"].strip() for c in shown["chunks"]} == {"Notes by O'Brien about the irrigation pump."}


def test_query_reads_anything_in_the_lake_and_writes_nothing(ingested, capsys, tmp_path):
    data, docs, _ = ingested
    code, out, _ = run(capsys, data, "query", "select count(*) as n from sources", "--json")
    assert code == 0 and json.loads(out) == [{"n": len(docs)}]
    catalog = (data / "catalog.duckdb").read_bytes()
    target = tmp_path / "stolen.csv"
    refused = (
        f"copy (select * from sources) to '{target}'",
        f"copy (select * from sources) to '{data / 'lake' / 'sources' / 'x.parquet'}'",
        "create table owned as select * from sources",
        "drop view catalog.main.sources",
        "select * from read_text('/etc/passwd')",
        "set enable_external_access = true",
        f"attach '{tmp_path / 'other.duckdb'}' as other",
    )
    for sql in refused:
        code, out, err = run(capsys, data, "query", sql)
        assert code == 1 and err.startswith("error:"), (sql, out)
    assert not target.exists() and not (tmp_path / "other.duckdb").exists()
    assert not (data / "lake" / "sources" / "x.parquet").exists()
    assert (data / "catalog.duckdb").read_bytes() == catalog


def test_parameters_carry_values_into_duckdb(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    lake.write(
        "errors",
        ("a",),
        pa.Table.from_pylist([{"document_id": "a", "stage": "sources", "error": "E", "reason": "r"}]),
    )
    for payload in PAYLOADS:
        assert query(lake, "select * from errors where document_id = ?", [payload]).num_rows == 0
        assert (
            query(
                lake,
                "select * from errors where document_id in (select unnest(?::VARCHAR[]))",
                [[payload, "b"]],
            ).num_rows
            == 0
        )
    assert (
        query(
            lake, "select * from errors where document_id in (select unnest(?::VARCHAR[]))", [["a"]]
        ).num_rows
        == 1
    )
    catalog = str(tmp_path / "catalog.duckdb")
    with pytest.raises(PermissionError):
        analyst_query(lake, catalog, f"copy errors to '{tmp_path / 'e.csv'}'")
    import duckdb

    writer = duckdb.connect(catalog)  # a run rewriting the catalog holds its only writer
    try:
        assert analyst_query(lake, catalog, "select document_id from errors").to_pylist() == [
            {"document_id": "a"}
        ]
        with pytest.raises(duckdb.Error, match="Permission"):
            analyst_query(lake, catalog, "select * from read_text('/etc/passwd')")
    finally:
        writer.close()


def _rows(doc, ids, dim=4):
    return pa.Table.from_pylist(
        [
            {
                "chunk_id": c,
                "document_id": doc,
                "path": doc,
                "profile": "p",
                "page": 1,
                "index": i,
                "text": f"t {c}",
                "modality": "text",
                "vector": [1.0] * dim,
            }
            for i, c in enumerate(ids)
        ],
        schema=index_schema(dim),
    )


def test_lancedb_filters_hold_any_value(tmp_path):
    index = VectorIndex(str(tmp_path / "lancedb"), 4)
    index.sync_document("p", "a", _rows("a", ["a1", "a2"]))
    index.sync_document("p", "o'b", _rows("o'b", ["b1"]))
    for payload in PAYLOADS:
        assert index.count("p", payload) == 0
        assert index.delete_document(payload) == 0
        assert index.search("p", "t", [1.0] * 4, mode="vector", documents=[payload]) == []
        index.sync_document("p", payload, _rows(payload, []))  # deletes only the payload's rows (none)
    assert index.count("p", "a") == 2 and index.count("p", "o'b") == 1
    # A chunk id holding a payload is kept as one value, not read as a filter.
    index.sync_document("p", "a", _rows("a", ["a1", "x') OR ('1'='1"]))
    assert index.count("p", "a") == 2 and index.count("p") == 3
    assert {
        h["document_id"] for h in index.search("p", "t", [1.0] * 4, mode="vector", k=10, documents=["o'b"])
    } == {"o'b"}
    assert where_in("chunk_id", []) == "false"
    assert where_equals("document_id", "o'b") == "document_id = 'o''b'"
    with pytest.raises(TypeError):
        filter_literal(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        where_equals("document_id = 'a' OR 1=1 --", "a")
