"""Read the optimization log ``docs/perf-notes.md``: one entry per attempt, with its prediction and
measurement.

Each attempt is a ``### Attempt N: title`` heading followed by ``- Field: value`` lines (a value may continue
on indented lines). ``Before (ms)`` and ``After (ms)`` are numbers once a GPU run has measured them, anything
else (``to measure``, ``-``) until then. Notebook 09 turns the entries into a table.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["parse_perf_notes", "read_perf_notes", "NOTES_PATH", "REQUIRED_FIELDS"]

NOTES_PATH = Path(__file__).resolve().parents[1] / "docs" / "perf-notes.md"
REQUIRED_FIELDS = ("Kernel", "Change", "Prediction", "Shape", "Before (ms)", "After (ms)", "Why they differ")
_HEADING = re.compile(r"^###\s+Attempt\s+(\d+)\s*:\s*(.+?)\s*$")
_FIELD = re.compile(r"^-\s+([^:]+?)\s*:\s*(.*)$")


def _number(value: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?:ms)?\s*", value)
    return float(m.group(1)) if m else None


def parse_perf_notes(text: str) -> list[dict]:
    """Attempts in file order: dicts with "number", "title", every field by name, and "before_ms" / "after_ms"
    (float or None) and "speedup" (before / after, or None).

    Raises ValueError naming the attempt when a required field is missing or numbers repeat.
    """
    attempts: list[dict] = []
    current: dict | None = None
    last_field: str | None = None
    for line in text.splitlines():
        if m := _HEADING.match(line):
            current = {"number": int(m.group(1)), "title": m.group(2)}
            attempts.append(current)
            last_field = None
            continue
        if line.startswith("#"):
            current, last_field = None, None
            continue
        if current is None:
            continue
        if m := _FIELD.match(line):
            last_field = m.group(1)
            current[last_field] = m.group(2).strip()
        elif last_field and line.startswith("  ") and line.strip():
            current[last_field] += " " + line.strip()
    seen = set()
    for a in attempts:
        missing = [f for f in REQUIRED_FIELDS if f not in a]
        if missing:
            raise ValueError(f"perf notes: attempt {a['number']} ({a['title']}) lacks fields {missing}")
        if a["number"] in seen:
            raise ValueError(f"perf notes: attempt number {a['number']} appears twice")
        seen.add(a["number"])
        a["before_ms"] = _number(a["Before (ms)"])
        a["after_ms"] = _number(a["After (ms)"])
        a["speedup"] = a["before_ms"] / a["after_ms"] if a["before_ms"] and a["after_ms"] else None
    return attempts


def read_perf_notes(path: str | Path | None = None) -> list[dict]:
    """Parse ``docs/perf-notes.md`` (or ``path``)."""
    return parse_perf_notes(Path(path or NOTES_PATH).read_text())
