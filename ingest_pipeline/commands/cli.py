"""The ``ingest-pipeline`` command line: ingest, search, query, chunkers, inspect."""

from __future__ import annotations

import argparse
import os
import sys

from ingest_pipeline.commands.output import as_json as _json
from ingest_pipeline.commands.output import table as _table
from ingest_pipeline.settings import default_data_dir


def _parts(args):
    """The storage root's parts, from the resources its code location binds."""
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage import object_store

    return parts_for(object_store.absolute(args.data))  # a local path made absolute; a URI as it is


def _color(args, stream) -> bool:
    return args.color if args.color is not None else stream.isatty()


def _console(args, stream=None):
    from rich.console import Console

    stream = stream or sys.stdout
    color = _color(args, stream)
    return Console(
        file=stream,
        color_system="standard" if color else None,
        force_terminal=color or None,
        highlight=False,
        soft_wrap=True,
        emoji=False,
    )


def _run_ingest(args, p, paths, force: bool = False):
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.commands.progress_display import watcher_for

    watcher = watcher_for(sys.stderr, color=args.color, quiet=args.json)
    sources = p.settings.sources.overridden(
        getattr(args, "include", None), getattr(args, "exclude", None), getattr(args, "max_documents", None)
    )
    return ingest(p, paths, watcher=watcher, force=force, sources=sources)


def cmd_ingest(args) -> int:
    p = _parts(args)
    try:
        report = _run_ingest(args, p, args.paths, force=args.force)
    except BaseException as exc:  # the tree and totals of what finished, then the exception
        partial = getattr(exc, "ingest_report", None)
        if partial is not None:
            _print_report(args, p, partial)
        raise
    _print_report(args, p, report)
    return 1 if report.failed_steps else 0


def _print_report(args, p, report) -> None:
    from ingest_pipeline.commands.summary import summary_text

    if args.json:
        print(_json(report.as_dict()), flush=True)
        return
    tracebacks = _tracebacks(p, report) if args.debug else None
    _console(args).print(summary_text(report, depth=args.depth, tracebacks=tracebacks))


def _tracebacks(p, report) -> dict[tuple[str, str], str]:
    """The stored traceback of every failure in the report (for --debug)."""
    from ingest_pipeline.stages import error_traceback

    found = {}
    for doc, errors in [*report.failed.items(), *report.warnings.items()]:
        for error in errors:
            detail = error_traceback(p.store, error["stage"], doc)
            if detail:
                found[(doc, error["stage"])] = detail
    return found


def cmd_search(args) -> int:
    from ingest_pipeline.commands.search import run_search

    return run_search(args, _parts(args))


def _serve(args) -> int:
    from ingest_pipeline.commands.serve import cmd_serve

    return cmd_serve(args)


def _serve_arguments(cmd: argparse.ArgumentParser) -> None:
    from ingest_pipeline.commands.serve import serve_arguments

    serve_arguments(cmd)


def cmd_query(args) -> int:
    from ingest_pipeline.storage.catalog import analyst_query
    from ingest_pipeline.storage.damage import lake_damage

    p = _parts(args)
    damage = lake_damage(p.lake)
    if damage:
        print(damage, file=sys.stderr)
        return 2
    table = analyst_query(p.lake, p.settings.catalog_path, args.sql)
    rows = table.to_pylist()
    if args.json:
        print(_json(rows))
        return 0
    print(_table(table.column_names, rows))
    return 0


def _inspect_chunk(args, p) -> int:
    """``inspect --chunk ID``: the chunk's lineage chain."""
    from ingest_pipeline.commands.lineage import explain_chunk, format_chain

    chains = explain_chunk(p, args.chunk, args.profile)
    if not chains:
        print(f"no chunk {args.chunk!r}", file=sys.stderr)
        return 1
    print(_json(chains) if args.json else "\n\n".join(format_chain(c) for c in chains))
    return 0


