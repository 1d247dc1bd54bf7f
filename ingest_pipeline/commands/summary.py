"""The end-of-ingest summary: the sources as a tree with new / changed / cached / failed
counts per folder (a folder counts everything below it), a totals line, then one line per
failure and warning."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ingest_pipeline.identity import display_name

STATUSES = ("new", "changed", "cached", "failed")
# Shown only where there are some: documents the routes turned away (not an error).
QUIET_STATUSES = ("skipped",)
STYLES = {"new": "green", "changed": "yellow", "cached": "cyan", "failed": "red", "skipped": "dim"}
# The report's word for a document nothing was recomputed for is "unchanged"; here it is cached.
_FROM_REPORT = {"new": "new", "changed": "changed", "unchanged": "cached", "failed": "failed"}


@dataclass
class Node:
    name: str
    is_file: bool = False
    counts: Counter = field(default_factory=Counter)
    children: dict[str, "Node"] = field(default_factory=dict)


def build_tree(statuses: Iterable[tuple[str, str]]) -> Node:
    """A tree of ``(path, status)`` pairs; every node counts the documents below it."""
    root = Node("")
    for path, status in statuses:
        status = _FROM_REPORT.get(status, status)
        parts = [p for p in path.split("/") if p]
        node = root
        node.counts[status] += 1
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            node = node.children.setdefault(part, Node(part, is_file=last))
            node.counts[status] += 1
    return root


def tree_lines(root: Node, depth: int | None = None) -> list[tuple[str, Counter]]:
    """``(indented name, counts)`` per shown node: every folder level, and files only
    down to ``depth`` levels when a depth is given (then folders too stop there)."""
    lines: list[tuple[str, Counter]] = []

    def visible(node: Node, level: int) -> bool:
        if depth is not None:
            return level <= depth
        return not node.is_file

    def walk(node: Node, prefix: str, level: int) -> None:
        kids = [
            c for c in sorted(node.children.values(), key=lambda n: (n.is_file, n.name)) if visible(c, level)
        ]
        for i, child in enumerate(kids):
            last = i == len(kids) - 1
            branch = "" if level == 1 else ("└── " if last else "├── ")
            lines.append((prefix + branch + child.name + ("" if child.is_file else "/"), child.counts))
            walk(child, prefix + ("" if level == 1 else ("    " if last else "│   ")), level + 1)

    walk(root, "", 1)
    return lines


def summary_text(report, depth: int | None = None, tracebacks: dict[tuple[str, str], str] | None = None):
    """The summary as a rich ``Text`` (styles are dropped when the console has no colour)."""
    from rich.text import Text

    statuses = [(display_name(report.paths.get(doc, doc)), report.status_of(doc)) for doc in report.paths]
    root = build_tree(statuses)
    out = Text()
    lines = tree_lines(root, depth)
    width = max((len(name) for name, _ in lines), default=0)
    for name, counts in lines:
        out.append(name.ljust(width))
        for status in STATUSES + QUIET_STATUSES:
            if counts[status]:
                out.append("  ")
                out.append(f"{counts[status]} {status}", style=STYLES[status])
        out.append("\n")
    if lines:
        out.append("\n")
    out.append(f"{report.documents} documents:")
    for status in STATUSES:
        out.append("  ")
        out.append(f"{root.counts[status]} {status}", style=STYLES[status] if root.counts[status] else None)
    for status in QUIET_STATUSES:
        if root.counts[status]:
            out.append("  ")
            out.append(f"{root.counts[status]} {status}", style=STYLES[status])
    if report.removed:
        out.append(f"  {len(report.removed)} removed")
    out.append("\n")
    out.append(
        f"{report.chunks} chunks in the served profile '{report.profile}'; {report.texts_embedded} texts "
        f"embedded, {report.texts_from_cache} cached; {report.seconds:.1f} s\n"
    )
    for path in getattr(report, "repaired", []):
        why = "not whole Parquet: set aside in the lake's _damaged/, rebuilt"
        out.append(f"repaired {display_name(path)}  ({why})\n")
    for path in report.removed:
        out.append(f"removed  {display_name(path)}  (its rows left the lake and LanceDB)\n")
    for step in getattr(report, "failed_steps", []):
        out.append("failed   ", style="red")
        out.append(f"step {step['step']}: {step['reason']}\n")
    if getattr(report, "interrupted", None):
        out.append("stopped  ", style="red")
        out.append(f"{report.interrupted} (this summary counts what finished before)\n")

    def name(doc: str, default: str) -> str:
        return display_name(report.paths.get(doc, default))

    for doc, errors in sorted(report.failed.items(), key=lambda kv: name(kv[0], kv[0])):
        for error in errors:
            out.append("failed   ", style="red")
            out.append(f"{name(doc, doc)}  {error['stage']}: {display_name(error['reason'])}\n")
            detail = (tracebacks or {}).get((doc, error["stage"]))
            if detail:
                out.append("    " + detail.rstrip().replace("\n", "\n    ") + "\n", style="dim")
    for doc, reason in sorted(getattr(report, "skipped", {}).items(), key=lambda kv: name(kv[0], kv[0])):
        out.append(f"skipped  {name(doc, doc)}  {display_name(reason)} (not an error)\n")
    for doc, reason in sorted(getattr(report, "empty", {}).items(), key=lambda kv: name(kv[0], kv[0])):
        out.append(f"empty    {name(doc, doc)}  {display_name(reason)} (nothing to chunk; not an error)\n")
    for doc, errors in sorted(report.warnings.items(), key=lambda kv: name(kv[0], kv[0])):
        for error in errors:
            out.append("warning  ", style="yellow")
            out.append(
                f"{name(doc, doc)}  {error['stage']}: {display_name(error['reason'])} "
                f"(its pages went to the next chunker in order)\n"
            )
            detail = (tracebacks or {}).get((doc, error["stage"]))
            if detail:
                out.append("    " + detail.rstrip().replace("\n", "\n    ") + "\n", style="dim")
    out.rstrip()
    return out
