import pytest

from ingest_pipeline.chunkers.page import PageChunker
from ingest_pipeline.identity import config_hash
from ingest_pipeline.registry import ChunkerRegistry, RegistryError, parse_ref
from ingest_pipeline_tests.chunker_doubles import (
    THIRD_PARTY_SOURCE,
    FixedChunker,
    SizedChunker,
    install_distribution,
)


class NoId:
    version = 1

    def chunk(self, content, media_type, pages):
        return ()


class NoVersion:
    id = "nover"

    def chunk(self, content, media_type, pages):
        return ()


def test_registry_refuses_missing_id_version_duplicates_and_two_defaults():  # T-B5
    registry = ChunkerRegistry(reserved_ids={"pdfium_text"})
    with pytest.raises(RegistryError, match="no id"):
        registry.register(NoId())
    with pytest.raises(RegistryError, match="version"):
        registry.register(NoVersion())
    registry.register(FixedChunker(cid="pdf", version=1))
    with pytest.raises(RegistryError, match="installed twice"):
        registry.register(FixedChunker(cid="pdf", version=1))
    with pytest.raises(RegistryError, match="both default"):
        registry.register(FixedChunker(cid="pdf", version=2))
    registry.register(FixedChunker(cid="pdf", version=2, opt_in=True))  # an opt-in second version is fine
    with pytest.raises(RegistryError, match="collides with a reader"):
        registry.register(FixedChunker(cid="pdfium_text", version=1))
    with pytest.raises(RegistryError, match=r"\[a-z\]"):
        registry.register(FixedChunker(cid="Bad-Id", version=1))
    assert len(registry) == 2


def test_default_order_is_third_party_then_builtin_then_fallback():  # T-B6
    registry = ChunkerRegistry()
    registry.register(PageChunker())
    registry.register(FixedChunker(cid="pdf", version=1, builtin=True))
    registry.register(FixedChunker(cid="pdf", version=2, builtin=True, opt_in=True))
    registry.register(FixedChunker(cid="zeta", version=1))
    registry.register(FixedChunker(cid="alpha", version=1))
    refs = [f"{c.id}@{c.version}" for c in registry.default_order()]
    assert refs == ["alpha@1", "zeta@1", "pdf@1", "page@1"]
    named = [f"{c.id}@{c.version}" for c in registry.order_for(["pdf@2"])]
    assert named == ["pdf@2", "alpha@1", "zeta@1", "pdf@1", "page@1"]
    with pytest.raises(RegistryError):
        registry.order_for(["pdf@9"])
    with pytest.raises(RegistryError):
        parse_ref("pdf-2")


def test_installing_a_chunker_changes_the_advertised_list_only():  # T-B7
    registry = ChunkerRegistry()
    registry.register(PageChunker())
    before = {i.ref: i.config_hash for i in registry.infos()}
    registry.register(FixedChunker(cid="extra", version=1))
    after = {i.ref: i.config_hash for i in registry.infos()}
    assert set(after) - set(before) == {"extra@1"}
    assert after["page@1"] == before["page@1"]


def test_configuration_changes_the_config_hash():
    registry = ChunkerRegistry()
    registry.register(SizedChunker())
    base = registry.info(registry.get("sized@1")).config_hash
    configured = registry.configured({"sized@1": {"size": 50}})
    assert configured.info(configured.get("sized@1")).config_hash != base
    same = registry.configured({"sized@1": {"size": 100}})
    assert same.info(same.get("sized@1")).config_hash == base
    assert base == config_hash("sized@1", {"size": 100, "label": "x"})
    with pytest.raises(RegistryError, match="not installed"):
        registry.configured({"nope@1": {}})
    with pytest.raises(Exception):
        registry.configured({"sized@1": {"unknown_key": 1}})


def test_builtin_chunkers_come_from_the_entry_point_group():
    registry = ChunkerRegistry.discover()
    info = {i.ref: i for i in registry.infos()}
    assert "page@1" in info
    assert info["page@1"].fallback and info["page@1"].builtin
    assert info["page@1"].source.startswith("entry point")
    assert registry.default_order()[-1].id == "page"


def test_a_third_party_distribution_adds_a_chunker_by_installing_itself(tmp_path, monkeypatch):
    site = install_distribution(tmp_path / "site", "acme_shout", THIRD_PARTY_SOURCE,
                                {"shout": "acme_shout:ShoutChunker"})
    monkeypatch.syspath_prepend(str(site))
    registry = ChunkerRegistry.discover()
    assert "shout@1" in registry
    assert registry.default_order()[0].id == "shout"  # third-party first
    assert registry.info(registry.get("shout@1")).builtin is False
