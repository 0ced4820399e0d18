"""Numbered callouts beside a function's source, for reading a kernel line by line in a notebook.

``show_source(kernel, callouts={"ct.bid(0)": 1, "ct.cumsum(": 2, ...})`` shows the source with a marker
(❶, ❷, ...) at the end of each marked line; the markdown cell below it explains the markers in order. Each key
is a piece of text that must occur on exactly one line of the source, so a callout can never drift to the
wrong line: when the kernel changes, the notebook fails here and names the callout to fix. Several keys may
share a number, to mark a region of a few lines. The numbers must be 1, 2, ..., N, and each number first
appears below the previous one, so the explanations read top to bottom.

``show_diff(before, after, before_lines=(first, last), after_lines=(first, last))`` shows what changed from
one kernel (or a region of it) to another as a unified diff, computed with :mod:`difflib` from the functions'
own sources: never pasted text, so it follows the kernels as they change. A region runs from the line holding
``first`` to the line holding ``last``, each a piece of text on exactly one line, like a callout's key.
"""

from __future__ import annotations

import difflib
import html
import inspect
import textwrap
from collections.abc import Mapping

from ..runtime.compile import IRListing

__all__ = ["MARKERS", "CalloutListing", "DiffListing", "marker", "show_callouts", "show_diff", "show_source"]

#: markers align at this column at most (a listing stays readable in a notebook's width)
ALIGN = 100

#: the markers for callouts 1..20 (dingbat negative circled digits, then negative circled numbers)
MARKERS = tuple(chr(0x2776 + i) for i in range(10)) + tuple(chr(0x24EB + i) for i in range(10))


def marker(number: int) -> str:
    """The marker of callout ``number`` (1-based): ❶ for 1, ❷ for 2, ..."""
    if type(number) is not int or not 1 <= number <= len(MARKERS):
        raise ValueError(f"a callout number is an int in 1..{len(MARKERS)}, got {number!r}")
    return MARKERS[number - 1]


def _source_of(obj) -> tuple[str, str]:
    func = obj._annotated_function.pyfunc if hasattr(obj, "_annotated_function") else obj
    name = getattr(func, "__qualname__", getattr(func, "__name__", "source"))
    module = getattr(func, "__module__", "")
    return inspect.getsource(func), f"{module}.{name}" if module else name


def place_callouts(text: str, callouts: Mapping[str, int], *,
                   name: str = "the source") -> dict[int, list[int]]:
    """``{number: [0-based line indices]}`` for ``callouts`` on ``text``; ValueError naming the callout when a
    key matches no line or several, when the numbers are not 1..N, or when they are out of reading order."""
    if not callouts:
        raise ValueError("callouts is empty: give {text on a line: number}")
    lines = text.splitlines()
    marks: dict[int, list[int]] = {}
    for key, number in callouts.items():
        marker(number)  # checks the number
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"callout {number}: the key must be non-empty text on one line, got {key!r}")
        found = [i for i, line in enumerate(lines) if key in line]
        if not found:
            raise ValueError(f"callout {number}: {key!r} is on no line of {name}")
        if len(found) > 1:
            where = ", ".join(str(i + 1) for i in found)
            raise ValueError(f"callout {number}: {key!r} is on lines {where} of {name}; make the text "
                             f"longer so that it names one line")
        marks.setdefault(number, []).append(found[0])
    numbers = sorted(marks)
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"callout numbers must be 1..{len(numbers)} with none missing, got {numbers}")
    firsts = [min(marks[n]) for n in numbers]
    for n in numbers[1:]:
        if firsts[n - 1] < firsts[n - 2]:
            raise ValueError(f"callout {n} (line {firsts[n - 1] + 1}) comes before callout {n - 1} "
                             f"(line {firsts[n - 2] + 1}) in {name}: number them in reading order")
    return {n: sorted(marks[n]) for n in numbers}


class CalloutListing(IRListing):
    """Source text with a marker at the end of each marked line (markdown, HTML and plain text views).

    ``marks`` maps each callout number to its 1-based line numbers in ``text``; ``line(n)`` is the text of
    callout ``n``'s first line."""

    def __init__(self, text: str, marks: dict[int, list[int]], *, title: str = ""):
        super().__init__(text, title=title, language="python")
        self._marks0 = marks
        self.marks = {n: [i + 1 for i in rows] for n, rows in marks.items()}
        self._by_line = {i: n for n, rows in marks.items() for i in rows}

    def line(self, number: int) -> str:
        return self.text.splitlines()[self._marks0[number][0]]

    def _marked_lines(self) -> list[tuple[str, int | None]]:
        return [(line, self._by_line.get(i)) for i, line in enumerate(self.text.rstrip("\n").splitlines())]

    def _column(self) -> int:
        """Markers line up two columns right of the longest marked line, or of ``ALIGN`` characters: a
        longer line gets its marker two spaces after its end, so no marker sits far off to the right."""
        return min(max(len(line) for line, n in self._marked_lines() if n is not None), ALIGN) + 2

    def _shown(self) -> str:
        col = self._column()
        return "\n".join(line if n is None else f"{line.ljust(col - 2)}  # {marker(n)}"
                         for line, n in self._marked_lines())

    def _repr_html_(self) -> str:
        col = self._column()
        out = []
        for line, n in self._marked_lines():
            esc = html.escape(line)
            if n is None:
                out.append(esc)
                continue
            pad = " " * max(col - len(line), 2)
            badge = (f'<span style="color:#fff;background:#c0392b;border-radius:0.7em;padding:0 0.35em;'
                     f'font-weight:bold">{n}</span>')
            out.append(f'<span style="background:#fff3b0">{esc}</span>{pad}{badge}')
        head = f"<b>{html.escape(self.title)}</b>" if self.title else ""
        return f'{head}<pre style="font-size:11px;line-height:1.3">{chr(10).join(out)}</pre>'


