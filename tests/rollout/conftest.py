"""Fixtures: the cached built-in policy (built on first use, ~30 s) and a cheap random-init one."""

import pytest
import torch

from collapsewatch.env import KBConfig, build_kb, make_env_factory
from collapsewatch.models import BuiltinSpec, build_builtin, load_builtin


@pytest.fixture(scope="session")
def builtin():
    """Warm-started ``builtin:tiny`` from the shared cache, with its KB, held-out tasks and env factory."""
    policy = load_builtin()
    kb = build_kb(policy.spec.kb)
    _, held_out = kb.split(policy.spec.eval_fraction)
    return policy.model, policy.tokenizer, held_out, make_env_factory(kb, policy.spec.env)


@pytest.fixture(scope="session")
def random_policy():
    """Random-init tiny model + tokenizer trained on a small KB (< 1 s): long, mostly invalid turns."""
    spec = BuiltinSpec(kb=KBConfig(seed=5, n_people=20, n_cities=5, n_countries=2, n_companies=3), warm_start=None)
    model, tokenizer, _ = build_builtin(spec)
    kb = build_kb(spec.kb)
    return model, tokenizer, kb.tasks, make_env_factory(kb, spec.env)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
