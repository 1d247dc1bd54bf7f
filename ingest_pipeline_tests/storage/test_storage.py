import os

import pyarrow as pa
import pytest

from ingest_pipeline.storage.catalog import VIEWS, build_catalog, query
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.vector_index import VectorIndex, index_schema, search_text


def test_lake_writes_atomically_and_replaces_exactly_one_file(tmp_path, monkeypatch):
    lake = Lake(str(tmp_path / "lake"))
    lake.write("pages", ("doc1",), pa.table({"a": [1]}), meta={"fingerprint": "f1"})
    lake.write("pages", ("doc2",), pa.table({"a": [2]}))
    assert lake.meta("pages", "doc1") == {"fingerprint": "f1"}

    import pyarrow.parquet as pq

    def explode(*args, **kwargs):
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(pq, "write_table", explode)
    with pytest.raises(RuntimeError):
        lake.write("pages", ("doc1",), pa.table({"a": [99]}))
    monkeypatch.undo()
    assert lake.read("pages", "doc1").column("a").to_pylist() == [1]  # the old file survived whole
    lake.write("pages", ("doc1",), pa.table({"a": [3]}))
    assert lake.read("pages", "doc1").column("a").to_pylist() == [3]
    assert lake.read("pages", "doc2").column("a").to_pylist() == [2]
    assert lake.delete_document("doc1") == 1 and lake.read("pages", "doc1") is None


