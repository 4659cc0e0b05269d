"""The shape of lethe_core (docs/architecture.md): wings on floors, no import cycles, thin package faces.

Static only: every `.py` under lethe_core/ is parsed, nothing is imported, so no model loads. Imports inside
functions count (a lazy import is still an edge at run time); imports under `if TYPE_CHECKING:` do not.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "lethe_core"
ROOT = REPO / PACKAGE

# A module may import only from its own wing or from a wing on a lower floor. Keep in step with the table in
# docs/architecture.md (test_doc_table_matches_floors).
FLOORS = {
    "util": 1,
    "datasets": 2,
    "inference": 2,
    "measures": 3,
    "enrichment": 3,
    "retrieval": 4,
    "rerankers": 5,
    "pools": 6,
    "rif": 7,
    "mechanisms": 8,
    "results": 9,
    "experiments": 10,
    "report": 11,
    "cli": 12,
}
# Modules directly under lethe_core/ that sit above every wing: the public API and `python -m lethe_core`.
TOP = ("__init__", "__main__")
MAX_TOP_LEVEL_MODULES = 3  # besides TOP
# A wing's __init__ re-exports its own wing only. Where the face holds code of its own that needs a lower wing,
# the import is listed here with the reason; it still may not appear in the face's __all__.
FACE_EXCEPTIONS = {
    "datasets": {"util": "the dataset registry, `load_dataset`, lives in the face and reads default paths"},
}


# --- the checker: takes any package root, so the tests below can run it on a fake package too ---------------

@dataclass(frozen=True)
class Edge:
    source: str  # importing module (a package stands for its __init__)
    target: str  # module or package __init__ executed by the import
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def modules(root: Path, package: str | None = None) -> dict[str, Path]:
    """Every module of the package at `root`, dotted name -> file; a regular package is its `__init__.py`."""
    package = package or root.name
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if any(not p.isidentifier() for p in parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Import statements anywhere in the tree (functions included), skipping `if TYPE_CHECKING:` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The dotted modules one import statement names: `import a.b` names a.b; `from a import n` names a, and
    a.n when n is a submodule."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base_parts = module.split(".") if is_package else module.split(".")[:-1]
        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = [base]
    names += [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    return names


def import_edges(root: Path, package: str | None = None) -> list[Edge]:
    """What importing each module executes inside the package. Importing `p.x.y` runs `p.x`'s `__init__` and
    then `p.x.y`, so it gives an edge to each, except to the importer's own ancestors (already running) and to
    the root package (the public API, loaded before anything else)."""
    package = package or root.name
    mods = modules(root, package)
    known = set(mods)
    edges: set[Edge] = set()
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _import_nodes(tree):
            for name in _imported_names(node, module, is_package, known):
                parts = name.split(".")
                if parts[0] != package:
                    continue
                for i in range(2, len(parts) + 1):
                    target = ".".join(parts[:i])
                    if target not in known or target == module or module.startswith(target + "."):
                        continue
                    edges.add(Edge(module, target, node.lineno))
    return sorted(edges, key=lambda e: (e.source, e.target, e.line))


def import_cycles(root: Path, package: str | None = None) -> list[list[str]]:
    """Strongly connected components of the import graph with more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {m: set() for m in modules(root, package)}
    for e in import_edges(root, package):
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (~100)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def wing(module: str) -> str | None:
    """`lethe_core.<wing>...` -> wing; the root package and TOP modules have none."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in TOP):
        return None
    return parts[1]


def floor_violations(edges: list[Edge], floors: dict[str, int]) -> list[str]:
    bad = []
    for e in edges:
        src, dst = wing(e.source), wing(e.target)
        if src is None or src == dst:
            continue
        if dst is None or src not in floors or dst not in floors or floors[dst] >= floors[src]:
            bad.append(f"{e}: {src} (floor {floors.get(src, '?')}) may not import {dst} (floor {floors.get(dst, '?')})")
    return bad


# --- the real package ----------------------------------------------------------------------------------------

EDGES = import_edges(ROOT)


def test_no_import_cycles():
    cycles = import_cycles(ROOT)
    detail = []
    for cycle in cycles:
        members = set(cycle)
        detail.append(" <-> ".join(cycle) + "\n    " + "\n    ".join(
            str(e) for e in EDGES if e.source in members and e.target in members))
    assert not cycles, "import cycles in lethe_core (imports inside functions count):\n  " + "\n  ".join(detail)


def test_every_module_belongs_to_a_wing():
    unplaced = sorted(m for m in modules(ROOT) if wing(m) is not None and wing(m) not in FLOORS)
    assert not unplaced, f"modules outside every wing (add the wing to FLOORS and docs/architecture.md): {unplaced}"


def test_imports_go_down_the_floors():
    bad = floor_violations(EDGES, FLOORS)
    assert not bad, "imports up or across the floors (docs/architecture.md):\n  " + "\n  ".join(bad)


def _face_reexports(face: str) -> list[str]:
    """Names in a face's `__all__` that it imports from another lethe_core wing."""
    path = modules(ROOT)[face]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported: set[str] = set()
    foreign: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported |= {c.value for c in ast.walk(node.value)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith(PACKAGE + "."):
            if wing(node.module) != wing(face):
                foreign.update({a.asname or a.name: node.module for a in node.names})
    return sorted(f"{name} (from {foreign[name]})" for name in exported & set(foreign))


def test_package_faces_reexport_their_own_wing_only():
    """`lethe_core/<wing>/__init__.py` imports only its own wing (FACE_EXCEPTIONS: for its own code, never
    re-exported); the root __init__ is the public API and may import any wing."""
    faces = [m for m in modules(ROOT) if m.count(".") == 1 and wing(m) is not None]
    bad = [str(e) for e in EDGES if e.source in faces and wing(e.target) != wing(e.source)
           and wing(e.target) not in FACE_EXCEPTIONS.get(wing(e.source), {})]
    assert not bad, "package faces importing another wing:\n  " + "\n  ".join(bad)
    reexported = {face: r for face in faces if (r := _face_reexports(face))}
    assert not reexported, f"package faces re-exporting another wing's names: {reexported}"


def test_few_top_level_modules():
    top = sorted(p.stem for p in ROOT.glob("*.py") if p.stem not in TOP)
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"modules directly under lethe_core/ (put them in a wing): {top}"


def _mechanisms_doc() -> str:
    return ast.get_docstring(ast.parse((ROOT / "mechanisms" / "__init__.py").read_text(encoding="utf-8"))) or ""


def test_every_mechanism_is_in_the_package_table():
    doc = _mechanisms_doc()
    listed = set(re.findall(r"^\|\s*`(\w+)`\s*\|", doc, flags=re.M))
    present = {p.stem for p in (ROOT / "mechanisms").glob("*.py") if p.stem != "__init__"}
    missing = sorted(present - listed)
    assert not missing, f"mechanisms missing from lethe_core/mechanisms/__init__.py's table: {missing}"
    assert listed <= present, f"the mechanisms table names modules that do not exist: {sorted(listed - present)}"


def test_mechanism_table_notebooks_exist():
    paths = set(re.findall(r"`(notebooks/[\w./-]+)`", _mechanisms_doc()))
    assert paths, "the mechanisms table names no notebook"
    missing = sorted(p for p in paths if not (REPO / p).is_file())
    assert not missing, f"notebooks named in the mechanisms table that do not exist: {missing}"


def test_doc_table_matches_floors():
    """docs/architecture.md's floors table is the same as FLOORS: | floor | wing | ... |."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    doc: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|\s*`?(\w+)`?\s*\|", line)
        if m:
            doc[m.group(2)] = int(m.group(1))
    assert doc == FLOORS


# --- the checker catches what it should ----------------------------------------------------------------------

def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fakepkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_checker_finds_a_lazy_import_cycle(tmp_path):
    root = _fake_package(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from fakepkg.high import b\n    return b\n",  # lazy, still an edge
        "high/__init__.py": "",
        "high/b.py": "from ..low.a import f\n",  # relative
        "high/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fakepkg.low import a\n",
    })
    assert import_cycles(root) == [["fakepkg.high.b", "fakepkg.low.a"]]
    edges = {(e.source, e.target) for e in import_edges(root)}
    assert ("fakepkg.low.a", "fakepkg.high") in edges  # the package __init__ runs too
    assert ("fakepkg.high.b", "fakepkg.low") in edges
    assert not any(e[0] == "fakepkg.high.c" for e in edges)  # TYPE_CHECKING is exempt
    assert not any(e[1] == "fakepkg" for e in edges)  # never the root
    bad = floor_violations(import_edges(root), {"low": 1, "high": 2})
    assert len(bad) == 2 and all(b.startswith("fakepkg.low.a -> fakepkg.high") for b in bad)


def test_checker_counts_package_inits_but_not_ancestors(tmp_path):
    # x/__init__ imports x.m, which imports y.n; y/__init__ imports x (an __init__-level cycle) -> found.
    root = _fake_package(tmp_path, {
        "__init__.py": "from fakepkg.x import m\n",
        "x/__init__.py": "from . import m\n",
        "x/m.py": "import fakepkg.y.n\nfrom fakepkg.x import k\n",  # own ancestor x: no edge to x
        "x/k.py": "",
        "y/__init__.py": "from fakepkg.x.k import *\n",
        "y/n.py": "",
    })
    edges = {(e.source, e.target) for e in import_edges(root)}
    assert ("fakepkg.x", "fakepkg.x.m") in edges
    assert ("fakepkg.x.m", "fakepkg.y") in edges and ("fakepkg.x.m", "fakepkg.y.n") in edges
    assert ("fakepkg.x.m", "fakepkg.x") not in edges and ("fakepkg.x.m", "fakepkg.x.k") in edges
    assert ("fakepkg.y", "fakepkg.x") in edges
    assert import_cycles(root) == [["fakepkg.x", "fakepkg.x.m", "fakepkg.y"]]


def test_checker_passes_a_clean_package(tmp_path):
    root = _fake_package(tmp_path, {
        "__init__.py": "from fakepkg.high.b import g\n",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    return 1\n",
        "high/__init__.py": "",
        "high/b.py": "def g():\n    from fakepkg.low.a import f\n    return f()\n",
    })
    assert import_cycles(root) == []
    assert floor_violations(import_edges(root), {"low": 1, "high": 2}) == []