def _document_at_a_glance(p, source: dict, profile: str, chunker: str | None, errors: list) -> dict:
    """``inspect DOC --json``: the source, its pages in short, the profile's chunks, errors."""
    from ingest_pipeline.commands import inspection

    did = source["document_id"]
    pages = [
        {k: r[k] for k in ("page", "status", "reason", "reader", "width", "height")}
        | {"chars": len(r["text"] or "")}
        for r in inspection.page_records(p.lake, did)
    ]
    return {
        "source": source,
        "route": p.settings.route_of(source).described(),
        "pages": pages,
        "profile": profile,
        "chunks": inspection.chunk_records(p.lake, did, profile, chunker),
        "errors": [{k: e[k] for k in ("stage", "error", "reason", "run_id")} for e in errors],
    }


def cmd_inspect(args) -> int:
    from ingest_pipeline.commands import inspection

    p = _parts(args)
    if args.chunk:
        return _inspect_chunk(args, p)
    if not args.document:
        print("inspect needs a DOCUMENT or --chunk ID", file=sys.stderr)
        return 2
    source = inspection.find_source(p.lake, args.document)
    if source is None:
        print(
            f"no document {args.document!r}: give a document_id, or a path as the sources view lists it "
            "(ingest-pipeline query 'table sources')",
            file=sys.stderr,
        )
        return 1
    did = source["document_id"]
    profile = args.profile or p.settings.default_profile
    if args.chunker:
        p.registry.get(args.chunker)  # an unknown ID@V is a clear error, not an empty listing
    errors = inspection.error_records(p.lake, did)
    if args.json:  # the document at a glance, as one object
        print(_json(_document_at_a_glance(p, source, profile, args.chunker, errors)))
        return 0
    stages = list(dict.fromkeys(args.stage or ["chunks"]))  # several in one call, each once
    model = p.embedder.for_profile(profile)
    records = [inspection.source_record(source, p.settings.route_of(source).described())]
    for stage in stages:
        items = _stage_items(p, stage, did, profile, args.chunker)
        if args.limit is not None and args.format == "rich":
            items = items[: args.limit]
        if items:
            summary = inspection.size_stats(items, model.max_tokens, model.count_tokens)
            records += [*items, *([{**summary, "stage": stage}] if summary else [])]
        elif stage != "sources":
            why = _why_empty(p, stage, did, profile, args.chunker, errors)
            records.append({"record": "empty", "stage": stage, "reason": why})
    records += errors
    if args.format == "jsonl":
        sys.stdout.write(inspection.to_jsonl(records, args.content_lines))
        return 0
    console = _console(args)
    if "chunks" in stages:
        console.print(
            f"profile '{profile}'" + (f", chunker {args.chunker}" if args.chunker else ""), style="dim"
        )
    inspection.render(
        console, records, args.content_lines, model.max_tokens, show_source_text="sources" in stages
    )
    return 0


def _stage_items(p, stage: str, did: str, profile: str, chunker: str | None) -> list[dict]:
    from ingest_pipeline.commands import inspection

    if stage == "pages":
        return inspection.page_records(p.lake, did)
    if stage == "claims":
        return inspection.claim_records(p.lake, did, chunker)
    if stage == "chunks":
        return inspection.chunk_records(p.lake, did, profile, chunker)
    return []


