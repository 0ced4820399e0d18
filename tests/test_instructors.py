"""The instructors' guide holds: each syllabus adds up and ends on time, and every exercise notebook is listed
in the exercise tables of the guide, the README and notebook 00."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "instructors.md").read_text()
EXERCISES = sorted(p.stem for p in (ROOT / "notebooks" / "exercises").glob("ex*.ipynb"))


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else None]


def _minutes(clock: str) -> int:
    h, m = clock.split(":")
    return int(h) * 60 + int(m)


def _rows(section: str) -> list[tuple[int, int | None, str, str]]:
    """(start, duration or None for the end row, what, material) of a syllabus table."""
    rows = []
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+:\d\d)\s*\|\s*(\d+ min|—)\s*\|(.*)\|(.*)\|\s*$", line)
        if m:
            duration = None if m.group(2) == "—" else int(m.group(2).split()[0])
            rows.append((_minutes(m.group(1)), duration, m.group(3).strip(), m.group(4).strip()))
    return rows


PLANS = [("## Syllabus: 2 hours", 120), ("## Syllabus: half day", 240)]


@pytest.mark.parametrize(("heading", "length"), PLANS)
def test_syllabus_adds_up_and_ends_on_time(heading, length):
    rows = _rows(_section(GUIDE, heading))
    assert len(rows) >= 6, rows
    assert rows[0][0] == 0
    for (start, duration, what, _), (next_start, *_rest) in zip(rows, rows[1:]):
        assert duration is not None, f"{what}: only the last row may be the end"
        assert start + duration == next_start, f"{heading}: '{what}' starts {start}, lasts {duration}"
    end, duration, what, _ = rows[-1]
    assert duration is None and what == "end" and end == length, rows[-1]
    # every exercise a plan schedules exists, and its slot is at least the guide's own time estimate
    table = re.finditer(r"\| `(ex\d\d_\w+)` \|.*\| (\d+) min \|", GUIDE)
    estimate = {m.group(1): int(m.group(2)) for m in table}
    for _, duration, _what, material in rows:
        for name in re.findall(r"`(ex\d\d_\w+)`", material):
            assert name in EXERCISES, name
            assert duration >= estimate[name], f"{name}: {duration} min scheduled, {estimate[name]} estimated"


def test_half_day_teaches_and_practises_the_chunk_scan():
    rows = _rows(_section(GUIDE, "## Syllabus: half day"))
    materials = " ".join(material for *_, material in rows)
    assert "`07_kernel_chunk_scan`" in materials and "`ex07_cutile_chunk_scan`" in materials


def test_every_exercise_is_listed_in_every_exercise_table():
    assert len(EXERCISES) == 8, EXERCISES
    guide_table = _section(GUIDE, "## What there is")
    readme = (ROOT / "README.md").read_text()
    nb = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    start_here = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for name in EXERCISES:
        assert f"| `{name}` |" in guide_table, f"guide: {name}"
        assert f"`{name}`" in readme, f"README: {name}"
        assert f"| `{name}` |" in start_here, f"00_start_here: {name}"
    listed = set(re.findall(r"`(ex\d\d_\w+)`", guide_table))
    assert listed <= set(EXERCISES), listed - set(EXERCISES)


def _times(text: str) -> dict[str, tuple[int, ...]]:
    """{exercise: (minutes, ...)} from the rows of a markdown table that name an exercise and give times."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`(ex\d\d_\w+)`\s*\|", line)
        if m:
            out[m.group(1)] = tuple(int(t) for t in re.findall(r"\b(\d+) min\b", line))
    return out


def test_each_exercise_has_one_time_everywhere():
    """The guided (and open) time of every exercise is the same in its notebook's header, the open notebook's,
    notebook 00, the README and the instructors' guide."""
    readme = _times((ROOT / "README.md").read_text())
    nb = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    start_here = _times("\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))
    guide = {}
    for line in _section(GUIDE, "## What there is").splitlines():
        m = re.match(r"\|\s*`(ex\d\d_\w+)`\s*\|", line)
        if m:  # the guide's row: ... | open: "N words, N lines, N min" | guided "N min" |
            times = [int(t) for t in re.findall(r"\b(\d+) min\b", line)]
            guide[m.group(1)] = tuple(times[-1:] + times[:-1])  # guided first, then open
    for name in EXERCISES:
        header = "".join(json.loads((ROOT / "notebooks" / "exercises" / f"{name}.ipynb").read_text())
                         ["cells"][0]["source"])
        guided = int(re.search(r"\*\*time:\*\* about (\d+) minutes", header).group(1))
        expected = (guided,)
        open_nb = ROOT / "notebooks" / "exercises" / "open" / f"{name}_open.ipynb"
        if open_nb.exists():
            open_header = "".join(json.loads(open_nb.read_text())["cells"][0]["source"])
            expected += (int(re.search(r"\*\*time:\*\* about (\d+) minutes", open_header).group(1)),)
            assert f"(about {expected[1]} minutes)" in header, f"{name}: the guided header's open-tier time"
        for where, table in (("README", readme), ("00_start_here", start_here), ("instructors", guide)):
            assert table.get(name) == expected, (name, where, table.get(name), "the notebooks:", expected)
