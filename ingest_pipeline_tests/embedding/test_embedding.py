import numpy as np

from ingest_pipeline.embedding.minilm import MiniLMEmbedder
from ingest_pipeline.stages import EmbeddingCache
from ingest_pipeline.storage.store import Store


def test_vectors_are_unit_length_and_384_wide(embedder):
    vectors = embedder.embed(["a greenhouse in spring", "tomato yield per square metre"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(embedder):
    a, b, c = embedder.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]
    )
    assert float(a @ b) > 0.6 > float(a @ c)


def test_batching_and_length_sorting_do_not_change_vectors(embedder):
    texts = [
        "short",
        "a much longer sentence about irrigation valves and moisture sensors " * 3,
        "mid length text",
    ]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)
    small_batches = MiniLMEmbedder(batch_size=1)
    assert np.allclose(small_batches.embed(texts), together, atol=1e-4)


def test_sessions_side_by_side_give_each_text_its_own_vector(embedder):
    texts = [f"greenhouse {i} " + "tomato irrigation valve " * (i % 7) for i in range(23)]
    side_by_side = MiniLMEmbedder(batch_size=2, threads=1, workers=3)
    vectors = side_by_side.embed(texts)
    assert len(side_by_side._sessions) == 3
    assert np.allclose(vectors, embedder.embed(texts), atol=1e-4)


def test_usage_counts_the_model_calls_their_tokens_and_padding_and_the_sessions_cpu():
    texts = [
        "short",
        "a much longer sentence about irrigation valves and moisture sensors " * 3,
        "mid length text",
        "x " * 400,
    ]  # the last one is cut to the model's 256 tokens
    model = MiniLMEmbedder(batch_size=2, threads=1, workers=2)
    assert model.usage()["calls"] == 0
    model.embed(texts)
    used = model.usage()
    lengths = sorted(min(n, model.max_tokens) for n in model.count_tokens(texts))
    assert used["calls"] == 2 and used["texts"] == 4
    assert used["tokens"] == sum(lengths)
    assert used["padded_tokens"] == 2 * lengths[1] + 2 * lengths[3]  # each batch padded to its longest
    assert used["thread_cpu_seconds"] > 0
    model.embed(texts[:1])
    assert model.usage()["calls"] == 3 and model.usage()["tokens"] == sum(lengths) + lengths[0]


def test_token_counts_are_not_truncated(embedder):
    short, long = embedder.count_tokens(["hello world", "word " * 600])
    assert short == 4  # [CLS] hello world [SEP]
    assert long > embedder.max_tokens


def test_the_cache_returns_what_was_put(tmp_path):
    store = Store.at(str(tmp_path / "lake"))
    cache = EmbeddingCache(store, "model-x")
    assert cache.get(["aa"]) == {}
    cache.put({"aa": np.ones(4, dtype=np.float32), "bb": np.zeros(4, dtype=np.float32)}, shard="s1")
    cache.put({"cc": np.full(4, 2, dtype=np.float32)}, shard="s2")
    found = cache.get(["aa", "cc", "zz"])
    assert set(found) == {"aa", "cc"} and found["cc"][0] == 2
    assert EmbeddingCache(store, "model-y").get(["aa"]) == {}


def test_the_embed_batch_setting_is_the_batch_the_served_model_runs(tmp_path):
    import os

    from ingest_pipeline.resources import resources_for
    from ingest_pipeline.settings import load_settings

    default = resources_for(load_settings(str(tmp_path)))["embedder"]
    # the measured default: a one-thread session per CPU, 4 texts per call
    assert (default.batch_size, default.threads, default.workers) == (4, 1, len(os.sched_getaffinity(0)))
    (tmp_path / "ingest_pipeline.toml").write_text("embed_batch = 16\nembed_workers = 1\nembed_threads = 0\n")
    embedder = resources_for(load_settings(str(tmp_path)))["embedder"]
    model = embedder.served()
    assert (model.batch_size, model.workers, model.threads) == (16, 1, None)


