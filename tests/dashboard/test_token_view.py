"""Token drill-down builders (dashboard.token_view) and tokenizer discovery (dashboard.state)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collapsewatch.dashboard import state, theme, token_view


def test_token_texts_decoded_or_ids():
    assert token_view.token_texts([5, None, 7], None) == ["[5]", "[?]", "[7]"]
    decode = lambda ids: [f"<{i}>" for i in ids]  # noqa: E731
    assert token_view.token_texts([5, np.nan, 7], decode) == ["<5>", "[?]", "<7>"]


def test_visible_whitespace():
    assert token_view.visible("a\nb\t") == "a↵\nb→" and token_view.visible("") == "∅"


def test_colour_scales():
    # ratio: strength log r / ln 4, clipped: r = 0.5 → −ln 2 / ln 4 = −0.5 (likelihood down, orange-red) and
    # r = 2 → +0.5 (blue): symmetric in log r; r = 8 → +1.5 clipped to +1; r = 0 → −1
    assert token_view.scale("ratio", 0.5) == pytest.approx(-0.5) and token_view.scale("ratio", 2.0) == pytest.approx(0.5)
    assert token_view.scale("ratio", 8.0) == 1.0 and token_view.scale("ratio", 0.0) == -1.0
    assert token_view.colour("ratio", 0.5) == theme.rgba(token_view.DOWN, 0.06 + 0.79 * 0.5)
    assert token_view.colour("ratio", 8.0) == theme.rgba(token_view.UP, 0.85)
    assert token_view.scale("log_ratio", -2.0) == -1.0 and token_view.scale("entropy", 2.0) == 0.5
    assert token_view.scale("entropy", None) == 0.0 and token_view.scale("ratio", float("nan")) == 0.0
    with pytest.raises(ValueError):
        token_view.scale("logp", 1.0)


def test_token_cells_mark_observations_and_carry_values():
    toks = pd.DataFrame({"pos": [0, 1], "token_id": [11, 12], "turn_id": [0, 1], "mask": [True, False],
                         "advantage": [0.5, 0.5], "logp": [-1.0, np.nan], "logp_old": [-0.5, np.nan],
                         "log_ratio": [-0.5, np.nan], "ratio": [np.exp(-0.5), np.nan], "entropy": [1.25, np.nan]})
    cells = token_view.token_cells(toks, "entropy", ["Paris", "\n"])
    assert cells[0]["background"] == theme.rgba(token_view.HOT, 0.08 + 0.72 * 1.25 / 4.0)
    assert "ratio 0.6065" in cells[0]["tip"] and "log_ratio -0.5000" in cells[0]["tip"] and "A +0.500" in cells[0]["tip"]
    assert cells[1] == {"text": "↵\n", "observation": True, "background": None,
                        "tip": "pos 1 · id 12 · turn 1\ntool observation (mask 0, not trained on)"}


def test_bins_cap_heatmap_size():
    assert token_view.bins(list(range(100)), 63) == (1, 1)
    assert token_view.bins(list(range(0, 2000)), 1023, max_rows=160, max_cols=256) == (13, 4)  # ⌈2000/160⌉, ⌈1024/256⌉
    assert token_view.bins([], 0) == (1, 1)


def test_heatmap_figure_grid_and_marker():
    grid = pd.DataFrame({"step": [0, 0, 10, 10], "pos": [0, 4, 0, 4], "value": [1.0, 0.5, 0.8, np.nan]})
    fig = token_view.heatmap_figure(grid, "ratio", step=13, step_bin=10)
    hm = fig.data[0]
    # coloured by log r (ln 1 = 0, ln 0.5 = −0.693), centred on 0; the hover shows r itself (customdata)
    assert list(hm.x) == [0, 4] and list(hm.y) == [0, 10] and hm.zmid == 0.0
    np.testing.assert_allclose(np.asarray(hm.z)[0], [0.0, np.log(0.5)])
    assert np.asarray(hm.customdata)[0].tolist() == [1.0, 0.5]
    # adaptive scale: the 99th percentile of |log r| over {0, 0.693, 0.223} ≈ 0.684; fixed: ln 4 for every run
    assert hm.zmax == pytest.approx(np.percentile([0.0, np.log(2), -np.log(0.8)], 99)) and hm.zmin == -hm.zmax
    fixed = token_view.heatmap_figure(grid, "ratio", fixed=True).data[0]
    assert fixed.zmax == pytest.approx(np.log(4.0)) and list(fixed.colorbar.ticktext) == ["0.25", "0.5", "1", "2", "4"]
    marker = fig.layout.shapes[0]
    assert (marker.y0, marker.y1) == (5.0, 15.0)  # the 10-step bin holding step 13, centred on its label 10
    ent = token_view.heatmap_figure(grid.fillna(0.0), "entropy")
    assert ent.data[0].zmid is None and ent.data[0].zmin == 0.0
    assert "no token rows" in token_view.heatmap_figure(grid.iloc[0:0], "ratio").layout.annotations[0].text


def test_sequences_ranked_and_zero_advantage_note():
    seqs = pd.DataFrame({"rank": [0, 0, 0], "seq_id": [0, 1, 2], "repeat_frac_max": [0.2, 0.9, None],
                         "entropy_mean": [1.0, 0.5, 3.0], "seq_ratio": [0.9, 1.1, 0.4]})
    assert token_view.rank_sequences(seqs, "repetition")["seq_id"].tolist() == [1, 0, 2]  # missing last
    assert token_view.rank_sequences(seqs, "entropy")["seq_id"].tolist() == [2, 0, 1]
    assert token_view.rank_sequences(seqs, "ratio")["seq_id"].tolist() == [2, 0, 1]
    assert token_view.rank_sequences(seqs, "nonsense")["seq_id"].tolist() == [0, 1, 2]
    toks = pd.DataFrame({"mask": [True, True, False], "advantage": [0.0, 0.0, 0.7]})  # mask 0 rows do not count
    assert "no gradient" in token_view.zero_advantage_note(toks)
    assert token_view.zero_advantage_note(toks.assign(advantage=[0.0, 0.3, 0.0])) is None


def test_tokenizer_found_in_nested_config_and_decodes(tmp_path):
    from collapsewatch.models.tokenizer import train_tokenizer

    tok = train_tokenizer(["the capital of France is Paris"] * 20, vocab_size=300)
    tok.save_pretrained(tmp_path / "tok")
    config = {"model": {"model_path": str(tmp_path / "tok")}, "lr": 1e-6}
    assert state.tokenizer_dir(config) == tmp_path / "tok"
    assert state.tokenizer_dir({"model_path": str(tmp_path)}) is None  # no tokenizer files there
    ids = tok.encode("Paris is")
    decode = state.decoder_for(config)
    assert "".join(decode(ids)) == "Paris is"


def test_tokenizer_found_in_the_run_folder_when_the_config_names_none(tmp_path):
    from collapsewatch.models.tokenizer import train_tokenizer

    tok = train_tokenizer(["the capital of France is Paris"] * 20, vocab_size=300)
    run_dir = tmp_path / "store" / "exp1"
    tok.save_pretrained(run_dir / "tokenizer")
    config = {"model": "builtin:tiny"}  # names no directory on this machine
    assert state.tokenizer_dir(config) is None
    assert state.tokenizer_dir(config, run_dir) == run_dir / "tokenizer"
    assert "".join(state.decoder_for(config, run_dir)(tok.encode("Paris is"))) == "Paris is"


def test_byte_level_pieces_render_as_text_not_replacement_boxes():
    from collapsewatch.dashboard.token_view import byte_level_texts

    # 'é' = bytes c3 a9 = pieces 'Ã' '©'; '’' = e2 80 99 = 'â' 'Ģ' 'Ļ' (GPT-2's byte alphabet shifts 0x80, 0x99);
    # 'Ġ' stands for a space. Each character shows on the token that completes it, the ones before show nothing.
    assert byte_level_texts(["caf", "Ã", "©", "Ġ", "â", "Ģ", "Ļ", "ok"]) == ["caf", "", "é", " ", "", "", "’", "ok"]
    # bytes that never make a character: escapes, not U+FFFD; a special token is shown as it is and cuts them off
    assert byte_level_texts(["â", "<|im_end|>", "Ġx"], {"<|im_end|>"}) == ["\\xe2", "<|im_end|>", " x"]
    assert byte_level_texts(["a", "ÿ"]) == ["a", "\\xff"]  # 0xff never starts a UTF-8 character
    assert "\ufffd" not in "".join(byte_level_texts(["Ã", "Ã", "©"]))  # c3 c3 a9: an invalid byte, then 'é'


def test_characters_that_do_not_print_show_as_escapes_not_boxes():
    # every code point str.isprintable() rejects, other than the newline and tab drawn as ↵ and →, is escaped as
    # Python writes it: U+001D → \x1d, U+007F → \x7f, U+00A0 → \xa0, U+200B (zero width) → \u200b,
    # U+E0001 (language tag) → \U000e0001; printable text, 'é' included, stays as it is
    assert token_view.visible("a\x1d\x7f\xa0é\u200b\U000e0001\tb\n") == "a\\x1d\\x7f\\xa0é\\u200b\\U000e0001→b↵\n"


def test_the_tokens_page_escapes_the_control_bytes_of_a_sample_sequence(tmp_path):
    import shutil

    from collapsewatch.dashboard import create_app, history
    from tests.dashboard.test_sample_runs import SAMPLES

    # /tokens/grpo-collapse?step=180&rank=entropy, sequence 63: its degenerate text decodes to 'answer', U+001D
    # twice, 'aerilBraakport', U+007F, 'Braith' — which the browser drew as boxes
    root = tmp_path / "store"
    shutil.copytree(SAMPLES, root)
    create_app(root)
    from collapsewatch.dashboard.pages import tokens  # registered once an app exists

    history.clear()
    try:
        cells, _, _ = tokens.render("0:63", "entropy", 180, "grpo-collapse")
    finally:
        history.clear()
    text = "".join(c.children for c in cells if isinstance(getattr(c, "children", None), str))
    assert "answer\\x1d\\x1daerilBraakport\\x7fBraith" in text
    assert not any(not c.isprintable() and c != "\n" for c in text)
