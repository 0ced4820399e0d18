"""Loop-carried and branch-merged variables become strictly typed, as in cuTile.

cuTile compiles ``for i in range(...)``, ``while`` and an ``if`` on a run-time condition into control flow
whose carried/merged values have ONE type. A Python number flowing into such a variable loses its loose
typing: after

    acc = 0.0
    for i in range(n):
        acc = acc + h16          # h16: a float16 scalar

``acc`` is float32 throughout on the GPU (``0.0`` became a strict float32), whereas plain Python would make it
float16 (a loose ``0.0`` adopts the other operand's dtype). Likewise ``v = 1 if c else 2`` (or the same
written as an ``if`` statement) on a run-time ``c`` gives a strict int32 ``v``.

This module rewrites the kernel's source (same file name and line numbers) so that the variables a loop
assigns are made strict at the top of each iteration and after the loop, and the variables an ``if`` assigns
are made strict after it when its condition was a run-time value (a tile). ``ct.static_iter`` loops are
unrolled by cuTile and left alone. Functions whose source is unavailable run unchanged.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import CodeType, FunctionType

import numpy as np

from ._tile import Tile, scalar_tile

__all__ = ["make_strict", "is_runtime", "transformed_code", "RUNTIME_HELPERS"]

_STRICT = "__cpu_tile_strict__"
_RUNTIME = "__cpu_tile_is_runtime__"
_IFEXP = "__cpu_tile_ifexp__"


def make_strict(v):
    """A loosely typed constant as cuTile types it when it is carried: int32/int64, float32 or bool tile."""
    import cuda.tile as ct

    if isinstance(v, bool):
        return scalar_tile(v, ct.bool_)
    if isinstance(v, int):
        return scalar_tile(v, ct.int32 if -(2**31) <= v < 2**31 else ct.int64)
    if isinstance(v, float):
        return scalar_tile(v, ct.float32)
    if isinstance(v, Tile) and v._loose:
        return Tile(np.array(v._a), v._dt)
    if isinstance(v, tuple):
        return tuple(make_strict(x) for x in v)
    return v


def is_runtime(cond) -> bool:
    """True when an ``if`` condition is a run-time value (a tile), i.e. cuTile emits a branch, not a fold."""
    return isinstance(cond, Tile)


def ifexp(cond, if_true, if_false):
    """``a if c else b``: on a run-time condition cuTile merges both values, so a constant becomes strict."""
    v = if_true() if cond else if_false()
    return make_strict(v) if is_runtime(cond) else v


RUNTIME_HELPERS = {_STRICT: make_strict, _RUNTIME: is_runtime, _IFEXP: ifexp}


def _stored_names(stmts) -> list[str]:
    """Names assigned in ``stmts`` (not inside nested functions, lambdas or classes), in first-seen order."""
    names: dict[str, None] = {}

    def visit(node):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.setdefault(node.id, None)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return [n for n in names if not n.startswith("__cpu_tile")]


def _strict_stmts(names, at: ast.AST) -> list[ast.stmt]:
    """``try: v = strict(v) except NameError: pass`` for each name (a name may not be bound yet)."""
    out = []
    for n in names:
        call = ast.Call(ast.Name(_STRICT, ast.Load()), [ast.Name(n, ast.Load())], [])
        body = [ast.Assign([ast.Name(n, ast.Store())], call)]
        handler = ast.ExceptHandler(ast.Name("NameError", ast.Load()), None, [ast.Pass()])
        stmt = ast.Try(body, [handler], [], [])
        out.append(ast.copy_location(stmt, at))
    return out


def _is_static_iter(node: ast.For) -> bool:
    it = node.iter
    if isinstance(it, ast.Call):
        f = it.func
        return (isinstance(f, ast.Attribute) and f.attr == "static_iter") or (
            isinstance(f, ast.Name) and f.id == "static_iter"
        )
    return False


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.changed = False
        self._n = 0

    def _loop(self, node):
        self.generic_visit(node)
        names = _stored_names(node.body)
        if isinstance(node, ast.For):
            names = [n for n in names if n not in _stored_names([node.target])]
        if not names:
            return node
        self.changed = True
        node.body = _strict_stmts(names, node.body[0]) + node.body
        return [node, *_strict_stmts(names, node)]

    def visit_For(self, node: ast.For):
        if _is_static_iter(node):
            self.generic_visit(node)
            return node
        return self._loop(node)

    def visit_While(self, node: ast.While):
        return self._loop(node)

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        self.changed = True

        def thunk(expr):
            no_args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                    kwarg=None, defaults=[])
            return ast.Lambda(no_args, expr)

        call = ast.Call(ast.Name(_IFEXP, ast.Load()), [node.test, thunk(node.body), thunk(node.orelse)], [])
        return ast.copy_location(call, node)

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        names = _stored_names(node.body + node.orelse)
        if not names:
            return node
        self.changed = True
        self._n += 1
        cond_var = f"__cpu_tile_cond_{self._n}"
        assign = ast.copy_location(ast.Assign([ast.Name(cond_var, ast.Store())], node.test), node)
        node.test = ast.Name(cond_var, ast.Load())
        check = ast.Call(ast.Name(_RUNTIME, ast.Load()), [ast.Name(cond_var, ast.Load())], [])
        after = ast.copy_location(ast.If(check, _strict_stmts(names, node), []), node)
        return [assign, node, after]


_CACHE: dict[CodeType, CodeType | None] = {}


def transformed_code(fn: FunctionType) -> CodeType | None:
    """Code of a module defining ``__cpu_tile_outer__(*freevars)`` that returns the rewritten ``fn``; None
    when there is nothing to rewrite or the source is unavailable. Cached per code object."""
    code = fn.__code__
    if code in _CACHE:
        return _CACHE[code]
    result = None
    try:
        if fn.__name__ != "<lambda>" and "__class__" not in code.co_freevars:
            result = _transform(fn)
    except (OSError, TypeError, SyntaxError, IndexError):
        result = None
    _CACHE[code] = result
    return result


def _transform(fn: FunctionType) -> CodeType | None:
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != fn.__name__:
        return None
    rw = _Rewriter()
    fdef = rw.visit(fdef)
    if not rw.changed:
        return None
    fdef.decorator_list = []
    ast.increment_lineno(fdef, fn.__code__.co_firstlineno - 1)
    freevars = list(fn.__code__.co_freevars)
    outer = ast.FunctionDef(
        name="__cpu_tile_outer__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(v) for v in freevars], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=[fdef, ast.Return(ast.Name(fn.__name__, ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    if "type_params" in ast.FunctionDef._fields:
        outer.type_params = []
    ast.copy_location(outer, fdef)
    module = ast.fix_missing_locations(ast.Module([outer], []))
    import __future__

    flags = 0
    for feature in __future__.all_feature_names:
        f = getattr(__future__, feature)
        if fn.__code__.co_flags & f.compiler_flag:
            flags |= f.compiler_flag
    return compile(module, fn.__code__.co_filename, "exec", flags=flags, dont_inherit=True)