def test_texts_fed_ahead_that_the_chunk_map_does_not_hold_never_reach_the_model(tmp_path, embedder):
    import os

    from ingest_pipeline.identity import sha256_text
    from ingest_pipeline.stages import EmbeddingPrefetch

    store = Store.at(str(tmp_path / "lake"))
    # the shortest go first, 256 a part: the 40 longest still wait when the hand-over closes
    fed = [f"note {i}: " + "valve " * (i // 50) for i in range(600)]
    held = fed[:560]
    run = "run-feed-test"
    assert EmbeddingPrefetch.feed(store, embedder, "served", fed, run) == 600
    assert EmbeddingPrefetch.feed(store, embedder, "served", fed[:10], run) == 0  # each text once
    prefetch = EmbeddingPrefetch.settle(store, embedder, "served", {sha256_text(t): t for t in held}, run)
    assert prefetch is not None
    vectors = EmbeddingPrefetch.take(run, "served")
    assert set(vectors) == {sha256_text(t) for t in held}
    assert np.allclose(vectors[sha256_text(held[7])], embedder.embed([held[7]])[0], atol=1e-4)
    shards = store.embedding_cache_files(embedder.model_id)
    assert shards and all(os.path.basename(f).startswith(f"{run}-ahead-") for f in shards)
    cached = EmbeddingCache(store, embedder.model_id).get({sha256_text(t) for t in fed})
    assert set(cached) == set(vectors)  # the stray texts are nowhere
    assert EmbeddingPrefetch.take(run, "served") == {}  # taken once


def test_a_run_that_ends_without_its_embeddings_step_leaves_no_thread_behind(tmp_path, embedder):
    import threading

    from ingest_pipeline.stages import EmbeddingPrefetch

    store = Store.at(str(tmp_path / "lake"))
    run = "run-ended-early"
    EmbeddingPrefetch.feed(store, embedder, "served", [f"row {i} of the ledger" for i in range(40)], run)
    assert any(t.name == f"prefetch-{run[:8]}" for t in threading.enumerate())
    EmbeddingPrefetch.stop_run(run)
    assert not any(t.name == f"prefetch-{run[:8]}" for t in threading.enumerate())
    assert EmbeddingPrefetch.take(run, "served") == {}


def test_the_prefetch_takes_an_earlier_runs_vectors_and_reads_no_shard_of_its_own(tmp_path, embedder):
    """The prefetch looks each part up in the cache (an earlier run may hold its texts),
    but not in the shards it wrote itself: those hold only texts it was handed before."""
    from ingest_pipeline.identity import sha256_text
    from ingest_pipeline.stages import EmbeddingPrefetch

    class Counting:
        def __init__(self, inner):
            self.inner, self.texts = inner, []

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def embed(self, texts):
            self.texts += list(texts)
            return self.inner.embed(texts)

    store = Store.at(str(tmp_path / "lake"))
    texts = [f"greenhouse row {i}: " + "valve " * (i // 100) for i in range(600)]
    earlier = texts[::7]  # spread over the three parts the prefetch embeds
    EmbeddingCache(store, embedder.model_id).put(
        {sha256_text(t): v for t, v in zip(earlier, embedder.embed(earlier))}, shard="earlier-run-0001"
    )
    counting, run = Counting(embedder), "run-skip-test"
    original = store.cached_vectors
    read: list[list[str]] = []

    def recording(model, shas, skip=None):
        read.append(
            [
                f
                for f in store.embedding_cache_files(model)
                if not (skip and f.rsplit("/", 1)[-1].startswith(skip))
            ]
        )
        return original(model, shas, skip=skip)

    store.cached_vectors = recording
    EmbeddingPrefetch.feed(store, counting, "served", texts, run)
    EmbeddingPrefetch.settle(store, counting, "served", {sha256_text(t): t for t in texts}, run)
    vectors = EmbeddingPrefetch.take(run, "served")
    assert sorted(counting.texts) == sorted(set(texts) - set(earlier))  # each new text once, no earlier one
    assert set(vectors) == {sha256_text(t) for t in set(texts) - set(earlier)}
    assert len(read) >= 3 and all(
        len(files) == 1 and files[0].endswith("earlier-run-0001.parquet") for files in read
    )
    own = [f for f in store.embedding_cache_files(embedder.model_id) if f"{run}-ahead-" in f]
    assert len(own) >= 3
    assert set(store.cached_vectors(embedder.model_id, vectors, skip=f"{run}-ahead-")) == set()
    assert set(store.cached_vectors(embedder.model_id, vectors)) == set(vectors)


def test_each_chunk_goes_to_the_embedder_only_in_a_modality_it_takes():
    """SPEC D07: a text-only embedder gets the texts, one of texts and images gets both
    (pictures as bytes, cached under keys of their own), and one of images only gets the
    pictures; what it does not take stays without a vector."""
    import pyarrow as pa

    from ingest_pipeline.stages.embeddings import Picture, key_of, sees_images, sees_words, texts_of

    table = pa.table(
        {
            "chunk_id": ["t1", "i1", "t2"],
            "text": ["Revenue rose.", None, "Costs fell."],
            "embed_text": ["Report: Revenue rose.", None, None],
            "image": [None, b"\x89PNG picture", None],
        }
    )

    class Model:
        def __init__(self, modalities):
            self.modalities = modalities

        def embed_images(self, images):
            return []

    wanted = {
        ("text",): ["t1", "t2"],
        ("text", "image"): ["t1", "i1", "t2"],
        ("image",): ["i1"],
    }
    for modalities, ids in wanted.items():
        model = Model(modalities)
        found = texts_of(table, sees_images(model), sees_words(model))
        assert [chunk for chunk, _ in found] == ids, modalities
    picture = dict(texts_of(table, pictures=True))["i1"]
    assert isinstance(picture, Picture) and key_of(picture).startswith("image-")
    assert key_of("Revenue rose.") != key_of(Picture(b"Revenue rose."))
    assert dict(texts_of(table))["t1"] == "Report: Revenue rose."