def test_metadata_is_read_from_the_footer_each_time_and_parsed_only_for_footers_not_seen(
    tmp_path, monkeypatch
):
    """``Lake.meta`` keeps what it parsed keyed by the footer's bytes: a file rewritten behind
    its back (another process, the same size, the same second) reads as its new content."""
    import subprocess
    import sys
    import textwrap

    import pyarrow.parquet as pq

    root = tmp_path / "lake"
    lake = Lake(str(root))
    lake.write("claims", ("v1", "doc"), pa.table({"a": [1]}), meta={"fingerprint": "aaaa", "n": 1})
    parsed = []
    real = pq.read_schema
    monkeypatch.setattr(pq, "read_schema", lambda source, **kw: (parsed.append(1), real(source, **kw))[1])
    assert lake.meta("claims", "v1", "doc") == {"fingerprint": "aaaa", "n": 1}
    assert parsed == []  # known from the write: not parsed again
    first = lake.meta("claims", "v1", "doc")
    first["n"] = 99  # a caller's change to what it got is its own
    assert lake.meta("claims", "v1", "doc") == {"fingerprint": "aaaa", "n": 1}

    script = textwrap.dedent(f"""
        import pyarrow as pa
        from ingest_pipeline.storage.lake import Lake
        meta = {{"fingerprint": "bbbb", "n": 2}}
        Lake({str(root)!r}).write("claims", ("v1", "doc"), pa.table({{"a": [1]}}), meta=meta)
    """)
    before = os.path.getsize(lake.path("claims", "v1", "doc"))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert os.path.getsize(lake.path("claims", "v1", "doc")) == before  # the same size, other bytes
    assert lake.meta("claims", "v1", "doc") == {"fingerprint": "bbbb", "n": 2}
    assert len(parsed) == 1  # a footer this process had not seen: parsed once
    assert lake.meta("claims", "v1", "doc") == {"fingerprint": "bbbb", "n": 2} and len(parsed) == 1
    assert lake.meta("claims", "v1", "missing") is None and lake.meta("claims") is None
    (root / "claims" / "v1" / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(pa.ArrowInvalid):
        lake.meta("claims", "v1", "junk")


def test_catalog_has_every_view_even_before_data(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    path = str(tmp_path / "catalog.duckdb")
    counts = build_catalog(lake, path)
    assert set(counts) == set(VIEWS) and all(n == 0 for n in counts.values())
    import duckdb

    con = duckdb.connect(path, read_only=True)
    columns = [r[0] for r in con.execute("DESCRIBE chunks").fetchall()]
    con.close()
    for name in (
        "chunk_id",
        "label",
        "profile",
        "bbox",
        "bbox_reason",
        "chunker",
        "config_hash",
        "reader",
        "source_sha256",
        "run_id",
        "tokens",
        "header_path",
    ):
        assert name in columns
    assert os.path.getsize(path) < 2_000_000  # views only


def _rows(doc, ids, dim=4):
    return pa.Table.from_pylist(
        [
            {
                "chunk_id": cid,
                "document_id": doc,
                "path": f"{doc}.txt",
                "profile": "default",
                "page": 1,
                "index": i,
                "label": f"page:1/chunk:{i}",
                "text": f"text about {cid}",
                "bbox": None,
                "bbox_reason": "no_geometry",
                "role": None,
                "content_type": None,
                "header_path": [],
                "chunker": "page@1",
                "config_hash": "h",
                "reader": "text@1",
                "source_sha256": "s",
                "run_id": "r",
                "modality": "text",
                "vector": [float(i + 1), 0.0, 0.0, 1.0],
            }
            for i, cid in enumerate(ids)
        ],
        schema=index_schema(dim),
    )


def test_lancedb_upserts_by_id_and_drops_stale_rows(tmp_path):
    index = VectorIndex(str(tmp_path / "lancedb"), dim=4)
    index.sync_document("default", "d1", _rows("d1", ["a", "b", "c"]))
    index.sync_document("default", "d2", _rows("d2", ["x"]))
    index.sync_document("default", "d1", _rows("d1", ["a", "b", "c"]))
    assert index.count("default") == 4  # re-indexing leaves the count unchanged (T-E5)
    index.sync_document("default", "d1", _rows("d1", ["a", "z"]))
    table = index.open("default")
    ids = sorted(table.to_arrow().column("chunk_id").to_pylist())
    assert ids == ["a", "x", "z"]
    assert index.delete_document("d1") == 2 and index.count("default") == 1


def test_lancedb_search_modes(tmp_path):
    index = VectorIndex(str(tmp_path / "lancedb"), dim=4)
    index.sync_document("default", "d1", _rows("d1", ["apple", "banana", "cherry"]))
    index.refresh_text_index("default")
    text_hits = index.search("default", "banana", None, k=2, mode="text")
    assert text_hits[0]["chunk_id"] == "banana"
    vector_hits = index.search("default", "", [3.0, 0.0, 0.0, 1.0], k=1, mode="vector")
    assert vector_hits[0]["chunk_id"] == "cherry"
    hybrid = index.search("default", "apple", [1.0, 0.0, 0.0, 1.0], k=3, mode="hybrid")
    assert hybrid[0]["chunk_id"] == "apple" and "score" in hybrid[0]
    assert index.search("other", "apple", None, mode="text") == []


def test_keyword_search_finds_the_numbers_an_embedding_text_leaves_out(tmp_path):
    """pdf@4's embedding text drops standalone numbers; the keyword column puts the words
    of the text it lacks after it, so an amount is still found by keyword, and a row whose
    embedding text holds its whole text is indexed as before."""
    row = {
        "text": "Total debt $ 1,330 and $ 745 in 2019",
        "embed_text": "ACME 2019 10K\nDebt\nTotal debt and in 2019",
    }
    assert search_text(row) == "ACME 2019 10K\nDebt\nTotal debt and in 2019\n$ $ 1,330 745"
    assert search_text({"text": "plain", "embed_text": "Title\nplain"}) == "Title\nplain"
    assert search_text({"text": "plain", "embed_text": None}) == "plain"

    index = VectorIndex(str(tmp_path / "lancedb"), dim=4)
    rows = _rows("d1", ["debt", "sales"]).to_pylist()
    rows[0]["text"], rows[0]["search_text"] = row["text"], search_text(row)
    rows[1]["search_text"] = search_text({"text": "sales of 2,698 units", "embed_text": "sales of units"})
    index.sync_document("default", "d1", pa.Table.from_pylist(rows, schema=index_schema(4)))
    index.refresh_text_index("default")
    assert [h["chunk_id"] for h in index.search("default", "1,330", None, k=5, mode="text")] == ["debt"]
    assert [h["chunk_id"] for h in index.search("default", "2,698", None, k=5, mode="text")] == ["sales"]
    assert index.search("default", "1,330", None, k=5, mode="text")[0]["text"] == row["text"]


def test_keyword_search_reads_the_embedding_text_and_an_old_table_keeps_finding_its_rows(tmp_path):
    """The full-text side matches words of what the model embedded (a title, a heading) that
    the chunk's own text lacks; hits carry the text, not the keyword column; a table an older
    version wrote, without that column, is upgraded on the next write with its rows' text."""
    import lancedb

    index = VectorIndex(str(tmp_path / "lancedb"), dim=4)
    rows = _rows("d1", ["sales", "margin"]).to_pylist()
    rows[0]["search_text"] = "2022 Q3 ACME (Acme Widgets Corp.)\nNet sales > By segment\ntext about sales"
    rows[1]["search_text"] = None  # a row without one is found by its text
    index.sync_document("default", "d1", pa.Table.from_pylist(rows, schema=index_schema(4)))
    index.refresh_text_index("default")
    hits = index.search("default", "Acme Widgets", None, k=5, mode="text")
    assert [h["chunk_id"] for h in hits] == ["sales"] and hits[0]["text"] == "text about sales"
    assert "search_text" not in hits[0]
    assert [h["chunk_id"] for h in index.search("default", "margin", None, k=5, mode="text")] == ["margin"]
    hybrid = index.search("default", "Acme Widgets segment", [2.0, 0.0, 0.0, 1.0], k=2, mode="hybrid")
    assert hybrid[0]["chunk_id"] == "sales"

    old = tmp_path / "old"  # the schema before the keyword column
    fields = [f for f in index_schema(4) if f.name != "search_text"]
    from lancedb.index import FTS

    lancedb.connect(str(old)).create_table(
        "chunks_default", data=_rows("d1", ["kept"]).select([f.name for f in fields]).cast(pa.schema(fields))
    ).create_index("text", config=FTS())
    upgraded = VectorIndex(str(old), dim=4)
    assert [h["chunk_id"] for h in upgraded.search("default", "kept", None, k=5, mode="text")] == ["kept"]
    upgraded.sync_document("default", "d2", _rows("d2", ["new"]))
    upgraded.refresh_text_index("default")
    assert [h["chunk_id"] for h in upgraded.search("default", "kept", None, k=5, mode="text")] == ["kept"]
    assert [h["chunk_id"] for h in upgraded.search("default", "new", None, k=5, mode="text")] == ["new"]


def test_query_runs_sql_over_the_views(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    table = query(lake, "select count(*) as n from errors")
    assert table.to_pylist() == [{"n": 0}]


def test_on_an_object_store_a_lake_file_is_one_object_written_whole_in_few_requests(tmp_path, monkeypatch):
    """On S3 (a real S3 server on loopback) a write is one upload to the file's own key: no
    folder markers, no temporary key, no copy; a failed write leaves the old object; a read
    is one GET of the object, and asking for a file that is not there costs no error."""
    import re
    import time

    import boto3
    import pyarrow.parquet as pq

    from ingest_pipeline_tests.servers import start_s3

    s3 = start_s3(tmp_path)
    try:
        env = {
            "AWS_ACCESS_KEY_ID": "lake-test",
            "AWS_SECRET_ACCESS_KEY": "lake-test-secret",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": s3.endpoint,
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        client = boto3.client("s3", endpoint_url=s3.endpoint)
        client.create_bucket(Bucket="lakes")
        lake = Lake("s3://lakes/root")

        def requests() -> list[str]:
            time.sleep(0.3)  # the server logs a request after answering it
            plain = re.sub(
                r"\x1b\[[0-9;]*m", "", s3.log.read_text(errors="replace")
            )  # the server colours some
            return re.findall(r'"(GET|HEAD|PUT|POST|DELETE) ', plain)

        before = len(requests())
        lake.write("claims", ("pdf_v1", "doc1"), pa.table({"a": [1, 2]}), meta={"fingerprint": "f1"})
        written = requests()[before:]
        assert "DELETE" not in written and len(written) <= 4, written  # the upload, and the key's check
        keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="lakes").get("Contents", []))
        assert keys == ["root/claims/pdf_v1/doc1.parquet"]  # no marker, no temporary key

        before = len(requests())
        assert lake.read("claims", "pdf_v1", "doc1").column("a").to_pylist() == [1, 2]
        read = requests()[before:]
        assert read.count("GET") == 1 and len(read) <= 2, read
        assert lake.meta("claims", "pdf_v1", "doc1") == {"fingerprint": "f1"}
        assert lake.meta("claims", "pdf_v1", "doc2") is None and lake.read("claims", "pdf_v1", "doc2") is None

        def explode(*args, **kwargs):
            raise RuntimeError("killed mid-write")

        monkeypatch.setattr(pq, "write_table", explode)
        with pytest.raises(RuntimeError):
            lake.write("claims", ("pdf_v1", "doc1"), pa.table({"a": [9]}))
        monkeypatch.undo()
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert lake.read("claims", "pdf_v1", "doc1").column("a").to_pylist() == [
            1,
            2,
        ]  # the old object, whole
        assert [o["Key"] for o in client.list_objects_v2(Bucket="lakes")["Contents"]] == [
            "root/claims/pdf_v1/doc1.parquet"
        ]
        assert lake.delete_document("doc1") == 1 and lake.read("claims", "pdf_v1", "doc1") is None
    finally:
        s3.stop()
