"""The package's floors, as its imports show them: a module imports from its own part of the package or from
the floors below it, never from a floor above, and no chain of imports comes back to where it started.

    executor  <  runtime  <  reference  <  kernels  <  fast  <  lessons  <  figures, perf, model, exercises
              <  the package root (its lazy public names and the command line)

The runtime stands under both paths and imports neither; the taught kernels import nothing of the fast path.
Every import counts: at module level, inside a function (a lazy import is still a dependency), and
``importlib.import_module`` with a literal name. The checker is run on the package and on a small synthetic
package that breaks each rule, so that a test that cannot fail is not mistaken for one that passes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "mamba2_tutorial"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: each part of the package (a subpackage, or a module of the package root) and its floor; a part may import
#: from its own floor's other parts only where listed in SIDEWAYS
FLOORS: dict[str, int] = {
    "executor": 0,
    "runtime": 1,
    "reference": 2,
    "kernels": 3,
    "fast": 4,
    "lessons": 5,
    "figures": 6, "perf": 6, "model": 6, "exercises": 6,
    "__init__": 7, "__main__": 7,
}

#: imports between two parts of one floor that are allowed: (importer, imported)
SIDEWAYS: set[tuple[str, str]] = set()


def module_files(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """{module name: (file, is a package's __init__)} for every .py file under ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """{module: the package's modules it imports}. ``from p import name`` counts as an import of ``p.name``
    where that is a module, else of ``p``."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            found: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = _absolute(name, is_package, node)
                found = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                found = [node.args[0].value]
            for target in found:
                while target and target not in modules and "." in target:   # a name inside a module
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def part_of(module: str, package: str) -> str:
    """The part of the package a module belongs to: its subpackage, or itself for a module of the root."""
    rest = module.split(".")[1:]
    return rest[0] if rest else "__init__"


def layer_violations(graph: dict[str, set[str]], package: str, floors: dict[str, int],
                     sideways: set[tuple[str, str]] = frozenset()) -> list[str]:
    """Every import from a floor above the importer's, or sideways on one floor without leave; and every
    module of a part that has no floor."""
    problems = []
    for module, targets in sorted(graph.items()):
        here = part_of(module, package)
        if here not in floors:
            problems.append(f"{module}: its part {here!r} has no floor (add it to FLOORS)")
            continue
        for target in sorted(targets):
            there = part_of(target, package)
            if there == here or there not in floors:
                continue   # within one part; a part with no floor is reported on its own
            if floors[there] > floors[here]:
                problems.append(f"{module} (floor {floors[here]}, {here}) imports {target} "
                                f"(floor {floors[there]}, {there}), a floor above")
            elif floors[there] == floors[here] and (here, there) not in sideways:
                problems.append(f"{module} imports {target}: two parts of floor {floors[here]} "
                                f"({here}, {there})")
    return problems


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT, PACKAGE)


def test_every_module_imports_only_from_its_floor_and_below(graph):
    assert len(graph) > 50   # the whole package was read
    problems = layer_violations(graph, PACKAGE, FLOORS, SIDEWAYS)
    assert not problems, "imports against the package's floors:\n" + "\n".join(problems)


def test_no_import_circle(graph):
    cycles = import_cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_package_root_is_its_audience_packages():
    """The root holds the packages a reader looks for by audience, and no loose modules beside ``__init__``
    and ``__main__``: a new module joins one of the floors."""
    entries = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith((".", "__pycache__")))
    loose = [e for e in entries if e.endswith(".py") and e not in ("__init__.py", "__main__.py")]
    assert not loose, f"modules at the package root: {loose}"
    packages = [e for e in entries if (ROOT / e / "__init__.py").exists()]
    assert sorted(packages) == sorted(p for p in FLOORS if not p.startswith("__")), packages
    assert len(entries) <= 14, entries   # the packages, data/, __init__.py and __main__.py


def test_the_taught_kernels_do_not_name_the_fast_path():
    """Beyond imports: the taught kernels do not mention the fast path, in code or in prose (a module name in
    a string is a dependency in disguise, and a learner reading them meets only what they teach)."""
    for path in sorted((ROOT / "kernels").rglob("*.py")):
        text = path.read_text()
        for word in ("mamba2_tutorial.fast", "fast/", "..fast", "fast path"):
            assert word not in text, f"{path.relative_to(ROOT.parent)} mentions {word!r}"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_catches_a_floor_above_a_sideways_import_a_lazy_one_and_a_circle(tmp_path):
    """A synthetic package with one of each fault: the checker reports each, and nothing else."""
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "",
        "runtime/__init__.py": "",
        "runtime/launch.py": "def launch():\n    from ..kernels import forward  # lazy, still upwards\n",
        "kernels/__init__.py": "import importlib\nimportlib.import_module('pkg.fast.specs')\n",
        "kernels/forward.py": "from ..runtime.launch import launch\nfrom . import plan\n",
        "kernels/plan.py": "from .forward import launch\n",
        "fast/__init__.py": "",
        "fast/specs.py": "from ..kernels.forward import launch\n",
        "perf/__init__.py": "",
        "perf/bench.py": "from pkg.figures import draw\n",
        "figures/__init__.py": "",
        "figures/draw.py": "",
        "stray.py": "",
    })
    floors = {"runtime": 1, "kernels": 3, "fast": 4, "perf": 6, "figures": 6, "__init__": 7}
    graph = import_graph(root, "pkg")
    assert graph["pkg.kernels.forward"] == {"pkg.runtime.launch", "pkg.kernels.plan"}
    problems = layer_violations(graph, "pkg", floors)
    assert len(problems) == 4, problems
    assert any("pkg.runtime.launch" in p and "imports pkg.kernels.forward" in p for p in problems)
    assert any(p.startswith("pkg.kernels (floor 3") and "pkg.fast.specs" in p for p in problems)
    assert any("pkg.perf.bench imports pkg.figures.draw: two parts of floor 6" in p for p in problems)
    assert any("pkg.stray" in p and "no floor" in p for p in problems)
    upwards = [p for p in problems if "a floor above" in p]
    assert len(upwards) == 2
    assert layer_violations(graph, "pkg", {**floors, "stray": 7}, {("perf", "figures")}) == upwards
    assert import_cycles(graph) == [["pkg.kernels.forward", "pkg.kernels.plan", "pkg.runtime.launch"]]
