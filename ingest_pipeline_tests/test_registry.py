import pytest

from ingest_pipeline.chunkers.page import PageChunker
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.identity import config_hash
from ingest_pipeline.registry import ChunkerRegistry, RegistryError, parse_ref, reconfigured
from ingest_pipeline.stages.merge import Claim, merge_claims
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


def _chunk_ids(registry: ChunkerRegistry, pages) -> list[tuple[str, str, str]]:
    """(label, chunk id, chunker) of the chunk map the registry's default order gives."""
    claims = [
        Claim(f"{c.id}@{c.version}", registry.info(c).config_hash, c.chunk(b"", "text/plain", pages))
        for c in registry.default_order()
    ]
    return [(m.label, m.chunk_id, m.chunker) for m in merge_claims("doc-1", pages, claims).chunks]


def test_installing_a_chunker_changes_the_advertised_list_only():  # T-B7
    from ingest_pipeline.assets.chunks import build_chunk_assets

    pages = (
        PageOutput(page=1, status="read", reader="t", text="alpha " * 30),
        PageOutput(page=2, status="read", reader="t", text="beta " * 30),
    )
    before = ChunkerRegistry()
    before.register(PageChunker())
    before.register(SizedChunker(), source="entry point sized")
    after = ChunkerRegistry()
    after.register(PageChunker())
    after.register(SizedChunker(), source="entry point sized")
    # a third-party chunker: first in the default order, but it claims nothing of this document
    after.register(FixedChunker(cid="extra", version=1), source="entry point extra")

    assert [i.ref for i in after.infos()] == ["extra@1", "sized@1", "page@1"]
    assert {i.ref for i in after.infos()} - {i.ref for i in before.infos()} == {"extra@1"}
    # the plan: the assets the old versions had keep their keys and code versions
    plan = {a.key: a.code_versions_by_key[a.key] for a in build_chunk_assets(before)}
    plan_after = {a.key: a.code_versions_by_key[a.key] for a in build_chunk_assets(after)}
    assert len(plan_after) == len(plan) + 1
    assert {k: v for k, v in plan_after.items() if k in plan} == plan
    # the content: the document's chunk map (labels, ids, owners) is the same
    ids = _chunk_ids(before, pages)
    assert ids and {owner for *_, owner in ids} == {"sized@1"}
    assert _chunk_ids(after, pages) == ids
    # ...and an installed chunker that does claim the page takes it, so the check can see a change
    claimer = ChunkerRegistry()
    for c in (PageChunker(), SizedChunker(), FixedChunker({1: ["mine"]}, cid="extra", version=1)):
        claimer.register(c)
    assert _chunk_ids(claimer, pages)[0][2] == "extra@1"


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
    site = install_distribution(
        tmp_path / "site", "acme_shout", THIRD_PARTY_SOURCE, {"shout": "acme_shout:ShoutChunker"}
    )
    monkeypatch.syspath_prepend(str(site))
    registry = ChunkerRegistry.discover()
    assert "shout@1" in registry
    assert registry.default_order()[0].id == "shout"  # third-party first
    assert registry.info(registry.get("shout@1")).builtin is False


PROVIDER_SOURCE = (
    THIRD_PARTY_SOURCE
    + """

class WhisperChunker(ShoutChunker):
    id = "whisper"

    def chunk(self, content, media_type, pages):
        return ()


class Pack:
    \"\"\"A provider: one entry point that hands over several chunkers (SPEC B02).\"\"\"

    def chunkers(self):
        return (ShoutChunker, WhisperChunker())


PACK = Pack()
"""
)


def test_one_entry_point_may_be_a_provider_of_several_chunkers(tmp_path, monkeypatch):
    site = install_distribution(tmp_path / "site", "acme_pack", PROVIDER_SOURCE, {"pack": "acme_pack:PACK"})
    monkeypatch.syspath_prepend(str(site))
    registry = ChunkerRegistry.discover()
    assert {"shout@1", "whisper@1"} <= {registry.info(c).ref for c in registry.default_order()}


