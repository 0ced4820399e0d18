"""No launcher or stage function of the fast path takes more than 8 parameters.

A fast launcher takes its call's inputs as one record (``fast/plan.py``'s ``StateCall`` and ``ScanCall``, the
backward's ``GradCall`` from ``kernels/backward.py``) and its stage's config, never a long row of tensors that
a caller has to line up by position. Counted: positional, keyword-only and ``*args`` parameters, not ``self``
or ``cls`` and not ``**kwargs``; nested functions (a stage returned by a factory) count too. Exempt:

- tile code: functions decorated ``@ct.kernel`` or ``@ct.function``, and the plain helpers they call (cuTile
  compiles them into the kernel: their parameters are the kernel's values, not a host interface);
- ``_example_args`` helpers (a kernel's example arguments for its compile spec);
- ``ssd_forward``, the drop-in public API with mamba_ssm's arguments.

The checker is also run on a small synthetic module that breaks the rule, so that a test that cannot fail is
not mistaken for one that passes.
"""

from __future__ import annotations

import ast
from pathlib import Path

FAST = Path(__file__).resolve().parents[1] / "mamba2_tutorial" / "fast"
MAX_PARAMS = 8
EXEMPT = {"ssd_forward"}
TILE_DECORATORS = ("ct.kernel", "ct.function")

Function = ast.FunctionDef | ast.AsyncFunctionDef


def param_count(fn: Function) -> int:
    """Positional (and positional-only), keyword-only and ``*args`` parameters, less ``self`` / ``cls``."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + ([a.vararg.arg] if a.vararg else [])
    return len([n for n in names if n not in ("self", "cls")])


def _decorated_tile(fn: Function) -> bool:
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(target) in TILE_DECORATORS:
            return True
    return False


def _called_names(fn: Function) -> set[str]:
    """The names a function calls: ``f(...)`` and ``module.f(...)``."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
    return names


def tile_functions(trees: dict[str, ast.Module]) -> set[tuple[str, str]]:
    """``(module, name)`` of the tile code in ``trees``: the decorated kernels and functions, and every
    module-level function of any of the modules that tile code calls, by name, transitively."""
    top = {(mod, node.name): node for mod, tree in trees.items() for node in tree.body
           if isinstance(node, Function)}
    tile = {key for key, fn in top.items() if _decorated_tile(fn)}
    frontier = set(tile)
    while frontier:
        called = set().union(*(_called_names(top[key]) for key in frontier))
        frontier = {key for key in top if key[1] in called} - tile
        tile |= frontier
    return tile


def _functions(body: list[ast.stmt], prefix: str = ""):
    """``(qualified name, node)`` of every function in ``body``, in classes and functions too, in order."""
    for node in body:
        if isinstance(node, Function | ast.ClassDef):
            name = prefix + node.name
            if isinstance(node, Function):
                yield name, node
            yield from _functions(node.body, name + ".")


def too_many_params(trees: dict[str, ast.Module]) -> list[str]:
    """``"module: function (count)"`` for every host function in ``trees`` over :data:`MAX_PARAMS`."""
    tile = tile_functions(trees)
    found = []
    for mod, tree in sorted(trees.items()):
        for qualname, node in _functions(tree.body):
            exempt = node.name in EXEMPT or node.name.endswith("_example_args")
            if exempt or (mod, qualname.split(".")[0]) in tile:
                continue
            count = param_count(node)
            if count > MAX_PARAMS:
                found.append(f"{mod}: {qualname} ({count})")
    return found


def _fast_trees() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(FAST.glob("*.py"))}


def test_no_fast_launcher_takes_more_than_eight_parameters():
    found = too_many_params(_fast_trees())
    assert not found, ("these fast-path functions take more than 8 parameters; pass the call's inputs as one "
                       "record (StateCall, ScanCall, GradCall) and its stage config: " + ", ".join(found))


def test_the_tile_code_found_is_tile_code():
    """The exemption covers the kernels, their ``@ct.function`` helpers and the plain helpers the kernels
    call, and no launcher."""
    tile = {name for _mod, name in tile_functions(_fast_trees())}
    assert {"state_grads_fused_kernel", "chunk_scan_chunk_kernel", "_row_tile", "inter_chunk_heads",
            "chunk_local_state"} <= tile
    assert not {n for n in tile if n.startswith(("launch", "run_", "kernel_stages", "state_grads_stage"))}


SYNTHETIC = '''
import cuda.tile as ct

@ct.kernel
def big_kernel(a, b, c, d, e, f, g, h, i, j):
    helper(a, b, c, d, e, f, g, h, i)

def helper(a, b, c, d, e, f, g, h, i):
    deeper(a, b, c, d, e, f, g, h, i)

def deeper(a, b, c, d, e, f, g, h, i):
    return a

@ct.function()
def called_tile(a, b, c, d, e, f, g, h, i):
    return a

def launch_row(x, dy, dt_out, dA_cumsum, C, B, states, D, backend):
    return x

def launch_star(call, *tensors, settings=None, **options):
    return call

def launch_keywords(call, settings, *, a, b, c, d, e, f, g):
    return call

def _example_args(a, b, c, d, e, f, g, h, i):
    return a

def ssd_forward(a, b, c, d, e, f, g, h, i):
    return a

class Work:
    def __init__(self, x, dy, dt_out, dA_cumsum, C, B, states, D):
        self.x = x

    def launch(self, a, b, c, d, e, f, g, h, i):
        return a

def factory():
    def stages(x, dt, A, B, C, D, dt_bias, initial_states, o):
        return x
    return stages
'''


def test_the_checker_finds_a_long_row():
    trees = {"synthetic": ast.parse(SYNTHETIC)}
    assert {name for _, name in tile_functions(trees)} == {"big_kernel", "helper", "deeper", "called_tile"}
    assert too_many_params(trees) == ["synthetic: launch_row (9)", "synthetic: launch_keywords (9)",
                                      "synthetic: Work.launch (9)", "synthetic: factory.stages (9)"]
