"""The embedder port's built-ins and registry: the ONNX-folder embedder on the bundled model's
own files, and the OpenAI-compatible embedder against a real server on loopback that
answers 429s, 500s, slow answers and dropped connections."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from ingest_pipeline.embedding.minilm import MiniLMEmbedder
from ingest_pipeline.embedding.openai_http import EndpointUnavailable
from ingest_pipeline.embedding.registry import EmbedderRegistry, Runtime, installed
from ingest_pipeline.identity import sha256_file
from ingest_pipeline.settings import DEFAULT_EMBEDDER
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.embedding_server import EmbeddingServer

TEXTS = [
    "Net revenue rose in the fourth quarter.",
    "The greenhouse valve opens at dawn.",
    "Capital expenditure for FY2018 was 1,577 million dollars " * 8,
]
RUNTIME = Runtime(batch_size=2, threads=1, workers=1)


def test_the_built_ins_are_found_through_the_entry_point_group():
    refs = installed().refs()
    assert {"minilm@1", "minilm-int8@1", "onnx@1", "openai@1"} <= set(refs)
    assert all(row["source"].startswith("entry point") for row in installed().describe())


def test_the_bundled_model_keeps_its_model_id_and_records_its_weights():
    model = installed().make("minilm@1", {}, RUNTIME)
    assert model.model_id == "all-minilm-l6-v2-onnx-int8"  # the key every stored vector carries
    identity = model.identity()
    assert identity["ref"] == "minilm@1" and len(identity["weights_sha256"]) == 64
    with pytest.raises(ValueError, match="has no setting"):
        installed().make("minilm@1", {"pooling": "cls"}, RUNTIME)


def test_an_onnx_folder_of_the_bundled_files_gives_the_bundled_vectors(tmp_path, embedder):
    folder = tmp_path / "my-minilm"
    folder.mkdir()
    shutil.copy(MiniLMEmbedder.model_path(), folder / "model.onnx")
    shutil.copy(MiniLMEmbedder.tokenizer_path(), folder / "tokenizer.json")
    model = installed().make("onnx@1", {"path": str(folder), "max_tokens": 256}, RUNTIME)
    assert (model.dim, model.max_tokens) == (384, 256)
    assert np.allclose(model.embed(TEXTS), embedder.embed(TEXTS), atol=1e-5)
    assert model.count_tokens(TEXTS) == embedder.count_tokens(TEXTS)
    # the identity is the files' bytes and the settings, never the folder's path
    moved = tmp_path / "elsewhere"
    shutil.copytree(folder, moved)
    again = installed().make("onnx@1", {"path": str(moved), "max_tokens": 256}, RUNTIME)
    assert again.model_id == model.model_id != embedder.model_id
    prefixed = installed().make(
        "onnx@1", {"path": str(folder), "max_tokens": 256, "query_prefix": "query: "}, RUNTIME
    )
    assert prefixed.model_id != model.model_id
    assert np.allclose(
        prefixed.embed_queries(["net revenue"]), embedder.embed(["query: net revenue"]), atol=1e-5
    )


def test_an_onnx_folder_without_a_graph_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.onnx"):
        installed().make("onnx@1", {"path": str(tmp_path)}, RUNTIME)


def test_the_http_embedder_retries_429s_500s_slow_answers_and_dropped_connections(embedder, monkeypatch):
    server = EmbeddingServer(faults=["429", "500", "slow", "drop", "429"], slow_seconds=2.0, token="s3cret")
    monkeypatch.setenv("TEST_EMBED_KEY", "s3cret")
    try:
        settings = {
            "base_url": server.base_url,
            "model": "minilm-served",
            "api_key_env": "TEST_EMBED_KEY",
            "batch_size": 2,
            "concurrency": 1,
            "timeout": 1.0,
            "retries": 6,
            "backoff": 0.01,
            "tokenizer": MiniLMEmbedder.tokenizer_path(),
            "max_tokens": 256,
        }
        model = installed().make("openai@1", settings, RUNTIME)
        vectors = model.embed(TEXTS)
        assert np.allclose(vectors, embedder.embed(TEXTS), atol=1e-5)  # answers put back in order
        faults = [r["fault"] for r in server.requests]
        assert faults[:5] == ["429", "500", "slow", "drop", "429"] and faults.count("ok") == 2
        assert model.dim == 384
        # the key went to the server, and is nowhere in what the project keeps of the embedder
        assert {r["auth"] for r in server.requests} == {"Bearer s3cret"}
        assert "s3cret" not in repr(model.identity()) + model.model_id
        assert "TEST_EMBED_KEY" not in model.model_id
    finally:
        server.stop()


def test_the_http_embedder_gives_up_on_a_dead_endpoint_with_a_clear_error():
    server = EmbeddingServer()
    url = server.base_url
    server.stop()  # nobody listens there now
    model = installed().make(
        "openai@1", {"base_url": url, "model": "gone", "retries": 2, "backoff": 0.01, "dim": 384}, RUNTIME
    )
    with pytest.raises(EndpointUnavailable, match="did not answer after 3 tries"):
        model.embed(["anything"])


def test_the_http_embedder_without_a_tokenizer_sizes_by_a_character_budget():
    model = installed().make(
        "openai@1", {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_tokens": 100}, RUNTIME
    )
    text = "x" * 1000
    assert model.count_tokens([text]) == [334]  # three characters a token, rounded up
    spans = model.token_offsets(text)
    assert spans[0] == (0, 3) and spans[-1][1] == 1000
    assert len(model._fit(text)) == 300


def test_each_built_in_states_how_it_counts_tokens_as_the_model_it_makes_counts_them(tmp_path):
    """What a chunker sizes passages with, read from the settings without loading a model,
    agrees with the made embedder's own counter and limit."""
    from ingest_pipeline.embedding.sizing import minilm_sizing, sizing_of

    folder = tmp_path / "my-minilm"
    folder.mkdir()
    shutil.copy(MiniLMEmbedder.model_path(), folder / "model.onnx")
    shutil.copy(MiniLMEmbedder.tokenizer_path(), folder / "tokenizer.json")
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_tokens": 100}
    cases = [
        ("minilm@1", {}),
        ("onnx@1", {"path": str(folder), "max_tokens": 512}),
        ("openai@1", endpoint),
        ("openai@1", {**endpoint, "tokenizer": MiniLMEmbedder.tokenizer_path(), "chars_per_token": 4}),
    ]
    for ref, settings in cases:
        sizing = sizing_of(ref, settings)
        model = installed().make(ref, settings, RUNTIME)
        assert sizing.limit == model.max_tokens
        assert [n + sizing.specials for n in sizing.count(TEXTS)] == model.count_tokens(TEXTS)
        assert sizing.offsets(TEXTS[0]) == model.token_offsets(TEXTS[0])
    assert sizing_of("minilm@1", {}) == minilm_sizing()
    assert sizing_of("onnx@1", cases[1][1]).stated() == {**minilm_sizing().stated(), "limit": 512}
    assert sizing_of("openai@1", endpoint).stated() == {"limit": 100, "chars_per_token": 3}
    with pytest.raises(ValueError, match="has no setting"):
        sizing_of("openai@1", {**endpoint, "tokenizr": "x"})


