"""retrieval_eval_<profile>: retrieval quality of a profile's served table on a question set."""

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset

from ingest_pipeline.assets.common import chunk_map_key, lancedb_key, retrieval_eval_key
from ingest_pipeline.resources import EmbedderResource, IndexResource, IngestResource, Parts, StoreResource
from ingest_pipeline.settings import Profile


class RetrievalEvalConfig(Config):
    questions: str = "samples"  # samples, docugami, or a CSV path
    mode: str = "hybrid"


def build_eval_asset(profile: Profile):
    @asset(
        key=retrieval_eval_key(profile.name),
        deps=[chunk_map_key(profile.name), lancedb_key(profile.name)],
        group_name="quality",
        kinds={"lancedb"},
        description=f"Recall@k and MRR@10 of profile '{profile.name}' on a question set, with the chunk "
        f"map it measured upstream.",
    )
    def _retrieval_eval(
        context: AssetExecutionContext,
        config: RetrievalEvalConfig,
        ingest: IngestResource,
        store: StoreResource,
        embedder: EmbedderResource,
        index: IndexResource,
    ) -> MaterializeResult:
        from ingest_pipeline.retrieval.evaluation import evaluate, question_set

        p = Parts({"ingest": ingest, "store": store, "embedder": embedder, "index": index})
        qs = question_set(config.questions, p.settings.data)
        (row,) = evaluate(p, qs, [profile.name], baselines=False, mode=config.mode)
        if row["chunks"] == 0:
            raise RuntimeError(
                f"profile {profile.name} holds no chunk of the {qs.name} documents "
                f"({qs.documents}); ingest them first"
            )
        upstream = context.instance.get_latest_materialization_event(chunk_map_key(profile.name))
        metadata = {
            "question_set": qs.name,
            "mode": config.mode,
            "questions": MetadataValue.int(row["questions"]),
            **{k: MetadataValue.float(row[k]) for k in ("recall@1", "recall@5", "recall@10", "mrr@10")},
            "chunks": MetadataValue.int(row["chunks"]),
            "mean_tokens_per_chunk": MetadataValue.float(row["mean_tokens"]),
            "by_kind": MetadataValue.json(row["by_kind"]),
        }
        if upstream is not None:
            metadata["measured_chunk_map_run"] = upstream.run_id
        return MaterializeResult(metadata=metadata)

    return _retrieval_eval
