"""Fixtures of the dashboard tests: small synthetic stores written through the real StoreWriter."""

from __future__ import annotations

import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch.dashboard import history, state

SMALL = Shape(seqs=8, token_seqs=2, seq_len=24)


@pytest.fixture(scope="session")
def synth_store(tmp_path_factory):
    """A collapsing run (120 steps; 5 episodes from the real detectors), a healthy run and an on-policy run (60
    steps each)."""
    root = tmp_path_factory.mktemp("synth")
    for name, kw in {"collapse": dict(n_steps=120), "healthy": dict(n_steps=60, collapse=False, seed=1),
                     "onpolicy": dict(n_steps=60, collapse=False, on_policy=True, seed=2)}.items():
        run = SyntheticRun(root, name, shape=SMALL, **kw)
        run.write()
        run.close()
    return root


@pytest.fixture()
def served(synth_store):
    """The dashboard state pointed at the synthetic store, with empty caches."""
    state.configure(synth_store)
    history.clear()
    yield synth_store
    history.clear()
