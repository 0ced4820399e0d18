"""Shape tables for the notebooks: every tensor, its shape in math names and in numbers, checked.

``shape_table(dims, rows)`` checks that each tensor has the shape its symbolic description says (raising
``AssertionError`` naming the tensor otherwise) and displays as a Markdown table in Jupyter (plain text
elsewhere)::

    shape_table(shape.dims, [("x", x, "(b, l, h, p)", "input, p channels per head"),
                             ("A", A, "(h,)", "one scalar decay rate per head")])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ShapeTable", "shape_table", "parse_dims"]


def parse_dims(spec: str) -> list[str]:
    """``"(b, l, h, p)"`` -> ``["b", "l", "h", "p"]``; ``"(h,)"`` -> ``["h"]``; ``"()"`` -> ``[]``.

    Each entry is a dimension name (looked up in ``dims``) or an integer literal.
    """
    inner = spec.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise ValueError(f"shape spec must look like '(b, l, h)', got {spec!r}")
    parts = [part.strip() for part in inner[1:-1].split(",")]
    parts = [part for part in parts if part]
    for part in parts:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*|\d+", part):
            raise ValueError(f"bad dimension {part!r} in shape spec {spec!r}")
    return parts


@dataclass
class ShapeTable:
    """Checked rows of (name, symbolic shape, numeric shape, dtype, meaning)."""

    rows: list[tuple[str, str, tuple[int, ...], str, str]]

    def _repr_markdown_(self) -> str:
        lines = ["| tensor | shape | sizes | dtype | meaning |", "|---|---|---|---|---|"]
        for name, spec, sizes, dtype, meaning in self.rows:
            lines.append(f"| `{name}` | {spec} | {tuple(sizes)} | {dtype} | {meaning} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        cols = list(zip(*[(n, s, str(tuple(z)), d, m) for n, s, z, d, m in self.rows])) or [[]] * 5
        heads = ("tensor", "shape", "sizes", "dtype", "meaning")
        widths = [max([len(h), *(len(v) for v in col)]) for h, col in zip(heads, cols)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*heads)]
        out += [fmt.format(n, s, str(tuple(z)), d, m) for n, s, z, d, m in self.rows]
        return "\n".join(line.rstrip() for line in out)

    __repr__ = __str__


def shape_table(dims: Mapping[str, int], rows: Sequence[tuple]) -> ShapeTable:
    """Check and tabulate tensors. ``rows``: ``(name, tensor, "(b, l, h, p)", meaning)`` tuples (the meaning
    may be omitted). ``dims`` maps each dimension name to its size (e.g. ``SSDShape.dims`` plus ``"c"``).

    Raises AssertionError naming the tensor and both shapes when a tensor does not match its description, and
    KeyError naming an unknown dimension.
    """
    checked = []
    for row in rows:
        if len(row) not in (3, 4):
            raise ValueError(f"each row is (name, tensor, spec[, meaning]), got {row!r}")
        name, tensor, spec = row[:3]
        meaning = row[3] if len(row) == 4 else ""
        names = parse_dims(spec)
        expected = []
        for dim in names:
            if dim.isdigit():
                expected.append(int(dim))
            elif dim in dims:
                expected.append(int(dims[dim]))
            else:
                raise KeyError(f"{name}: dimension {dim!r} of {spec} is not in dims {dict(dims)}")
        actual = tuple(int(s) for s in getattr(tensor, "shape", ()))
        if actual != tuple(expected):
            raise AssertionError(
                f"{name} should have shape {spec} = {tuple(expected)}, but has shape {actual}"
            )
        dtype = str(getattr(tensor, "dtype", type(tensor).__name__)).replace("torch.", "")
        checked.append((name, spec, actual, dtype, meaning))
    return ShapeTable(checked)
