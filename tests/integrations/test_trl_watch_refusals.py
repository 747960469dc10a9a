"""docs/trl.md's misuse table, the rows the first review found wrong (s32 #9): each misuse is refused by ``watch()``
(or ``CollapsewatchCallback()``) itself, naming the caller, before anything is attached — not by Python's keyword
clash, nor later by ``trainer.train()``. One real tiny ``GRPOTrainer`` (tests/integrations/trl_tiny.py), never
trained here."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

from collapsewatch import Monitor  # noqa: E402
from collapsewatch.integrations.trl import CollapsewatchCallback, watch  # noqa: E402
from collapsewatch.runlock import RunExistsError  # noqa: E402
from tests.integrations.trl_tiny import tiny_grpo_trainer  # noqa: E402


def _attached(trainer) -> bool:
    return "_compute_loss" in vars(trainer) or any(isinstance(cb, CollapsewatchCallback)
                                                   for cb in trainer.callback_handler.callbacks)


@pytest.fixture
def trainer(tmp_path):
    return tiny_grpo_trainer(str(tmp_path / "out"))


@pytest.mark.parametrize("kwarg", ["objective", "clip"])
def test_an_argument_watch_sets_itself_is_named(trainer, tmp_path, kwarg):
    # used to be Python's "CollapsewatchCallback() got multiple values for keyword argument 'objective'"
    with pytest.raises(TypeError, match=f"^watch\\(\\): '{kwarg}' is set by watch\\(\\) itself"):
        watch(trainer, tmp_path / "store", "x", **{kwarg: "grpo"})
    assert not _attached(trainer)


def test_the_callback_names_itself():
    # the user called the callback, not watch(): the message says so
    with pytest.raises(TypeError, match=r"^CollapsewatchCallback\(\): unknown Monitor argument 'flush_step'; "
                                        r"Monitor takes: .*flush_steps"):
        CollapsewatchCallback("store", "m4", flush_step=5)
    with pytest.raises(ValueError, match=r"^CollapsewatchCallback\(\): run name 'a/b' is invalid"):
        CollapsewatchCallback("store", "a/b")


def test_a_bad_or_taken_run_name_is_refused_at_watch(trainer, tmp_path):
    store = tmp_path / "store"
    with pytest.raises(ValueError, match=r"^watch\(\): run name 'a/b' is invalid"):
        watch(trainer, store, "a/b")
    assert not _attached(trainer) and not store.exists()
    # a run already in the store (rank 0 wrote a step): refused now, not at trainer.train()
    with Monitor(store, "trl-exp", detectors=False) as mon:
        mon.log(1, {"reward_mean": 0.5})
    with pytest.raises(RunExistsError, match=r"^watch\(\): run 'trl-exp' already exists .*resume=True"):
        watch(trainer, store, "trl-exp")
    assert not _attached(trainer)
    # resume=True continues it: accepted here (train() then continues after the checkpoint or refuses a restart)
    cb = watch(trainer, store, "trl-exp", resume=True, detectors=False)
    assert [c for c in trainer.callback_handler.callbacks if isinstance(c, CollapsewatchCallback)] == [cb]
