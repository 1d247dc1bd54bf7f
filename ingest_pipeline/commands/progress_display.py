"""How ``ingest`` shows its progress: a table redrawn in place on a terminal, one plain
line per document and stage otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ingest_pipeline.identity import display_name
from ingest_pipeline.runtime.progress import Column, DocumentEvent, StageBoard, kind_of

_ROW_STYLE = {"new": "green", "changed": "yellow", "cached": "cyan", "failed": "red"}


class LiveTable:
    """The per-stage table, redrawn in place (rich ``Live``) while the run works."""

    def __init__(self, stream: TextIO = sys.stderr, color: bool | None = None) -> None:
        from rich.console import Console

        self.console = Console(
            file=stream,
            force_terminal=True if color else None,
            color_system=None if color is False else "auto",
            highlight=False,
        )
        self.live = None
        self.started_at = time.monotonic()
        self.last = ""

    def started(self, board: StageBoard) -> None:
        from rich.live import Live

        self.board = board
        self.live = Live(
            self,
            console=self.console,
            refresh_per_second=4,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start()

    def changed(self, board: StageBoard, event: DocumentEvent, done: tuple[Column, str] | None) -> None:
        name = display_name(board.paths.get(event.document, event.document))
        if done and done[1] == "failed":
            self.last = f"{done[0].name}: {name} failed: {display_name(event.detail.get('reason', ''))}"
        elif event.status == "failed":
            reason = display_name(event.detail.get("error") or event.detail.get("reason"))
            self.last = f"{event.asset}: {name}: {reason}"

    def finished(self, board: StageBoard) -> None:
        if self.live is not None:
            self.live.refresh()
            self.live.stop()

    def __rich__(self):
        from rich.table import Table
        from rich.text import Text

        rows = self.board.rows()
        header, body = rows[0], rows[1:]
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column(f"{time.monotonic() - self.started_at:5.0f} s", style="dim")
        for name in header[1]:
            table.add_column(name, justify="right")
        for label, cells in body:
            style = _ROW_STYLE.get(label)
            table.add_row(label, *[Text(c, style=style if c not in ("0", "") else None) for c in cells])
        if self.last:
            from rich.console import Group

            return Group(table, Text(self.last[:200], style="red"))
        return table


class PlainLines:
    """One line per document as it becomes done in a column, for logs and pipes."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream

    def started(self, board: StageBoard) -> None:
        stages = " → ".join(c.name for c in board.ordered())
        self.stream.write(f"{board.total} documents: {stages}\n")
        self.stream.flush()

    def changed(self, board: StageBoard, event: DocumentEvent, done: tuple[Column, str] | None) -> None:
        name = display_name(board.paths.get(event.document, event.document))
        if done is not None:
            column, state = done
            extra = ""
            if state == "failed":
                extra = f": {event.asset}: {display_name(event.detail.get('reason', ''))}"
            elif column.name == "Reading":
                extra = f", {board.pages.get(event.document, 0)} pages"
            elif column.name == "Embedding" and state != "skipped":
                embedded, cached = column.texts.get(event.document, (0, 0))
                extra = f", {embedded} texts embedded, {cached} cached"
            self.stream.write(
                f"{column.name:<9} {len(column.done):>4}/{board.total}  {name}  {state}{extra}\n"
            )
        elif event.status == "failed" and kind_of(event.asset) == "chunks":
            self.stream.write(
                f"{'Chunking':<9}   warning  {name}  {event.asset}: "
                f"{display_name(event.detail.get('error') or event.detail.get('reason'))}\n"
            )
        else:
            return
        self.stream.flush()

    def finished(self, board: StageBoard) -> None:
        pass


def watcher_for(stream: TextIO, color: bool | None = None, quiet: bool = False):
    """The table on a terminal (or when colour is forced), plain lines otherwise, nothing when quiet."""
    if quiet:
        return None
    if stream.isatty():
        return LiveTable(stream, color)
    return PlainLines(stream)
