"""Length blow-up (truncated_frac) and repetition (repeat_frac_max), level = median of 5."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("length",))


def test_blowup_and_repetition_open_from_their_own_steps():
    # truncated 0.02 → 0.5 at 50 (warning; ≥ 0.7 at 90 → critical); repeat 0.2 → 0.7 at 60
    data = rows(120, truncated_frac=lambda s: 0.02 if s < 50 else (0.5 if s < 90 else 0.8),
                repeat_frac_max=lambda s: 0.2 if s < 60 else 0.7, response_length_mean=200.0)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 119, "critical"), ("repetition", 64, 119, "warning")]
    assert suite.episodes()[0].evidence["response_length_level"] == 200.0


def test_one_degenerate_batch_is_not_repetition():
    _, suite = feed(rows(50, repeat_frac_max=lambda s: 0.95 if s in (20, 21) else 0.3), ONLY)
    assert suite.episodes() == []
