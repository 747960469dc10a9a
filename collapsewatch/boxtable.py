"""A plain-text table in the box style of the CLI's tables (a heavy header, light rows), for ``print_frame``.

Rich's ``Table`` took 1.4-1.6 s to print a 1,000-run ``runs`` table, this 32-61 ms for the same text
(docs/lab/scale.md, Nov 29): one pass over the cells (their display widths, then the lines). Cells are printed as written: a ``[name]`` in a
run name or a config stays in the text (Rich would read it as markup). A table wider than ``width`` narrows its
widest columns to one width (the others keep theirs) and folds their cells at spaces, a word longer than its column
split across lines — but never a number (:func:`unbreakable`: ``-2.1219e-05`` cut after ``e-`` reads as another
value): a column is never narrower than its widest number, and a table whose numbers alone are wider than ``width``
is printed wider (:func:`render`'s caller says so on stderr).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

WIDTH = 200
"""The CLI's tables' width in character cells."""


def cell_len(text: str) -> int:
    """Display width of ``text`` in terminal cells: 2 for East-Asian wide and full-width characters, 0 for
    combining marks, 1 otherwise (ASCII: its length)."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


_NUMBER = re.compile(r"[-+]?[0-9.][0-9.,:eE+\-–]*")  # 1.5, -2.1e-05, 1,000, 2026-11-30, 12:00:00, 24–50
_OPEN, _CLOSE = "([{<\"'", ")]}>\"',;:.×%"  # around a number in text: "(0.44,", "3.5×", "12%"


def unbreakable(word: str) -> bool:
    """Whether ``word`` (no spaces) is a number, a date, a time or a range of them, bare or in brackets, quotes or
    followed by punctuation: never split across lines."""
    core = word.lstrip(_OPEN).rstrip(_CLOSE)
    return _NUMBER.fullmatch(core) is not None and any(c.isdigit() for c in core)


def number_width(cells: Sequence[str]) -> int:
    """The widest unbreakable word of ``cells`` in cells (0 when none): a column of them is at least that wide."""
    widest = 0
    for text in cells:
        if cell_len(text) <= widest:  # no word of it is wider
            continue
        for word in text.split():
            if cell_len(word) > widest and unbreakable(word):
                widest = cell_len(word)
    return widest


def _fold_word(word: str, width: int) -> list[str]:
    """``word`` cut into pieces of at most ``width`` cells (a wide character never split)."""
    pieces, cur, n = [], "", 0
    for c in word:
        w = cell_len(c)
        if cur and n + w > width:
            pieces.append(cur)
            cur, n = "", 0
        cur, n = cur + c, n + w
    return [*pieces, cur]


def wrap(text: str, width: int) -> list[str]:
    """``text``'s lines (its own line breaks kept) filled word by word to at most ``width`` cells; a word wider
    than ``width`` is split. Always at least one line."""
    out: list[str] = []
    for para in text.split("\n"):
        if cell_len(para) <= width:
            out.append(para)
            continue
        line = ""
        for word in para.split(" "):
            pieces = _fold_word(word, width) if cell_len(word) > width else [word]
            for piece in pieces[:-1]:
                if line:
                    out.append(line)
                    line = ""
                out.append(piece)
            word = pieces[-1]
            cand = f"{line} {word}" if line else word
            if cell_len(cand) <= width:
                line = cand
            else:
                out.append(line)
                line = word
        out.append(line)
    return out


def fit(natural: Sequence[int], available: int, floor: Sequence[int] | None = None) -> list[int]:
    """Column widths: ``natural`` when they fit in ``available`` cells, else the widest columns cut to the one
    width ``cap`` (≥ 1) at which the widths add up to at most ``available``: a column narrower than ``cap`` keeps
    its width, and none is cut below its ``floor`` (its widest number). When the floors alone do not fit, every
    column is cut to the widest floor (or kept at its floor) and the widths add up to more than ``available``."""
    if sum(natural) <= available:
        return list(natural)
    floor = floor or [0] * len(natural)

    def widths(cap: int) -> list[int]:
        return [max(f, min(w, cap)) for w, f in zip(natural, floor, strict=True)]

    if sum(widths(1)) > available:  # numbers that cannot be cut fill more than the table's width
        return widths(max(1, *floor))
    lo, hi = 1, max(natural)  # the widest cap that fits: the widths' sum grows with cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sum(widths(mid)) <= available else (lo, mid - 1)
    return widths(lo)


def render(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """The table as text, one ``\\n`` after each line: a header box of ``headers``, then one block per row (its
    cells folded to their column's width, a number never split), cells padded by one space on each side. Its lines
    are wider than ``width`` when its numbers alone are (:func:`fit`)."""
    n = len(headers)
    natural = [max([cell_len(line) for s in [h, *(r[i] for r in rows)] for line in s.split("\n")] or [0])
               for i, h in enumerate(headers)]
    available = max(width - (3 * n + 1), n)
    floor = None if sum(natural) <= available else [number_width([h, *(r[i] for r in rows)])
                                                      for i, h in enumerate(headers)]
    widths = fit(natural, available, floor)

    def rule(left: str, fill: str, mid: str, right: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def block(cells: Sequence[str], bar: str) -> list[str]:
        if len(cells) != n:
            raise ValueError(f"a row of {len(cells)} cells in a table of {n} columns")
        folded = [wrap(c, w) if cell_len(c) > w or "\n" in c else [c] for c, w in zip(cells, widths, strict=True)]
        height = max(len(f) for f in folded)
        padded = [f + [""] * (height - len(f)) for f in folded]
        return [bar + bar.join(f" {f[k]}{' ' * (w - cell_len(f[k]))} " for f, w in zip(padded, widths, strict=True))
                + bar for k in range(height)]

    lines = [rule("┏", "━", "┳", "┓"), *block(headers, "┃"), rule("┡", "━", "╇", "┩")]
    for r in rows:
        lines.extend(block(r, "│"))
    lines.append(rule("└", "─", "┴", "┘"))
    return "\n".join(lines) + "\n"
