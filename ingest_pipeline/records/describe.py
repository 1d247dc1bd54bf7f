"""A document's record from what its file says of itself and its first pages."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ingest_pipeline.records import cover
from ingest_pipeline.records.cover import Line
from ingest_pipeline.records.file_metadata import COVER_PAGES, first_heading, front_matter
from ingest_pipeline.records.record import DocumentRecord

# Kinds a format is by itself, when its first pages name none.
_FORMAT_KINDS = {
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "slide deck",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "workbook",
    "application/vnd.ms-excel.sheet.macroEnabled.12": "workbook",
    "text/csv": "table",
    "text/tab-separated-values": "table",
}
# Front matter keys that name a field, in the order they are tried.
_FRONT_KEYS = {
    "title": ("title",),
    "organisation": ("organisation", "organization", "company", "publisher"),
    "period": ("period", "date", "year"),
    "kind": ("kind", "type", "category"),
    "language": ("language", "lang"),
}
# Titles that tools write for every file, saying nothing of the document.
_TOOL_TITLE = re.compile(
    r"^(untitled|microsoft (word|powerpoint|excel) - .*|document\d*|presentation\d*)$", re.I
)


def stem_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


def name_in_file_name(stem: str) -> str | None:
    """The file name's leading words, up to the first that is a year or a period:
    ``AMERICANEXPRESS_2022_10K`` → its first word, ``3M_2018_10K`` → "3M"."""
    words = []
    for word in re.split(r"[\W_]+", stem):
        if not word:
            continue
        if re.fullmatch(r"(19|20)\d\d(q[1-4])?|q[1-4]|\d+", word, re.I):
            break
        words.append(word)
    name = " ".join(words)
    return name if sum(c.isalnum() for c in name) >= 2 else None


def describe(
    document_id: str,
    path: str,
    media_type: str,
    pages: Sequence[Any],
    facts: Mapping[str, Any] | None = None,
) -> DocumentRecord:
    """The record of a document: ``pages`` its page outputs (text), ``facts`` what its file
    says of itself (``pdf_facts`` for a PDF, ``{"properties": …}`` for Office, ``{"markdown":
    text}`` for Markdown)."""
    facts = facts or {}
    record = DocumentRecord(document_id, path, pages=len(pages))
    _from_front_matter(record, facts.get("markdown"))
    _from_properties(record, facts.get("metadata") or facts.get("properties") or {})
    # A period in the file name is how the people who keep the file name it (a fiscal quarter
    # where the cover gives the calendar date it ended): it comes before the cover's.
    record.setdefault("period", cover.period_in_name(stem_of(path)), {"file name": path.rsplit("/", 1)[-1]})
    lines = _located(_cover_lines(pages), facts.get("lines") or ())
    text = "\n".join(line.text for line in lines)
    tabular = media_type in _FORMAT_KINDS and _FORMAT_KINDS[media_type] in ("table", "workbook")
    for name, read in (
        ()
        if tabular
        else (
            ("organisation", cover.organisation_of),
            ("period", cover.period_of),
            ("title", cover.title_of),
        )
    ):
        found = read(lines)
        if found:
            record.setdefault(name, found[0], found[1].where())
    kind = cover.kind_of(text)
    record.setdefault("kind", kind, _spot_of(lines, kind) if kind else {})
    record.setdefault("kind", _FORMAT_KINDS.get(media_type), {"format": media_type})
    if not tabular:  # a table's cells are data, not prose in a language
        record.setdefault(
            "language", cover.language_of(text), {"pages": sorted({line.page for line in lines})}
        )
    stem = stem_of(path)
    record.setdefault(
        "title", " ".join(stem.replace("_", " ").split()), {"file name": path.rsplit("/", 1)[-1]}
    )
    record.names = _names(record, stem, facts)
    return record


def _from_front_matter(record: DocumentRecord, markdown: str | None) -> None:
    if not markdown:
        return
    pairs = front_matter(markdown)
    for name, keys in _FRONT_KEYS.items():
        for key in keys:
            if pairs.get(key):
                value = pairs[key]
                if name == "period":
                    value = cover.period_in_name(value) or value
                record.setdefault(name, value, {"front matter": key})
                break
    heading = first_heading(markdown)
    record.setdefault("title", heading, {"heading": 1})


def _from_properties(record: DocumentRecord, props: Mapping[str, str]) -> None:
    """A PDF's information dictionary (Title, Author, Subject) or Office core properties."""
    title = props.get("Title") or props.get("title")
    if title and not _TOOL_TITLE.match(title.strip()):
        record.setdefault("title", title.strip(), {"metadata": "Title" if "Title" in props else "title"})
    company = props.get("company")
    if company:
        record.setdefault("organisation", company, {"metadata": "Company"})
    author = props.get("Author")
    if author and cover.organisation_of([Line(author, 0)]):
        record.setdefault("organisation", author.strip(), {"metadata": "Author"})
    language = props.get("language")
    if language:
        record.setdefault("language", language.split("-")[0].lower(), {"metadata": "language"})


def _located(lines: list[Line], located: Sequence[Sequence[Any]]) -> list[Line]:
    """The reader's lines, each with the box of the located text run that holds it (PDFium's
    text runs split and space words unlike the reader's text: they are compared without
    spaces)."""
    if not located:
        return lines
    runs = [("".join(str(t).split()).casefold(), int(p), tuple(b)) for t, p, b in located]
    boxed = []
    for line in lines:
        key = "".join(line.text.split()).casefold()
        box = next((b for k, p, b in runs if p == line.page and len(k) > 2 and (key in k or k in key)), None)
        boxed.append(Line(line.text, line.page, box))
    return boxed


def _cover_lines(pages: Sequence[Any]) -> list[Line]:
    lines = []
    for page in pages[:COVER_PAGES]:
        for text in (getattr(page, "text", None) or "").splitlines():
            if text.strip():
                lines.append(Line(" ".join(text.split()), page.page))
    return lines


def _spot_of(lines: Sequence[Line], kind: str) -> dict[str, Any]:
    for _, pattern in [k for k in cover._KINDS if k[0] == kind]:
        for line in lines:
            if re.search(pattern, line.text, re.I):
                return line.where()
    return {"pages": sorted({line.page for line in lines})}


def _names(record: DocumentRecord, stem: str, facts: Mapping[str, Any]) -> list[str]:
    """Every spelling of the organisation a query may use: the record's, the file name's,
    the Office Company's."""
    props = facts.get("properties") or {}
    names = [record.value("organisation"), name_in_file_name(stem), props.get("company")]
    return list(dict.fromkeys(n for n in names if n))
