"""The house's rules, checked on the package's own source: no import circle (function-local
imports count), a short top level, no module over 500 lines without a reason, and no
function over 80 lines outside the parsers."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ingest_pipeline"
NAME = PACKAGE.name


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports anywhere in its source (top level, inside
    functions, under ``TYPE_CHECKING``): ``from a import b`` counts as ``a.b`` when that is
    a module, else as ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in known:
                    found.add(full)
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter
                    counter += 1
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_the_package_has_no_import_circle_counting_function_local_imports():
    assert circles(import_graph()) == []


def test_the_circle_finder_sees_a_circle_hidden_in_a_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def late():\n    from pkg import c\n")
    (package / "c.py").write_text("from pkg.a import thing\n")
    (package / "d.py").write_text("from pkg import a\n")
    assert circles(import_graph(package)) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_at_most_three_modules_are_over_500_lines():
    long = [p.name for p in PACKAGE.rglob("*.py") if p.read_text(encoding="utf-8").count("\n") > 500]
    assert len(long) <= 3, long


def test_the_top_level_holds_at_most_thirteen_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 13, top


def test_a_module_over_500_lines_says_why_in_its_docstring():
    """Its docstring has a sentence on its length ("... 500 lines: why")."""
    silent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 500 and "500 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            silent.append(str(path.relative_to(PACKAGE)))
    assert not silent, f"over 500 lines, and the docstring gives no reason: {silent}"


# The parsers: one pass over a format's raw structure each, read best top to bottom.
PARSERS = {"layout/pdfium_text.py", "layout/ruled_tables.py", "office/xlsx.py"}


def long_functions(root: Path = PACKAGE, limit: int = 80) -> list[str]:
    """Functions (methods and nested ones too) longer than ``limit`` lines, parsers aside."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if str(path.relative_to(root)) in PARSERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_no_function_outside_the_parsers_is_over_80_lines():
    assert not long_functions(), long_functions()


def test_the_length_rule_sees_a_long_nested_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(85))
    (tmp_path / "m.py").write_text(f"def outer():\n    def inner():\n{body}\n    return inner\n")
    assert [f.split()[-1] for f in long_functions(tmp_path)] == ["outer", "inner"]
