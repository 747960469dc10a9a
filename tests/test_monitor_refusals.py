"""What a training loop hands ``observe`` / ``log`` is refused at the call when the monitor cannot keep it whole: a
step that is not an integer (it used to be truncated or lost on the recorder thread) and complex values (their
imaginary part used to vanish)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collapsewatch import Monitor, Store
from tests.conftest import random_batch


@pytest.mark.parametrize("step, error", [(True, TypeError), (2.5, TypeError), (3.0, TypeError), ("7", TypeError),
                                         (None, TypeError), (torch.tensor(1.5), TypeError), (2**63, ValueError),
                                         (-1, ValueError)])
def test_a_step_that_is_not_an_integer_is_refused_at_the_call(store, step, error):
    with Monitor(store, "s", detectors=False) as mon:
        with pytest.raises(error, match="observe: step must be"):
            mon.observe(random_batch(B=2, T=4), step=step)
        with pytest.raises(error, match="log: step must be"):
            mon.log(step, {"lr": 1e-5})
        mon.observe(random_batch(B=2, T=4), step=np.int64(4))  # integers of any kind are steps
        mon.observe(random_batch(B=2, T=4), step=torch.tensor(5))
        mon.observe(random_batch(B=2, T=4), step=6)
        mon.log(6, {"lr": 1e-5})
    # the refused calls left nothing behind and cost no later step: exactly 4, 5, 6
    assert Store(store).query("SELECT list(step ORDER BY step) AS s FROM step_metrics")["s"][0].tolist() == [4, 5, 6]


@pytest.mark.parametrize("field", ["logp", "advantages"])
def test_a_complex_tensor_is_refused_naming_its_field(store, field):
    b = random_batch(B=2, T=4)
    value = getattr(b, field)
    setattr(b, field, value.to(torch.complex64) if field == "logp" else value.numpy().astype(np.complex128))
    with Monitor(store, "c", detectors=False) as mon:
        with pytest.raises(TypeError, match=f"TokenBatch.{field} is a complex"):
            mon.observe(b, step=0)
        with pytest.raises(TypeError, match="scalar 'loss' is complex"):
            mon.log(0, {"loss": np.complex128(1 + 2j)})
        with pytest.raises(TypeError, match="scalar 'kl' is complex"):
            mon.log(0, {"kl": torch.tensor(1 + 2j)})