THIRD_PARTY_EMBEDDER = '''
import numpy as np


class Hashing:
    """A third-party embedder: words hashed into a small space (no model, no network)."""

    ref = "hashing@1"
    summary = "words hashed into 64 buckets"
    modalities = ("text",)
    max_tokens = 128

    def __init__(self, settings, runtime):
        self.dim = int(settings.get("dim", 64))
        self.model_id = f"hashing_v1_{self.dim}"

    def identity(self):
        return {"ref": self.ref, "dim": self.dim}

    def _vectors(self, texts):
        import zlib

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)

    def embed(self, texts):
        return self._vectors(texts)

    def embed_queries(self, texts):
        return self._vectors(texts)

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]

    def token_offsets(self, text):
        import re

        return [m.span() for m in re.finditer(r"\\S+", text)]
'''


def install_hashing_embedder(tmp_path, monkeypatch) -> None:
    site = install_distribution(
        tmp_path / "site",
        "acme_hashing",
        THIRD_PARTY_EMBEDDER,
        {"hashing": "acme_hashing:Hashing"},
        group="ingest_pipeline.embedders",
    )
    monkeypatch.syspath_prepend(str(site))


def test_a_third_party_embedder_is_found_through_its_entry_point(tmp_path, monkeypatch):
    install_hashing_embedder(tmp_path, monkeypatch)
    registry = installed()
    assert "hashing@1" in registry.refs()
    assert "acme_hashing:Hashing" in {r["ref"]: r["source"] for r in registry.describe()}["hashing@1"]
    model = registry.make("hashing@1", {"dim": 32}, RUNTIME)
    assert model.embed(["a b c"]).shape == (1, 32)