def _why_empty(p, stage: str, did: str, profile: str, chunker: str | None, errors: list) -> str:
    """Why a stage shows nothing for a document (SPEC E25): a failure, a success with
    nothing to cut, a chunker that claimed nothing, or a stage not run yet."""
    from ingest_pipeline.stages.chunk_map import empty_reason

    failed = [e for e in errors if e["stage"] in ("sources", "pages") or e["stage"].startswith(stage)]
    if failed:
        e = failed[0]
        return f"no {stage}: the document failed at {e['stage']}: {e['reason']}"
    if stage == "pages":
        return "no pages: the document has not been read (run ingest)"
    if stage == "chunks":
        if p.store.chunk_map_meta(profile, did) is None:
            return f"no chunks: profile '{profile}' has not been built for this document (run ingest)"
        if chunker:
            return f"no chunks from {chunker} in profile '{profile}': it won no page of this document"
        why = empty_reason(p.store, profile, did)
        return f"no chunks in profile '{profile}': {why or 'nothing on its pages to cut'} (not an error)"
    if chunker:
        from ingest_pipeline.storage.stage_names import StageName

        if p.store.claim_meta(StageName.chunker(chunker).chunker_asset_name, did) is None:
            return f"no claims from {chunker}: it has not been asked about this document (no profile uses it)"
        return f"no claims from {chunker}: it disclaimed every page of this document"
    return "no claims: no chunker has been asked about this document yet (run ingest)"


