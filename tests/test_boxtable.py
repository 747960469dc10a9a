"""The CLI's plain-text tables (collapsewatch.boxtable): widths, folding, layout by hand, and parity with Rich's
``Table`` (the renderer it replaced) where one column is too wide."""

from __future__ import annotations

import io

from collapsewatch.boxtable import cell_len, fit, render, wrap


def test_cell_len_counts_terminal_cells():
    assert cell_len("abc") == 3
    assert cell_len("日本") == 4  # two wide characters, 2 cells each
    assert cell_len("e\u0301") == 1  # e + a combining acute accent: one cell
    assert cell_len("→ ≥") == 3  # narrow symbols: 1 cell each


def test_wrap_fills_words_and_splits_a_word_wider_than_the_column():
    assert wrap("aa bb cc", 5) == ["aa bb", "cc"]  # "aa bb" is 5 cells; + " cc" would be 8
    assert wrap("abcdefgh", 3) == ["abc", "def", "gh"]  # 8 letters in 3-cell pieces: 3 + 3 + 2
    assert wrap("go abcdefgh", 3) == ["go", "abc", "def", "gh"]
    assert wrap("x\ny", 10) == ["x", "y"]  # its own line breaks kept
    assert wrap("", 4) == [""]
    assert wrap("日本語", 4) == ["日本", "語"]  # 6 cells; a wide character is never split


def test_fit_cuts_only_the_widest_columns_to_one_width():
    assert fit([3, 10, 8], 30) == [3, 10, 8]  # 21 cells fit
    # 21 > 15: cap c with 3 + min(10, c) + min(8, c) <= 15 -> c = 6 (15 cells; c = 7 gives 17)
    assert fit([3, 10, 8], 15) == [3, 6, 6]
    assert fit([3, 100], 50) == [3, 47]  # one wide column takes what is left
    assert fit([5, 5], 1) == [1, 1]  # never below one cell


def test_render_by_hand():
    # width 12, 2 columns: 12 - (3 * 2 + 1) = 5 cells for text; natural widths [1, 7] ("one two") -> cap 4: [1, 4]
    assert render(["a", "bb"], [["x", "one two"]], width=12) == (
        "┏━━━┳━━━━━━┓\n"
        "┃ a ┃ bb   ┃\n"
        "┡━━━╇━━━━━━┩\n"
        "│ x │ one  │\n"
        "│   │ two  │\n"
        "└───┴──────┘\n")
    assert render(["run", "step"], []) == "┏━━━━━┳━━━━━━┓\n┃ run ┃ step ┃\n┡━━━━━╇━━━━━━┩\n└─────┴──────┘\n"


def test_cells_are_printed_as_written():
    out = render(["[b]name"], [["[red]x[/red]"]])
    assert "[red]x[/red]" in out and "[b]name" in out  # Rich would have read both as markup


def test_same_text_as_richs_table_with_one_folded_column():
    from rich.console import Console
    from rich.table import Table

    headers = ["run", "status", "steps", "sentence"]
    rows = [["grpo-collapse", "finished", "200", "Collapsed at step 84 (reward 0.44 → 0.09). " * 6],
            ["healthy", "running", "12", "No warning in 12 steps."],
            ["a-long-run-name-with-no-space-" * 3, "finished", "7", "x"]]
    table = Table(show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*r)
    buf = io.StringIO()
    Console(width=200, file=buf, color_system=None, force_terminal=False).print(table)
    assert render(headers, rows) == buf.getvalue()
