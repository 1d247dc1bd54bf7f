"""Text of DrawingML charts (in PPTX slides and XLSX drawings): title, kind and the
cached data as a small table, so a chart's numbers are searchable."""

from __future__ import annotations

from dataclasses import dataclass, field

from ingest_pipeline.office.safety import localname, rel_attr

_KINDS = {
    "barChart": "Bar chart",
    "bar3DChart": "Bar chart",
    "lineChart": "Line chart",
    "line3DChart": "Line chart",
    "pieChart": "Pie chart",
    "pie3DChart": "Pie chart",
    "doughnutChart": "Doughnut chart",
    "areaChart": "Area chart",
    "area3DChart": "Area chart",
    "scatterChart": "Scatter chart",
    "bubbleChart": "Bubble chart",
    "radarChart": "Radar chart",
    "stockChart": "Stock chart",
    "surfaceChart": "Surface chart",
    "surface3DChart": "Surface chart",
    "ofPieChart": "Pie chart",
}


@dataclass
class ChartData:
    title: str = ""
    kinds: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)  # header row first

    def caption(self) -> str:
        parts = [self.title] if self.title else []
        parts.append(", ".join(dict.fromkeys(self.kinds)) or "Chart")
        return "\n".join(parts)

    def text(self) -> str:
        lines = [self.caption()]
        lines.extend("\t".join(" ".join(v.split()) for v in row) for row in self.rows)
        return "\n".join(lines)


def _points(node) -> dict[int, str]:
    out: dict[int, str] = {}
    if node is None:
        return out
    for pt in node.iter():
        if localname(pt) != "pt":
            continue
        try:
            idx = int(pt.get("idx") or "0")
        except ValueError:
            continue
        value = next((c.text or "" for c in pt if localname(c) == "v"), "")
        out[idx] = value
    return out


def _child(node, name: str):
    return next((c for c in node if localname(c) == name), None) if node is not None else None


def _rich(node) -> str:
    if node is None:
        return ""
    paragraphs = []
    for p in node.iter():
        if localname(p) == "p":
            paragraphs.append("".join(t.text or "" for t in p.iter() if localname(t) == "t"))
    if paragraphs:
        return "\n".join(x for x in paragraphs if x.strip())
    return " ".join(v.text or "" for v in node.iter() if localname(v) == "v")


def _number(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        return text
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return "%.15g" % value


def read_chart(root) -> ChartData:
    """Chart data from a parsed ``c:chartSpace`` root."""
    data = ChartData()
    chart = _child(root, "chart")
    if chart is None:
        return data
    title = _child(chart, "title")
    if title is not None:
        data.title = _rich(_child(title, "tx")).strip()
    plot = _child(chart, "plotArea")
    categories: dict[int, str] = {}
    series: list[tuple[str, dict[int, str]]] = []
    for group in plot if plot is not None else ():
        kind = _KINDS.get(localname(group))
        if kind is None:
            continue
        data.kinds.append(kind)
        for ser in group:
            if localname(ser) != "ser":
                continue
            name = _rich(_child(ser, "tx")).strip() or f"Series {len(series) + 1}"
            cats = _points(_child(ser, "cat") if _child(ser, "cat") is not None else _child(ser, "xVal"))
            for idx, value in cats.items():
                categories.setdefault(idx, _number(value))
            values = _points(_child(ser, "val") if _child(ser, "val") is not None else _child(ser, "yVal"))
            series.append((name, {i: _number(v) for i, v in values.items()}))
    if series:
        indices = sorted(set(categories) | {i for _n, vals in series for i in vals})
        data.rows.append([""] + [name for name, _vals in series])
        for idx in indices:
            data.rows.append([categories.get(idx, str(idx + 1))] + [vals.get(idx, "") for _n, vals in series])
    return data


def charts_of(package, part: str) -> list[ChartData]:
    """Charts referenced from ``part`` (a drawing or slide) through its relationships."""
    out = []
    for rtype, target, external in package.rels(part).values():
        root = None if external or not rtype.endswith("/chart") else package.optional_xml(target)
        if root is not None:
            out.append(read_chart(root))
    return out


def chart_rel_target(package, part: str, graphic_data) -> str | None:
    """The chart part a ``a:graphicData`` element points at, if it holds a chart."""
    for node in graphic_data.iter():
        if localname(node) == "chart":
            rid = rel_attr(node, "id")
            rel = package.rels(part).get(rid or "")
            if rel and not rel[2] and package.has(rel[1]):
                return rel[1]
    return None
