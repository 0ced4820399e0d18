"""Numbered callouts beside kernel sources: placed on the right lines, refused when ambiguous, and in the
notebooks explained one by one in the markdown cell that follows each listing."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from mamba2_tutorial.lessons.callouts import (
    ALIGN,
    MARKERS,
    CalloutListing,
    marker,
    place_callouts,
    show_callouts,
    show_source,
)

ROOT = Path(__file__).resolve().parents[1]
TEXT = "def f(a):\n    b = a + 1\n    c = b * 2\n    d = c - b\n    return d\n"


def _sample(a):
    b = a + 1
    c = b * 2  # double it
    return c


def test_markers_are_distinct_and_numbered_from_one():
    assert len(set(MARKERS)) == len(MARKERS) == 20
    assert marker(1) == "❶" and marker(10) == "❿" and marker(11) == "⓫" and marker(20) == "⓴"
    for bad in (0, 21, 1.0, True):
        with pytest.raises(ValueError, match="callout number"):
            marker(bad)


def test_callouts_land_on_the_lines_that_hold_their_text():
    marks = place_callouts(TEXT, {"b = a + 1": 1, "c = b * 2": 2, "return d": 3})
    assert marks == {1: [1], 2: [2], 3: [4]}
    # one number on several lines marks a region
    assert place_callouts(TEXT, {"b = a": 1, "c = b": 1, "d = c": 2}) == {1: [1, 2], 2: [3]}


@pytest.mark.parametrize("callouts, message", [
    ({"b": 1}, r"'b' is on lines 2, 3, 4"),                       # ambiguous: would drift
    ({"e = ": 1}, r"'e = ' is on no line"),                        # gone from the source
    ({"b = a": 1, "return": 3}, r"must be 1\.\.2 with none missing"),
    ({"return": 1, "b = a": 2}, r"callout 2 \(line 2\) comes before callout 1 \(line 5\)"),
    ({"": 1}, "non-empty text"),
    ({}, "callouts is empty"),
])
def test_bad_callouts_are_refused_with_the_reason(callouts, message):
    with pytest.raises(ValueError, match=message):
        place_callouts(TEXT, callouts)


def test_listing_marks_each_line_in_every_view():
    listing = show_source(_sample, callouts={"b = a + 1": 1, "double it": 2})
    assert isinstance(listing, CalloutListing)
    assert listing.marks == {1: [2], 2: [3]} and listing.line(2).strip() == "c = b * 2  # double it"
    shown = repr(listing).splitlines()
    assert shown[0].endswith("_sample")                                   # the title
    marked = [line for line in shown if line.endswith(("# ❶", "# ❷"))]
    assert len(marked) == 2 and marked[0].index("#") == marked[1].rindex("#")  # one column of markers
    assert "# ❶" in listing._repr_markdown_() and "```python" in listing._repr_markdown_()
    page = listing._repr_html_()
    assert page.count("border-radius") == 2 and "&gt;" not in page.split("</b>")[0]
    assert str(listing) == listing.text and "# ❶" not in listing.text  # the source itself is untouched
    assert show_callouts(_sample, {"return c": 1}).marks == {1: [4]}


def test_markers_of_very_long_lines_follow_the_line():
    long_line = "x = " + "1 + " * 40 + "1"
    listing = CalloutListing(f"a = 0\n{long_line}\nb = 2\n", {1: [0], 2: [1], 3: [2]})
    shown = repr(listing).splitlines()
    assert len(long_line) > ALIGN and shown[1] == f"{long_line}  # ⓶".replace("⓶", marker(2))
    assert shown[0].index("# ❶") == shown[2].index("# ❸") == ALIGN + 2   # the others line up at ALIGN


def test_kernel_callouts_read_the_kernel_source():
    from mamba2_tutorial.kernels.chunk_state import chunk_state_kernel

    listing = show_source(chunk_state_kernel, callouts={"ct.cumsum(": 1, "ct.mma(": 2})
    assert "ct.cumsum(" in listing.line(1) and "ct.mma(" in listing.line(2)
    assert listing.title.endswith("chunk_state_kernel")


def _callout_numbers(code: str) -> set[int] | None:
    """The numbers of a ``callouts={...}`` literal in a code cell, or None if the cell has none."""
    python = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]  # no magics
    tree = ast.parse("\n".join(python))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "callouts":
                    assert isinstance(kw.value, ast.Dict), "callouts must be a dict literal in the cell"
                    return {ast.literal_eval(v) for v in kw.value.values}
    return None


NOTEBOOKS = [ROOT / "notebooks" / f"{name}.ipynb" for name in
             ("05_kernel_chunk_state", "06_kernel_state_passing", "07_kernel_chunk_scan", "08_ssd_forward")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_listing_in_the_kernel_notebooks_is_explained_marker_by_marker(path):
    cells = json.loads(path.read_text())["cells"]
    listings = 0
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        numbers = _callout_numbers("".join(cell["source"]))
        if numbers is None:
            continue
        listings += 1
        following = next((c for c in cells[i + 1:] if c["cell_type"] == "markdown"), None)
        assert following is not None, f"{path.name} cell {i}: no markdown cell explains its callouts"
        text = "".join(following["source"])
        found = [MARKERS.index(ch) + 1 for ch in text if ch in MARKERS]
        firsts = list(dict.fromkeys(found))
        assert firsts == sorted(numbers), (
            f"{path.name} cell {i}: the listing marks {sorted(numbers)}, the explanation below it names "
            f"{firsts}")
    assert listings, f"{path.name} shows no kernel source with callouts"
