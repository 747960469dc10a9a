"""The CLI's plain-text tables (collapsewatch.boxtable): widths, folding, layout by hand, and parity with Rich's
``Table`` (the renderer it replaced) where one column is too wide."""

from __future__ import annotations

import io

from collapsewatch.boxtable import cell_len, fit, number_width, render, unbreakable, wrap


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


def test_numbers_dates_and_ranges_are_unbreakable_words():
    assert all(unbreakable(w) for w in ["-2.1219e-05", "0.0003209", "1,000", "2026-11-30", "18:30:32", "24–50",
                                        "(0.44,", "3.5×", "12%", '"7107.61,'])
    assert not any(unbreakable(w) for w in ["grpo-healthy", "e-", "-", "seed1", "logp_old", "NULL", ""])
    # the widest unbreakable word of a column's cells: "-2.1219e-05" (11 cells); the text's words do not count
    assert number_width(["logp", "-2.1219e-05", "a-very-long-word-with-no-number"]) == 11
    assert number_width(["reward 0.44 → 0.09", "x"]) == 4


def test_fit_never_cuts_a_column_below_its_widest_number():
    # natural [12, 11], 15 cells, the second column's widest number 11: cap c with min(12, c) + 11 <= 15 -> c = 4
    assert fit([12, 11], 15, [0, 11]) == [4, 11]
    # floors alone (11 + 11 = 22) wider than 15: every column cut to the widest floor (11), the table 33 wide
    assert fit([12, 11, 11], 15, [0, 11, 11]) == [11, 11, 11]
    assert fit([12, 11], 30, [0, 11]) == [12, 11]  # 23 cells fit: natural widths


def test_render_never_splits_a_number():
    # width 20, 2 columns: 20 - 7 = 13 cells for text; natural [12, 11]; the number's column keeps its 11 and
    # the run name's column gets the 2 left: "grpo-healthy" in 2-cell pieces (the header "run" too: 2 lines),
    # the number whole on the row's first line
    out = render(["run", "logp"], [["grpo-healthy", "-2.1219e-05"]], width=20)
    assert out.splitlines()[1:5] == ["┃ ru ┃ logp        ┃", "┃ n  ┃             ┃", "┡━━━━╇━━━━━━━━━━━━━┩",
                                     "│ gr │ -2.1219e-05 │"]
    assert "│ hy │             │" in out and out.count("2.1219") == 1

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