def test_a_broken_entry_point_is_refused_naming_it_and_its_package(tmp_path, monkeypatch):
    site = install_distribution(
        tmp_path / "site", "acme_typo", THIRD_PARTY_SOURCE, {"typo": "acme_typo:ShoutChunkr"}
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(RegistryError) as refused:
        ChunkerRegistry.discover()
    message = str(refused.value)
    assert "typo = acme_typo:ShoutChunkr" in message and "acme_typo" in message
    assert "AttributeError" in message


class HidesItsSettings:
    """Takes a setting but states no ``config``: its hash would not see the setting."""

    id = "hider"
    version = 1

    def __init__(self, settings=None) -> None:
        self._width = (settings or {}).get("width", 80)

    def chunk(self, content, media_type, pages):
        return ()


def test_settings_a_chunker_does_not_state_in_its_config_are_refused():
    """SPEC E05: the config hash cannot silently collapse to a constant. A setting given to
    a chunker that keeps it out of its ``config`` is refused, naming it; a built-in whose
    config holds the setting takes it and its hash changes."""
    registry = ChunkerRegistry()
    registry.register(HidesItsSettings())
    with pytest.raises(
        RegistryError, match=r"hider@1 takes settings it does not state in its config \(width\)"
    ):
        registry.configured({"hider@1": {"width": 40}})
    builtin = ChunkerRegistry.discover()
    wider = builtin.configured({"markdown@1": {"max_chars": 1500}})
    assert (
        wider.info(wider.get("markdown@1")).config_hash != builtin.info(builtin.get("markdown@1")).config_hash
    )


def test_a_profile_on_another_embedder_cuts_with_the_version_sized_for_it():
    """pdf@4 for a 512-token embedder is a variant named by its sizing, in that profile's
    order only; the bundled sizing keeps pdf@4 and its config hash; one sizing, one variant."""
    from ingest_pipeline.chunkers.pdf.passages import PdfPassagesChunker
    from ingest_pipeline.embedding.sizing import TokenSizing, minilm_sizing

    registry = ChunkerRegistry()
    registry.register(PdfPassagesChunker())
    registry.register(PageChunker())
    wide = TokenSizing(512, minilm_sizing().tokenizer, minilm_sizing().tokenizer_sha256)
    budget = TokenSizing(512, chars_per_token=3)
    base_hash = registry.info(registry.get("pdf@4")).config_hash
    sized = registry.sized(
        {"a": {"pdf@4": wide}, "b": {"pdf@4": None}, "c": {"pdf@4": wide}, "d": {"pdf@4": budget}}
    )

    orders = {p: [sized.info(c).ref for c in sized.order_for(["pdf@4"], p)] for p in "abcd"}
    assert orders["b"] == ["pdf@4", "page@1"] and orders["a"] == orders["c"]
    variant, other = orders["a"][0], orders["d"][0]
    assert variant == f"{wide.variant_id('pdf')}@4" and variant.startswith("pdf_512_")
    assert other.startswith("pdf_512_") and other != variant  # same limit, counted otherwise
    assert [sized.info(c).ref for c in sized.order_for(["pdf@4"])] == ["pdf@4", "page@1"]
    assert sized.info(sized.get("pdf@4")).config_hash == base_hash
    hashes = {sized.info(sized.get(r)).config_hash for r in (variant, other)}
    assert len(hashes) == 2 and base_hash not in hashes
    assert sized.get(variant).packing().max_tokens == 480 and sized.get("pdf@4").packing().max_tokens == 224
    assert sorted(i.ref for i in sized.infos()) == sorted(["page@1", "pdf@4", variant, other])
    assert parse_ref(variant) == (variant.split("@")[0], 4)
    edited = reconfigured(sized.get(variant), {"target_tokens": 200})  # a run's own config
    assert sized.info(edited).ref == variant and edited.packing().max_tokens == 480
    assert sized.info(edited).config_hash not in hashes
    with pytest.raises(ValueError, match="limit"):  # a stated maximum over a model's limit
        registry.configured({"pdf@4": {"max_tokens": 400}}).sized({"b": {"pdf@4": None}})
