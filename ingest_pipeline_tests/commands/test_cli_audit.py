"""Audits through the command line and DuckDB on the sample documents."""

import hashlib

import duckdb
import pytest

from ingest_pipeline_tests.commands.test_cli_corpus import as_json, cli


@pytest.fixture(scope="module")
def samples_data(tmp_path_factory):
    from ingest_pipeline.samples import write_samples

    data = tmp_path_factory.mktemp("audit") / "data"
    write_samples(str(data / "sources"))
    cli(data, "ingest")
    return data


def test_a_search_hit_leads_back_to_its_exact_bytes_and_chunker(samples_data):
    hits = as_json(
        cli(samples_data, "search", "tomato yield per square metre", "-k", "1", "--explain", "--json")
    )
    hit = hits[0]
    assert hit["path"] == "greenhouse_report.pdf"
    chain = hit["lineage"]
    source = samples_data / "sources" / chain["source"]["path"]
    assert (
        hashlib.sha256(source.read_bytes()).hexdigest() == chain["source"]["sha256"] == hit["source_sha256"]
    )
    assert chain["source"]["bytes_match"] is True
    assert chain["chunker"] == hit["chunker"] and chain["config_hash"] == hit["config_hash"]
    assert chain["reader"] == "pdfium_text@1" and chain["page"] == hit["page"] == 2
    assets = {m["asset"] for m in chain["materializations"]}
    assert chain["profile"] == "retrieval"  # the served profile
    assert "chunk_map_retrieval" in assets and f"chunks/{hit['chunker'].replace('@', '_v')}" in assets
    assert all(m["run_id"] == chain["run_id"] for m in chain["materializations"])

    shown = as_json(cli(samples_data, "inspect", "--chunk", hit["chunk_id"], "--json"))
    assert shown[0]["source"]["sha256"] == chain["source"]["sha256"]

    con = duckdb.connect(str(samples_data / "catalog.duckdb"), read_only=True)
    row = con.execute(
        "SELECT source_sha256, chunker, config_hash, current FROM chunk_lineage "
        "WHERE chunk_id = ? AND profile = 'retrieval'",
        [hit["chunk_id"]],
    ).fetchall()
    con.close()
    assert row == [(chain["source"]["sha256"], hit["chunker"], hit["config_hash"], True)]


def test_changed_bytes_show_up_in_the_lineage(samples_data, tmp_path):
    hits = as_json(
        cli(samples_data, "search", "spare key pesticide store", "-k", "1", "--mode", "text", "--json")
    )
    notes = samples_data / "sources" / "maintenance_notes.txt"
    original = notes.read_bytes()
    try:
        notes.write_bytes(original + b"\nA new line.\n")
        chain = as_json(cli(samples_data, "inspect", "--chunk", hits[0]["chunk_id"], "--json"))[0]
        assert chain["source"]["bytes_match"] is False
    finally:
        notes.write_bytes(original)


def test_two_chunker_versions_compare_in_duckdb(samples_data):
    rows = as_json(
        cli(
            samples_data,
            "query",
            "select chunker_a, chunker_b, pieces_a, pieces_b from chunker_comparison "
            "where chunker_a = 'pdf@1' and chunker_b = 'page@1'",
            "--json",
        )
    )
    assert rows and all(r["pieces_a"] >= r["pieces_b"] == 1 for r in rows)


def test_eval_prints_the_profile_beside_both_baselines(samples_data):
    rows = as_json(cli(samples_data, "eval", "--questions", "samples", "--json"))
    names = [r["name"] for r in rows]
    assert names == ["default", "retrieval", "baseline:page", "baseline:recursive_1000"]
    for row in rows:
        assert row["questions"] == 13
        assert 0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1
        assert row["chunks"] > 0
    assert rows[0]["recall@5"] >= 0.8  # thirteen plain questions over four small documents