def show_callouts(obj, callouts: Mapping[str, int]) -> CalloutListing:
    """The source of ``obj`` (a ``@ct.kernel`` or a function) with numbered callouts; see the module
    docstring. Also reachable as ``show_source(obj, callouts=...)``."""
    text, title = _source_of(obj)
    return CalloutListing(text, place_callouts(text, callouts, name=title), title=title)


def _one_line(lines: list[str], key: str, what: str, name: str) -> int:
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"the {what} of a region must be non-empty text on one line, got {key!r}")
    found = [i for i, line in enumerate(lines) if key in line]
    if len(found) != 1:
        where = "no line" if not found else "lines " + ", ".join(str(i + 1) for i in found)
        raise ValueError(f"the region's {what} {key!r} is on {where} of {name}; it must name exactly one "
                         "line")
    return found[0]


def source_region(obj, lines: tuple[str, str] | None = None) -> tuple[str, str]:
    """``(text, title)``: the source of ``obj`` (a ``@ct.kernel`` or a function), or only the lines from the
    one holding ``lines[0]`` to the one holding ``lines[1]``, dedented. ValueError naming an anchor that is on
    no line or on several, or a region that ends before it starts."""
    text, title = _source_of(obj)
    if lines is None:
        return text, title
    if not (isinstance(lines, tuple) and len(lines) == 2):
        raise ValueError(f"a region is (first line's text, last line's text), got {lines!r}")
    all_lines = text.splitlines()
    first = _one_line(all_lines, lines[0], "first line", title)
    last = _one_line(all_lines, lines[1], "last line", title)
    if last < first:
        raise ValueError(f"the region of {title} ends (line {last + 1}) before it starts (line {first + 1})")
    region = textwrap.dedent("\n".join(all_lines[first:last + 1])) + "\n"
    return region, f"{title}, lines {first + 1}-{last + 1}"


class DiffListing(CalloutListing):
    """A unified diff of two sources (``-`` lines only in ``before``, ``+`` lines only in ``after``).
    ``removed`` and ``added`` hold those lines' text (stripped), so a notebook can assert what a change is."""

    def __init__(self, text: str, *, title: str, removed: list[str], added: list[str]):
        super().__init__(text, {}, title=title)
        self.removed, self.added = removed, added

    def _shown(self) -> str:
        return self.text.rstrip("\n")

    def _repr_html_(self) -> str:
        colors = {"+": "#d4f7d4", "-": "#ffd7d5", "@": "#e8eefc"}
        out = []
        for line in self.text.rstrip("\n").splitlines():
            esc = html.escape(line)
            bg = colors.get(line[:1])
            out.append(f'<span style="background:{bg}">{esc}</span>' if bg else esc)
        head = f"<b>{html.escape(self.title)}</b>" if self.title else ""
        return f'{head}<pre style="font-size:11px;line-height:1.3">{chr(10).join(out)}</pre>'


def show_diff(before, after, *, before_lines: tuple[str, str] | None = None,
              after_lines: tuple[str, str] | None = None, context: int = 2) -> DiffListing:
    """What changed from ``before`` to ``after`` (kernels or functions, or regions of them: see
    :func:`source_region`), as a unified diff with ``context`` unchanged lines around each change. ValueError
    where the two are the same (a diff that shows nothing teaches nothing)."""
    a, a_title = source_region(before, before_lines)
    b, b_title = source_region(after, after_lines)
    a_lines, b_lines = a.splitlines(), b.splitlines()
    diff = list(difflib.unified_diff(a_lines, b_lines, a_title, b_title, n=context, lineterm=""))
    if not diff:
        raise ValueError(f"{a_title} and {b_title} are the same: there is no change to show")
    body = diff[2:]  # the two file headers are the title
    removed = [line[1:].strip() for line in body if line.startswith("-")]
    added = [line[1:].strip() for line in body if line.startswith("+")]
    return DiffListing("\n".join(body) + "\n", title=f"- {a_title}\n+ {b_title}", removed=removed,
                       added=added)


def show_source(obj, *, max_lines: int | None = None, callouts=None) -> IRListing:
    """The Python source of a kernel (``@ct.kernel``) or function, from the package, for notebook display.

    ``callouts`` ({text on one line: number}) marks those lines with numbered markers, for a line-by-line
    explanation below the listing (:func:`show_callouts`)."""
    if callouts is not None:
        return show_callouts(obj, callouts)

    func = obj._annotated_function.pyfunc if hasattr(obj, "_annotated_function") else obj
    name = getattr(func, "__qualname__", getattr(func, "__name__", "source"))
    module = getattr(func, "__module__", "")
    return IRListing(inspect.getsource(func), title=f"{module}.{name}" if module else name,
                     max_lines=max_lines, language="python")
