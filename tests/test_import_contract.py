"""The import contract of docs/design.md (Layers): every module of gpusim/ imports only its own layer or the
layers below, and no modules import each other in a cycle. Imports inside functions and under TYPE_CHECKING
count as much as those at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "gpusim"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("gpusim.errors",)),
    ("specs", ("gpusim.specs",)),
    ("perf", ("gpusim.perf",)),
    ("loadgen", ("gpusim.loadgen",)),
    ("sim", ("gpusim.sim",)),
    ("analysis", ("gpusim.analysis",)),
    ("setup", ("gpusim.defaults", "gpusim.items", "gpusim.deploy", "gpusim.build", "gpusim.simulation",
               "gpusim.run_length", "gpusim.parallel")),
    ("search", ("gpusim.search", "gpusim.best", "gpusim.submission", "gpusim.frontier")),
    ("validate", ("gpusim.validate",)),
    ("calibrate", ("gpusim.calibrate", "gpusim.fit_lengths")),
    ("api", ("gpusim.api", "gpusim.sweep", "gpusim.compare", "gpusim.plan")),
    ("interface", ("gpusim.commands", "gpusim.cli", "gpusim")),
]
"""Lowest first: a module may import its own layer and those above it in this list, never one below."""


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """The index of the layer whose longest prefix names `module` (None if no layer does); a prefix covers its
    submodules, except the root package `gpusim`, which covers only itself."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            covers = module == prefix or (prefix != "gpusim" and module.startswith(prefix + "."))
            if covers and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The gpusim modules `source` imports anywhere in its body; `from pkg import mod` names the module."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "gpusim"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "gpusim":
                continue
            subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known}
            found |= subs if len(subs) == len(node.names) else {target, *subs}
    found.discard(module)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the gpusim modules it imports, for every .py file under `root`."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    return {m: imports_of(p.read_text(), m, p.name == "__init__.py", known) for m, p in files.items()}


def layer_violations(graph: dict[str, set[str]], layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """One line per module outside every layer and per import of a higher layer."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module, layers)
        if mine is None:
            out.append(f"{module} is in no layer (add it to LAYERS and to docs/design.md)")
            continue
        for target in sorted(targets):
            theirs = layer_of(target, layers)
            if theirs is not None and theirs > mine:
                out.append(f"{module} ({layers[mine][0]}) imports {target} ({layers[theirs][0]})")
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle of imports (one per strongly connected group of modules, as a path back to its start)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_path(graph, set(group)) for group in groups]


def _cycle_path(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path from the group's first module through the group back to it."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return sorted(group)


# ---- the contract ------------------------------------------------------------------------------------------
def test_every_import_goes_down_the_layers() -> None:
    bad = layer_violations(import_graph())
    assert not bad, "imports against docs/design.md's layer order:\n" + "\n".join(bad)


def test_no_module_imports_take_part_in_a_cycle() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_graph_sees_every_module_and_function_level_imports() -> None:
    graph = import_graph()
    assert {"gpusim.sim.records", "gpusim.validate.silicon", "gpusim.cli", "gpusim"} <= set(graph)
    assert "gpusim.loadgen.metrics" in graph["gpusim.sim.records"]
    assert "gpusim.calibrate.kernels" in graph["gpusim.calibrate.fit"]  # `from gpusim.calibrate import kernels`
    assert "gpusim.search" in graph["gpusim.api"]  # imported inside a function


# ---- the checker can fail ----------------------------------------------------------------------------------
def test_a_function_level_import_of_a_higher_layer_is_reported() -> None:
    source = "def f():\n    from gpusim.analysis.metrics import summarize\n    return summarize\n"
    graph = {"gpusim.sim.records": imports_of(source, "gpusim.sim.records", False, {"gpusim.analysis.metrics"}),
             "gpusim.analysis.metrics": set()}
    assert layer_violations(graph) == ["gpusim.sim.records (sim) imports gpusim.analysis.metrics (analysis)"]


def test_a_module_in_no_layer_is_reported() -> None:
    assert layer_violations({"gpusim.newthing": set()}) == [
        "gpusim.newthing is in no layer (add it to LAYERS and to docs/design.md)"]


@pytest.mark.parametrize("graph, cycle", [
    ({"gpusim.calibrate.fit": {"gpusim.validate.silicon"}, "gpusim.validate.silicon": {"gpusim.calibrate.fit"}},
     ["gpusim.calibrate.fit", "gpusim.validate.silicon", "gpusim.calibrate.fit"]),
    ({"gpusim.sim.a": {"gpusim.sim.b"}, "gpusim.sim.b": {"gpusim.sim.c"}, "gpusim.sim.c": {"gpusim.sim.a"},
      "gpusim.sim.d": {"gpusim.sim.a"}},
     ["gpusim.sim.a", "gpusim.sim.b", "gpusim.sim.c", "gpusim.sim.a"]),
])
def test_an_import_cycle_is_reported_as_a_path(graph: dict[str, set[str]], cycle: list[str]) -> None:
    assert import_cycles(graph) == [cycle]


def test_a_relative_import_resolves_to_its_module() -> None:
    known = {"gpusim.sim.instance", "gpusim.sim.records"}
    assert imports_of("from .records import Records\nfrom . import instance\n", "gpusim.sim.cluster", False,
                      known) == {"gpusim.sim.records", "gpusim.sim.instance"}
