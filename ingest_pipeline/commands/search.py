"""``search``: served search from the command line (ingest_pipeline.retrieval.search), printed
as results a person can cite, or as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ingest_pipeline.commands.output import as_json
from ingest_pipeline.identity import display_name


def _box(bbox) -> str:
    if not bbox:
        return ""
    return f"[{bbox['x0']:.3f}, {bbox['y0']:.3f}, {bbox['x1']:.3f}, {bbox['y1']:.3f}]"


class NotIndexed(Exception):
    """A search named a profile that is not indexed."""


def search_results(p, args) -> list[dict[str, Any]]:
    """Served search for the command line's arguments (``retrieval.search``)."""
    from ingest_pipeline.retrieval.search import Request, Searcher

    profile = args.profile or p.settings.default_profile
    if not p.settings.is_indexed(profile):
        raise NotIndexed(
            f"profile '{profile}' is not indexed (its chunk map is in the lake, but nothing is "
            f"embedded or in LanceDB); set indexed = true under [profiles.{profile}] in "
            f"ingest_pipeline.toml and ingest again to search it"
        )
    request = Request(
        args.query,
        profile,
        k=args.k,
        mode=args.mode,
        where=args.where,
        group=args.group,
        context=args.context,
    )
    return Searcher(p).search(request).hits


def run_search(args, p) -> int:
    from ingest_pipeline.retrieval.filters import FilterError
    from ingest_pipeline.storage.damage import index_damage, lake_damage
    from ingest_pipeline.storage.vector_index import EmbedderMismatch

    damage = lake_damage(p.lake) or index_damage(p.lake, p.index, args.profile or p.settings.default_profile)
    if damage:
        print(damage, file=sys.stderr)
        return 2
    try:
        hits = search_results(p, args)
    except (NotIndexed, KeyError, EmbedderMismatch, FilterError) as exc:
        print(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc), file=sys.stderr)
        return 2
    if args.explain:
        from ingest_pipeline.commands.lineage import explain_chunk

        for hit in hits:
            chains = explain_chunk(p, hit["chunk_id"], args.profile or p.settings.default_profile)
            hit["lineage"] = chains[0] if chains else None
    if args.json:
        print(as_json(hits))
        return 0
    if not hits:
        print("no hits (has anything been ingested? try: ingest-pipeline ingest)")
        return 0
    _print_results(args, hits)
    return 0


def _print_results(args, hits: list[dict[str, Any]]) -> None:
    from ingest_pipeline.commands.lineage import format_chain

    for rank, hit in enumerate(hits, 1):
        page = f"  page {hit['page']}" if hit.get("page") is not None else ""
        where = f"{display_name(hit['path'])}{page}  {_box(hit['bbox']) or hit['bbox_reason']}"
        document = hit.get("document") or {}
        about = ", ".join(str(document[k]) for k in ("organisation", "period", "kind") if document.get(k))
        print(
            f"{rank}. {where}  score {hit['score']:.4f}  [{hit['chunker']}]"
            + (f"  ({about})" if about else "")
        )
        for passage in hit.get("passages") or [hit]:
            text = " ".join((passage["text"] or "").split())
            box = _box(passage.get("bbox"))
            lead = box + "  " if box and passage is not hit else ""
            print(f"   {lead}{display_name(text[:200])}{'…' if len(text) > 200 else ''}")
            if args.group == "none":
                break
        for part in hit.get("context") or []:
            spot = f"page {part['page']}" + (f" chunk {part['chunk_id']}" if part.get("chunk_id") else "")
            print(f"   context [{spot}]: {display_name(' '.join(part['text'].split())[:300])}")
        if args.explain and hit.get("lineage"):
            print("   " + format_chain(hit["lineage"]).replace("\n", "\n   "))


def search_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("query")
    cmd.add_argument("--profile")
    cmd.add_argument("-k", type=int, default=5)
    cmd.add_argument("--mode", choices=("vector", "text", "hybrid"), default="hybrid")
    cmd.add_argument("--explain", action="store_true", help="show each hit's lineage chain")
    cmd.add_argument(
        "--where",
        help="filter on document fields and chunk columns: \"organisation = 'Apple' and period >= 2022\"",
    )
    cmd.add_argument(
        "--group",
        choices=("page", "document", "none"),
        default="page",
        help="one result per page (default), per document, or per passage",
    )
    cmd.add_argument(
        "--context",
        choices=("page", "section", "neighbours"),
        help="add the text to hand a model: the page, the section, or the neighbouring chunks",
    )
