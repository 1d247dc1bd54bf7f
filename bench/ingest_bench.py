"""End-to-end ingest of the corpus PDFs, and the pipeline's embedding path against a bare
onnxruntime session on the same texts, in one run.

    .venv/bin/python bench/ingest_bench.py [--pdfs DIR] [--keep DIR]

Prints pages/s end to end, and the embedding ratio pipeline_seconds / bare_seconds
(the pipeline's stage: cache lookup, batching, Parquet writes; the bare session: the same
texts tokenized and run in batches of 32, in their original order and, as a stricter
anchor, sorted by length).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bare_embed(texts: list[str], batch: int = 32) -> np.ndarray:
    """The anchor: tokenizer + ONNX session + mean pooling + L2 norm, nothing else."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from ingest_pipeline.embedding.minilm import MiniLMEmbedder

    tokenizer = Tokenizer.from_file(MiniLMEmbedder.tokenizer_path())
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding()
    session = ort.InferenceSession(MiniLMEmbedder.model_path(), providers=["CPUExecutionProvider"])
    out = []
    for start in range(0, len(texts), batch):
        encs = tokenizer.encode_batch(texts[start : start + batch])
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        types = np.array([e.type_ids for e in encs], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus" / "files" / "pdf"))
    parser.add_argument("--keep", help="storage root to keep (default: a temporary folder)")
    args = parser.parse_args()

    from ingest_pipeline import stages
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage.catalog import query

    data = Path(args.keep or tempfile.mkdtemp(prefix="ingest-bench-")) / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    p = parts_for(str(data))
    p.embedder.embed(["warm up the model"])  # load once, outside the timings

    started = time.perf_counter()
    report = ingest(p, [args.pdfs])
    seconds = time.perf_counter() - started
    pages = query(p.lake, "select count(*) as n from pages").to_pylist()[0]["n"]
    chunks = query(p.lake, "select count(*) as n from chunks").to_pylist()[0]["n"]

    # The embedding stage again, from a cold cache, on exactly the texts it embeds.
    docs = [r["document_id"] for r in query(p.lake, "select distinct document_id from chunks").to_pylist()]
    for path in p.store.embedding_cache_files(p.embedder.model_id):
        p.lake.fs.delete_file(path)
    for profile in p.settings.profiles:
        for doc in docs:
            p.lake.delete("embeddings", profile.name, doc)
    texts = sorted(
        {
            r["t"]
            for r in query(
                p.lake, "select coalesce(embed_text, text) as t from chunks where text is not null"
            ).to_pylist()
        }
    )
    t0 = time.perf_counter()
    for profile in p.settings.profiles:  # every profile, as a run does; the cache shares texts
        stages.embed_documents(p.store, p.embedder, profile, docs, run_id="bench")
    pipeline_embed = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare = bare_embed(texts)
    bare_seconds = time.perf_counter() - t0
    by_length = sorted(texts, key=len)
    t0 = time.perf_counter()
    bare_embed(by_length)
    bare_sorted_seconds = time.perf_counter() - t0
    ours = p.embedder.embed(texts)
    agreement = float(np.min(np.sum(ours * bare, axis=1))) if len(texts) else 1.0

    result = {
        "documents": report.documents,
        "failed": len(report.failed),
        "pages": pages,
        "chunks": chunks,
        "ingest_seconds": round(seconds, 2),
        "pages_per_second": round(pages / seconds, 2),
        "texts": len(texts),
        "pipeline_embed_seconds": round(pipeline_embed, 2),
        "bare_onnxruntime_seconds": round(bare_seconds, 2),
        "embed_ratio_pipeline_over_bare": round(pipeline_embed / bare_seconds, 3) if bare_seconds else None,
        "bare_sorted_by_length_seconds": round(bare_sorted_seconds, 2),
        "embed_ratio_pipeline_over_bare_sorted": round(pipeline_embed / bare_sorted_seconds, 3),
        "min_cosine_pipeline_vs_bare": round(agreement, 5),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
