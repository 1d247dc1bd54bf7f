"""The one conversion between asset, stage and table names, checked on the real asset graph."""

from __future__ import annotations

import pytest

from ingest_pipeline.definitions import INGEST_JOB, build_definitions
from ingest_pipeline.resources import parts_for
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.stage_names import StageName


def test_every_asset_of_the_ingest_job_round_trips(tmp_path):
    parts = parts_for(str(tmp_path / "data"))
    job = build_definitions(parts.settings, parts.resources).resolve_job_def(INGEST_JOB)
    assets = sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys)
    kinds = set()
    for asset in assets:
        stage = StageName.of_asset(asset)
        assert stage is not None, asset
        assert stage.asset == asset
        assert StageName.of_stage(stage.stage) == stage
        if stage.table is not None:
            assert stage.table in tables.PUBLIC or stage.table == "indexed", stage
        kinds.add(stage.kind)
    assert {"sources", "pages", "chunks", "chunk_map", "embeddings", "lancedb"} <= kinds


def test_a_chunker_version_names_its_asset_stage_and_claims_partition():
    stage = StageName.of_asset("chunks/my_v2_chunker_v12")
    assert stage == StageName.chunker("my_v2_chunker@12")
    assert stage.stage == "chunks/my_v2_chunker@12"
    assert stage.table == "claims"
    assert stage.partition("doc") == ("my_v2_chunker_v12", "doc")
    assert stage.is_chunker
    assert not StageName("chunk_map", "retrieval").is_chunker


def test_profile_stages_and_their_tables():
    assert StageName.of_asset("chunk_map_retrieval") == StageName("chunk_map", "retrieval")
    assert StageName.of_asset("lancedb_default").table == "indexed"
    assert StageName.of_asset("embeddings_a_b").partition("d") == ("a_b", "d")
    assert StageName.of_asset("retrieval_eval_default").table is None
    assert StageName.of_asset("sources").partition("d") == ("d",)


def test_names_that_are_no_stage():
    assert StageName.of_stage("run") is None  # the sensor gave up on a run
    assert StageName.of_asset("chunks/no_version") is None
    assert StageName.of_asset("catalog") is None
    with pytest.raises(ValueError):
        StageName("chunks", "pdf_v1")
    with pytest.raises(ValueError):
        StageName("sources", "x")
