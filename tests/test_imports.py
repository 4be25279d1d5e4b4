"""The import structure of src/csebench: every module imports, no import cycle (read from the
source: every import statement, at module level or inside a function, since a late import still ties
two modules together), and the reporting package's layering (renderers are loaded by name: no module of
csebench.results imports one, and no renderer imports another)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def modules(src: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) of every module under ``src``."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def import_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``src`` it imports (``from pkg import name`` counts as pkg.name where
    that is a module, else as pkg)."""
    mods = modules(src)
    graph = {}
    for name, (path, package) in mods.items():
        here = name if package else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")[:len(here.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                if target in mods:
                    edges |= {f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names}
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_imports():
    for name in modules(SRC):
        if name != "csebench.__main__":  # runs the CLI
            importlib.import_module(name)


def test_no_import_cycle():
    assert cycles(import_graph(SRC)) == []


def test_the_check_sees_a_cycle_through_a_late_import(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")  # inside a function
    (pkg / "c.py").write_text("import p.a\n")
    graph = import_graph(tmp_path)
    assert graph["p.a"] == {"p.sub.b"} and graph["p.sub.b"] == {"p.a"} and graph["p.c"] == {"p.a"}
    assert cycles(graph) == [["p.a", "p.sub.b"]]


def test_renderers_are_loaded_by_name_only():
    graph = import_graph(SRC)
    renderers = {m for m in graph if m.startswith("csebench.results.renderers.")}
    assert renderers, "no renderer modules found"
    for module, edges in graph.items():
        imported = edges & renderers
        if module in renderers:
            assert not imported, f"renderer {module} imports another renderer: {sorted(imported)}"
        else:
            assert not imported, f"{module} imports a renderer ({sorted(imported)}): load it through csebench.results.render"


@pytest.mark.parametrize("name", ["grid", "sweep", "curves", "seeds", "analysis", "model_analysis", "retrieved_sentences", "suite"])
def test_every_renderer_name_loads(name):
    from csebench.results.context import Renderer
    from csebench.results.render import get

    assert isinstance(get(name), Renderer)


ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def layer_table() -> list[tuple[str, list[str]]]:
    """docs/architecture.md's layers, top to bottom: (layer, its modules and packages under src/csebench)."""
    rows = []
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[1].startswith("`"):
            rows.append((cells[0], [m.strip("` /") for m in cells[1].split(",")]))
    return rows


def layer_of(table: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Every module of src/csebench -> its layer's depth (0 = top), from the packages and modules the table names."""
    where = {}
    for depth, (_, members) in enumerate(table):
        for m in members:
            where["csebench" if m == "__init__" else f"csebench.{m}"] = depth
    out = {}
    for name in modules(SRC):
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            if ".".join(parts[:k]) in where and (k > 1 or name == "csebench"):
                out[name] = where[".".join(parts[:k])]
                break
    return out


def test_the_layer_table_places_every_module():
    table = layer_table()
    assert [layer for layer, _ in table][:1] == ["entry"] and table[-1][0] == "core", table
    placed = layer_of(table)
    unplaced = sorted(set(modules(SRC)) - set(placed))
    assert not unplaced, (f"modules of src/csebench that docs/architecture.md's layer table does not place: {unplaced}; "
                          "put the module in a package of the table (or name it in the table's row)")
    top_level = {n for n, (path, package) in modules(SRC).items() if n.count(".") == 1 and not package}
    assert len(top_level) <= 5, f"top-level modules beside the packages: {sorted(top_level)}"


def test_no_module_imports_a_layer_above_its_own():
    depth = layer_of(layer_table())
    names = [layer for layer, _ in layer_table()]
    upward = [f"{m} ({names[depth[m]]}) imports {t} ({names[depth[t]]})"
              for m, edges in sorted(import_graph(SRC).items()) for t in sorted(edges) if depth[t] < depth[m]]
    assert not upward, "imports that run up the layers of docs/architecture.md:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch):
    pkg = tmp_path / "csebench"
    for sub in ("core", "study"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "io.py").write_text("def f():\n    from csebench.study import params\n")
    (pkg / "study" / "params.py").write_text("from csebench.core import io\n")
    (pkg / "stray.py").write_text("")
    doc = tmp_path / "architecture.md"
    doc.write_text("| Layer | Modules | What |\n|---|---|---|\n| entry | `__init__` | x |\n| study | `study/` | x |\n"
                   "| core | `core/` | x |\n")
    import sys

    mod = sys.modules[__name__]
    monkeypatch.setattr(mod, "SRC", tmp_path)
    monkeypatch.setattr(mod, "ARCHITECTURE", doc)
    with pytest.raises(AssertionError, match=r"csebench.core.io \(core\) imports csebench.study.params \(study\)"):
        test_no_module_imports_a_layer_above_its_own()
    with pytest.raises(AssertionError, match=r"does not place: \['csebench.stray'\]"):
        test_the_layer_table_places_every_module()