def test_the_registry_refuses_a_factory_without_a_ref_and_a_ref_installed_twice():
    registry = EmbedderRegistry()
    with pytest.raises(TypeError, match="no ref"):
        registry.register(lambda settings, runtime: None)

    def one(settings, runtime):
        return None

    one.ref = "one@1"

    def other(settings, runtime):
        return None

    other.ref = "one@1"
    registry.register(one)
    with pytest.raises(ValueError, match="installed twice"):
        registry.register(other, source="elsewhere")
    with pytest.raises(KeyError, match="no embedder 'two@1'"):
        registry.factory("two@1")


def test_the_embedders_command_lists_them_and_each_profile_s_own(data_dir, tmp_path, monkeypatch, capsys):
    import json

    from ingest_pipeline.commands.cli import main as cli

    install_hashing_embedder(tmp_path, monkeypatch)
    (data_dir / "ingest_pipeline.toml").write_text(
        '[profiles.hashed]\nchunkers = ["page@1"]\nembedder = "hashing@1"\n'
        '[profiles.broken]\nchunkers = ["page@1"]\nembedder = "onnx@1"\n'
        f'[profiles.broken.embedder_settings]\npath = "{tmp_path / "nowhere"}"\n'
    )
    assert cli(["--data", str(data_dir), "embedders", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"minilm@1", "onnx@1", "openai@1", "hashing@1"} <= {r["ref"] for r in listed["installed"]}
    by_profile = {r["profile"]: r for r in listed["profiles"]}
    assert by_profile["retrieval"]["embedder"] == DEFAULT_EMBEDDER  # a profile that names none
    assert by_profile["hashed"]["model"] == "hashing_v1_64"
    assert "FileNotFoundError" in by_profile["broken"]["error"]


def test_the_int8_model_is_built_once_from_the_bundled_weights_checked_and_rebuilt_when_damaged(
    tmp_path, embedder
):
    import onnx

    from ingest_pipeline.embedding.minilm_int8 import FILE, quantized_model

    models = tmp_path / "models"
    path = quantized_model(str(models))
    recorded = (models / f"{FILE}.sha256").read_text().strip()
    graph = onnx.load(path)
    integer_ops = {n.op_type for n in graph.graph.node} & {"MatMulInteger", "DynamicQuantizeMatMul"}
    assert integer_ops, "the products must run in int8"
    built = os.stat(path).st_mtime_ns
    assert quantized_model(str(models)) == path
    assert os.stat(path).st_mtime_ns == built  # intact: not built again
    with open(path, "r+b") as handle:  # a damaged file is built again, to the same bytes
        handle.seek(1000)
        handle.write(b"\x00" * 64)
    quantized_model(str(models))
    assert sha256_file(path) == recorded
    model = installed().make(
        "minilm-int8@1", {}, Runtime(batch_size=2, threads=1, workers=1, models_dir=str(models))
    )
    assert model.model_id.startswith("minilm-int8_v1_") and model.model_id != embedder.model_id
    cosines = (model.embed(TEXTS) * embedder.embed(TEXTS)).sum(axis=1)
    # the same model with int8 products: close to the float32 vectors, and not equal to them
    assert cosines.min() > 0.95 and cosines.max() < 0.99999
    queries = model.embed_queries(["capital expenditure"])
    assert queries.shape == (1, 384)
