"""Search filters: ``organisation = 'Apple' and period >= 2022 and page <= 10``.

An expression is parsed into a tree, never passed on as text. Comparisons on document
fields are decided here, over the document records, and reach LanceDB as a list of document
ids; comparisons on chunk columns reach it as SQL whose column names come from a fixed list
and whose values are written by the index's own literal functions. So no text a user typed
reaches LanceDB or DuckDB except as an escaped literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ingest_pipeline.records.matching import name_key
from ingest_pipeline.storage.vector_index import filter_literal, where_in

DOCUMENT_FIELDS = ("title", "organisation", "period", "year", "kind", "language")
CHUNK_COLUMNS = {
    "page": "int",
    "role": "str",
    "content_type": "str",
    "chunker": "str",
    "label": "str",
    "modality": "str",
    "reader": "str",
    "path": "str",
    "document_id": "str",
    "config_hash": "str",
}
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")


class FilterError(ValueError):
    """A filter that cannot be read: says where and what was expected."""


@dataclass(frozen=True)
class Compare:
    field: str
    op: str
    value: str | float


@dataclass(frozen=True)
class Within:
    field: str
    values: tuple[str | float, ...]


@dataclass(frozen=True)
class Both:
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Either:
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Negated:
    inner: "Node"


Node = Union[Compare, Within, Both, Either, Negated]

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<op><=|>=|!=|<>|=|<|>)"
    r"|(?P<punct>[(),])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"
)


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    found, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if not match or match.end() == at:
            raise FilterError(f"cannot read the filter at character {at + 1}: {text[at : at + 20]!r}")
        kind = match.lastgroup
        raw = match.group(kind)
        value: Any = raw
        if kind == "string":
            value = raw[1:-1].replace("''", "'")
        elif kind == "number":
            value = float(raw) if "." in raw else int(raw)
        elif kind == "op":
            value = "!=" if raw == "<>" else raw
        elif kind == "word":
            value = raw.lower()
        found.append((kind, value, match.start(kind)))
        at = match.end()
    return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _tokens(text)
        self.at = 0

    def peek(self, kind: str | None = None, value: Any = None) -> bool:
        if self.at >= len(self.items):
            return False
        k, v, _ = self.items[self.at]
        return (kind is None or k == kind) and (value is None or v == value)

    def take(self, kind: str, value: Any = None, what: str = "") -> Any:
        if not self.peek(kind, value):
            where = f"character {self.items[self.at][2] + 1}" if self.at < len(self.items) else "the end"
            raise FilterError(f"expected {what or value or kind} at {where}")
        self.at += 1
        return self.items[self.at - 1][1]

    def expression(self) -> Node:
        node = self.conjunction()
        while self.peek("word", "or"):
            self.at += 1
            node = Either(node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.peek("word", "and"):
            self.at += 1
            node = Both(node, self.negation())
        return node

    def negation(self) -> Node:
        if self.peek("word", "not"):
            self.at += 1
            return Negated(self.negation())
        if self.peek("punct", "("):
            self.at += 1
            node = self.expression()
            self.take("punct", ")", "')'")
            return node
        return self.comparison()

    def comparison(self) -> Node:
        field = self.take("word", what="a field name")
        if field not in DOCUMENT_FIELDS and field not in CHUNK_COLUMNS:
            known = ", ".join([*DOCUMENT_FIELDS, *CHUNK_COLUMNS])
            raise FilterError(f"unknown field {field!r}; filters know: {known}")
        if self.peek("word", "in"):
            self.at += 1
            self.take("punct", "(", "'('")
            values = [self.value()]
            while self.peek("punct", ","):
                self.at += 1
                values.append(self.value())
            self.take("punct", ")", "')'")
            return Within(field, tuple(values))
        op = self.take("op", what="a comparison (= != < <= > >=)")
        return Compare(field, op, self.value())

    def value(self) -> str | float:
        if self.peek("string") or self.peek("number"):
            self.at += 1
            return self.items[self.at - 1][1]
        raise FilterError("expected a value: a 'quoted string' or a number")


def parse(where: str | Mapping[str, Any]) -> Node:
    """A filter from its text, or from a mapping (``{"organisation": "Apple", "year": (">=",
    2022)}``: every entry must hold)."""
    if isinstance(where, Mapping):
        return _from_mapping(where)
    parser = _Parser(where)
    if not parser.items:
        raise FilterError("the filter is empty")
    node = parser.expression()
    if parser.at != len(parser.items):
        raise FilterError(
            f"unexpected {parser.items[parser.at][1]!r} at character {parser.items[parser.at][2] + 1}"
        )
    return node


def _from_mapping(where: Mapping[str, Any]) -> Node:
    nodes: list[Node] = []
    for field, wanted in where.items():
        text = f"{field} {wanted[0]} 0" if isinstance(wanted, tuple) else f"{field} = 0"
        probe = parse(text)  # the field and operator checked as in text
        assert isinstance(probe, Compare)
        if isinstance(wanted, tuple):
            nodes.append(Compare(probe.field, probe.op, _checked_value(wanted[1])))
        elif isinstance(wanted, (list, set, frozenset)):
            nodes.append(Within(probe.field, tuple(_checked_value(v) for v in wanted)))
        else:
            nodes.append(Compare(probe.field, "=", _checked_value(wanted)))
    if not nodes:
        raise FilterError("the filter is empty")
    node = nodes[0]
    for other in nodes[1:]:
        node = Both(node, other)
    return node


def _checked_value(value: Any) -> str | float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FilterError(f"a filter value must be text or a number, not {type(value).__name__}")
    return value


# ---------------------------------------------------------------- evaluation


def _holds(record: Mapping[str, Any], node: Compare) -> bool:
    field, op, value = node.field, node.op, node.value
    if field in ("period", "year") and isinstance(value, (int, float)):
        have: Any = record.get("year")
    elif field == "organisation" and isinstance(value, str) and op in ("=", "!="):
        keys = {name_key(n) for n in (record.get("names") or [])} | {
            name_key(record.get("organisation") or "")
        }
        same = name_key(value) in keys - {""}
        return same if op == "=" else not same
    else:
        have = record.get(field)
        if isinstance(value, str):
            have, value = (have or "").casefold(), value.casefold()
    if have is None:
        return False
    try:
        return {
            "=": have == value,
            "!=": have != value,
            "<": have < value,
            "<=": have <= value,
            ">": have > value,
            ">=": have >= value,
        }[op]
    except TypeError:
        return False


def _literal(field: str, value: str | float) -> str:
    if CHUNK_COLUMNS[field] == "int":
        if isinstance(value, str):
            raise FilterError(f"{field} is a number; compare it with a number, not {value!r}")
        return repr(int(value)) if float(value).is_integer() else repr(float(value))
    return filter_literal(str(value))


def to_lance(node: Node, records: Iterable[Mapping[str, Any]]) -> str:
    """The filter as LanceDB SQL: document fields as the ids of the records that hold."""
    records = list(records)

    def walk(n: Node) -> str:
        if isinstance(n, Both):
            return f"({walk(n.left)}) AND ({walk(n.right)})"
        if isinstance(n, Either):
            return f"({walk(n.left)}) OR ({walk(n.right)})"
        if isinstance(n, Negated):
            return f"NOT ({walk(n.inner)})"
        if isinstance(n, Within):
            if n.field in DOCUMENT_FIELDS:
                ids = [
                    r["document_id"]
                    for r in records
                    if any(_holds(r, Compare(n.field, "=", v)) for v in n.values)
                ]
                return where_in("document_id", ids)
            return f"{n.field} IN ({', '.join(_literal(n.field, v) for v in n.values)})"
        if n.field in DOCUMENT_FIELDS:
            return where_in("document_id", [r["document_id"] for r in records if _holds(r, n)])
        return f"{n.field} {n.op} {_literal(n.field, n.value)}"

    return walk(node)


def documents_matching(node: Node, records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The documents whose record satisfies a filter over document fields only."""

    def holds(n: Node, record: Mapping[str, Any]) -> bool:
        if isinstance(n, Both):
            return holds(n.left, record) and holds(n.right, record)
        if isinstance(n, Either):
            return holds(n.left, record) or holds(n.right, record)
        if isinstance(n, Negated):
            return not holds(n.inner, record)
        if isinstance(n, Within):
            return any(_holds(record, Compare(n.field, "=", v)) for v in n.values)
        if n.field not in DOCUMENT_FIELDS:
            raise FilterError(
                f"{n.field} is a chunk column; documents are filtered by {', '.join(DOCUMENT_FIELDS)}"
            )
        return _holds(record, n)

    return [r["document_id"] for r in records if holds(node, r)]
