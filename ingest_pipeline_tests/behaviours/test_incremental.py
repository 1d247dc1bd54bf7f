"""A changed chunker configuration re-does only what depends on what that chunker says."""

import os
import time

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline


def _rewritten(lake_root, since: float) -> dict[str, set[str]]:
    """Lake table (with its sub-folder) -> documents whose file was written after ``since``."""
    out: dict[str, set[str]] = {}
    for folder, _, names in os.walk(lake_root):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".parquet") and os.path.getmtime(path) > since:
                table = os.path.relpath(folder, lake_root)
                out.setdefault(table, set()).add(name[: -len(".parquet")])
    return out


def test_a_markdown_config_change_leaves_the_other_documents_chunk_maps_alone(data_dir):
    sources = data_dir / "sources"
    sections = "\n\n".join(f"## Part {i}\n\n" + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(4))
    write(sources / "guide.md", f"# Guide\n\n{sections}\n")
    write(sources / "notes.txt", "The pump was serviced in March.\n\nFilters were changed as well.\n")
    p = fresh_pipeline(data_dir)
    ingest(p, [str(sources)])
    before = {
        (r["profile"], r["chunk_id"]): r["t"]
        for r in query(
            p.lake, "select profile, chunk_id, coalesce(embed_text, text) as t from chunks"
        ).to_pylist()
    }
    md_doc = query(p.lake, "select document_id from sources where path like '%guide.md'").to_pylist()[0][
        "document_id"
    ]
    txt_doc = query(p.lake, "select document_id from sources where path like '%notes.txt'").to_pylist()[0][
        "document_id"
    ]

    cached_before = _cached(p)
    (data_dir / "ingest_pipeline.toml").write_text(
        '[chunkers."markdown@1"]\ntarget_chars = 300\nmax_chars = 500\n'
    )
    time.sleep(0.05)
    since = time.time()
    p = fresh_pipeline(data_dir)
    report = ingest(p, [str(sources)])

    rewritten = _rewritten(p.settings.lake_root, since)
    after = {
        (r["profile"], r["chunk_id"]): r["t"]
        for r in query(
            p.lake, "select profile, chunk_id, coalesce(embed_text, text) as t from chunks"
        ).to_pylist()
    }
    assert set(after) != set(before)  # the Markdown document was cut anew
    # markdown@1 is asked again about both documents; nothing else is.
    assert rewritten["claims/markdown_v1"] == {md_doc, txt_doc}
    assert not any(t.startswith("claims/") and t != "claims/markdown_v1" for t in rewritten)
    assert "pages" not in rewritten and "sources" not in rewritten
    # Downstream, only the document whose chunks changed is merged, embedded and indexed again.
    # Only the served profile is indexed (embedded and in LanceDB); every profile has a chunk map.
    for table in ("chunks/default", "chunks/retrieval", "embeddings/retrieval", "indexed/retrieval"):
        assert rewritten.get(table) == {md_doc}, table
    assert "embeddings/default" not in rewritten and "indexed/default" not in rewritten
    # Only served texts no chunk had before are embedded: the cache grows by exactly those.
    served = lambda texts: {t for (profile, _), t in texts.items() if profile == "retrieval"}  # noqa: E731
    new_texts = served(after) - served(before)
    assert new_texts and _cached(p) - cached_before == len(new_texts)
    assert report.texts_embedded > 0


def _cached(p) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path in p.lake.files("embedding_cache"))


def test_installing_an_unused_opt_in_chunker_leaves_every_document_current(data_dir):  # B34
    from ingest_pipeline.storage.freshness import run_identity
    from ingest_pipeline_tests.chunker_doubles import FixedChunker

    pipeline = fresh_pipeline(data_dir)
    before = run_identity(pipeline)
    pipeline.registry.register(FixedChunker({1: ["x"]}, cid="unused", opt_in=True))
    assert run_identity(pipeline) == before
    pipeline.registry.register(FixedChunker({1: ["x"]}, cid="defaulted"))  # a default version is used
    assert run_identity(pipeline) != before