def cmd_show(args) -> int:
    from ingest_pipeline.commands.show import ShowError, show_page

    p = _parts(args)
    try:
        drawn = show_page(
            p,
            args.document,
            args.out,
            page=args.page,
            profile=args.profile,
            chunker=args.chunker,
            compare=args.compare or (),
            width_px=args.width,
        )
    except ShowError as exc:
        print(f"show: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(_json(drawn))
    else:
        panels = "; ".join(f"{pn['title']}, {pn['boxes']} boxes" for pn in drawn["panels"])
        print(f"{drawn['out']}: {drawn['path']} page {drawn['page']} — {panels} ({drawn['bytes']} bytes)")
    return 0


def cmd_eval(args) -> int:
    from ingest_pipeline.retrieval.evaluation import evaluate, format_table, question_set, together

    p = _parts(args)
    qs = together([question_set(name, p.settings.data) for name in args.questions or ["docugami"]])
    if not args.skip_ingest:
        report = _run_ingest(args, p, qs.folders)
        if not args.json:
            print(
                f"{qs.name}: {report.documents} documents ({len(report.unchanged)} unchanged, "
                f"{len(report.failed)} failed), {len(qs.questions)} questions",
                file=sys.stderr,
            )
    profiles = args.profile or [pr.name for pr in p.settings.profiles]
    rows = evaluate(
        p,
        qs,
        profiles,
        baselines=not args.no_baselines,
        mode=args.mode,
        progress=None if args.json else lambda m: print(f"evaluating {m}…", file=sys.stderr),
        crowd=args.crowd,
    )
    print(_json(rows) if args.json else format_table(rows))
    return 0


def cmd_chunkers(args) -> int:
    from ingest_pipeline.commands.installed import list_chunkers

    return list_chunkers(args, _parts(args))


def cmd_embedders(args) -> int:
    from ingest_pipeline.commands.installed import list_embedders

    return list_embedders(args, _parts(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ingest-pipeline", description=__doc__)
    parser.add_argument(
        "--data", default=default_data_dir(), help="storage root (default ./data, or $INGEST_DATA)"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=bool(os.environ.get("INGEST_DEBUG")),
        help="show tracebacks (of failures, and of the command itself)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, help_text, arguments in _COMMANDS:
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        colour = cmd.add_mutually_exclusive_group()
        colour.add_argument(
            "--color",
            dest="color",
            action="store_true",
            default=None,
            help="colour even when not writing to a terminal",
        )
        colour.add_argument("--no-color", dest="color", action="store_false", help="never colour")
        cmd.set_defaults(fn=fn)
        arguments(cmd)
    return parser


def _ingest_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="*")
    cmd.add_argument(
        "--depth",
        type=int,
        help="show files (and folders) down to this many levels "
        "in the summary tree (default: every folder, no files)",
    )
    cmd.add_argument(
        "--force",
        action="store_true",
        help="recompute the named documents (default: every one) whatever their fingerprints",
    )
    cmd.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="take only files of the folders whose path matches a glob (repeatable; "
        "replaces [sources] include)",
    )
    cmd.add_argument(
        "--exclude",
        action="append",
        metavar="GLOB",
        help="leave out files whose path matches a glob (repeatable; replaces [sources] exclude)",
    )
    cmd.add_argument(
        "--max-documents",
        type=_count,
        metavar="N",
        help="ingest at most N documents, the first ones after the filters (0: none)",
    )


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _search_arguments(cmd: argparse.ArgumentParser) -> None:
    from ingest_pipeline.commands.search import search_arguments

    search_arguments(cmd)


def _eval_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--profile",
        action="append",
        help="a profile to evaluate, repeatable (default: every configured profile)",
    )
    cmd.add_argument(
        "--questions",
        action="append",
        help="docugami (default), financebench, samples, a folder with questions.jsonl, or a CSV "
        "path; repeat it to ask several sets as one",
    )
    cmd.add_argument(
        "--crowd",
        action="store_true",
        help="search every document in the storage root, not only the sets' own (the crowd setting)",
    )
    cmd.add_argument("--mode", choices=("vector", "text", "hybrid"), default="hybrid")
    cmd.add_argument("--no-baselines", action="store_true")
    cmd.add_argument("--skip-ingest", action="store_true", help="evaluate what is already ingested")


def _inspect_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("document", nargs="?", help="document_id or path")
    cmd.add_argument("--chunk", help="a chunk id: show its lineage chain instead")
    cmd.add_argument(
        "--stage",
        action="append",
        choices=("sources", "pages", "claims", "chunks"),
        help="what to show: the source, its pages, chunkers' claims, or a profile's chunks "
        "(repeat for several stages in one call; default: chunks)",
    )
    cmd.add_argument("--profile", help="the profile whose chunks to show (default: the served one)")
    cmd.add_argument("--chunker", help="only this chunker version's claims or chunks (ID@V)")
    cmd.add_argument(
        "--content-lines", type=int, metavar="N", help="show only the first and last N lines of each text"
    )
    cmd.add_argument(
        "--format",
        choices=("rich", "jsonl"),
        default="rich",
        help="jsonl: one complete record per line (source bytes as content_base64)",
    )
    cmd.add_argument("--limit", type=int, help="show at most this many items (rich format)")


def _show_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("document", help="document_id or path")
    cmd.add_argument("--page", type=int, help="1-based page (default: the first page with a box)")
    which = cmd.add_mutually_exclusive_group()
    which.add_argument("--profile", help="draw this profile's chunks (default: the served profile)")
    which.add_argument("--chunker", help="draw this chunker version's claims instead (ID@V)")
    which.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two chunker versions side by side")
    cmd.add_argument("--out", required=True, help="the PNG file to write")
    cmd.add_argument("--width", type=int, default=900, help="page width in pixels")


# name, function, help, its own arguments
_COMMANDS = (
    ("ingest", cmd_ingest, "ingest files or folders (default: the source root)", _ingest_arguments),
    ("search", cmd_search, "search a profile's LanceDB table", _search_arguments),
    (
        "serve",
        _serve,
        "search, records, lineage and page pictures over HTTP, with a web page",
        _serve_arguments,
    ),
    ("query", cmd_query, "run DuckDB SQL over the catalog's views", lambda cmd: cmd.add_argument("sql")),
    ("chunkers", cmd_chunkers, "list installed chunker versions", lambda cmd: None),
    ("embedders", cmd_embedders, "list installed embedders and each profile's", lambda cmd: None),
    ("eval", cmd_eval, "retrieval quality per profile, beside two baselines", _eval_arguments),
    ("inspect", cmd_inspect, "a document's pages, chunks, boxes and lineage", _inspect_arguments),
    (
        "show",
        cmd_show,
        "draw a page with its chunks' boxes, numbered and coloured by role, as PNG",
        _show_arguments,
    ),
)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear message, not a traceback, for a person at a terminal
        if args.debug:
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # KeyError quotes its text
        print(f"error: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
