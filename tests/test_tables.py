"""shape_table checks every tensor's shape against its math description and renders a table."""

from __future__ import annotations

import pytest
import torch

from mamba2_tutorial.figures.tables import parse_dims, shape_table

DIMS = {"b": 2, "l": 37, "h": 6, "p": 5, "n": 7}


def test_rows_are_checked_and_rendered():
    x = torch.zeros(2, 37, 6, 5)
    A = torch.zeros(6, dtype=torch.float64)
    rows = [("x", x, "(b, l, h, p)", "input"), ("A", A, "(h,)"), ("s", torch.zeros(3), "(3,)")]
    table = shape_table(DIMS, rows)
    assert [r[0] for r in table.rows] == ["x", "A", "s"]
    assert table.rows[0][2] == (2, 37, 6, 5) and table.rows[1][3] == "float64"
    md = table._repr_markdown_()
    assert md.splitlines()[0].startswith("| tensor | shape |")
    assert "| `x` | (b, l, h, p) | (2, 37, 6, 5) | float32 | input |" in md
    text = str(table)
    assert text.splitlines()[0].split() == ["tensor", "shape", "sizes", "dtype", "meaning"]
    assert "(b, l, h, p)" in text and "(2, 37, 6, 5)" in text


def test_wrong_shape_names_the_tensor():
    expected = r"x should have shape \(b, l, h, p\) = \(2, 37, 6, 5\).*\(2, 37, 5, 6\)"
    with pytest.raises(AssertionError, match=expected):
        shape_table(DIMS, [("x", torch.zeros(2, 37, 5, 6), "(b, l, h, p)")])
    with pytest.raises(AssertionError, match="rank"):
        shape_table(DIMS, [("rank", torch.zeros(2, 37), "(b, l, h)")])


def test_bad_specs():
    assert parse_dims("(b, l, h)") == ["b", "l", "h"]
    assert parse_dims("(h,)") == ["h"] and parse_dims("()") == []
    with pytest.raises(ValueError, match="spec"):
        parse_dims("b, l")
    with pytest.raises(ValueError, match="bad dimension"):
        parse_dims("(b, l-1)")
    with pytest.raises(KeyError, match="'q'"):
        shape_table(DIMS, [("x", torch.zeros(2), "(q,)")])
