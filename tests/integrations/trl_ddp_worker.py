"""One rank of a 2-process CPU GRPO run under watch(); launched by test_trl_ddp.py through torch.distributed.run.

    python -m torch.distributed.run --nproc_per_node 2 tests/integrations/trl_ddp_worker.py OUT_DIR

Writes OUT_DIR/micro-<rank>.json: per observed micro-batch, its step and the seq ids this rank stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from collapsewatch import Sampling
from collapsewatch.integrations.trl import watch
from tests.integrations.trl_tiny import tiny_grpo_trainer


def main(out: Path) -> None:
    trainer = tiny_grpo_trainer(str(out / "trainer"), max_steps=4, per_device_train_batch_size=4, num_generations=4,
                                gradient_accumulation_steps=2, steps_per_generation=4)
    cb = watch(trainer, out / "store", "ddp", sampling=Sampling(token_every=1), detectors=False)
    micro: list[dict] = []
    build = cb.tap.token_batch

    def spy(inputs, logps, entropies, step):
        b = build(inputs, logps, entropies, step)
        micro.append({"step": step, "seq_ids": b.seq_ids.tolist()})
        return b

    cb.tap.token_batch = spy
    trainer.train()
    rank = trainer.accelerator.process_index
    (out / f"micro-{rank}.json").write_text(json.dumps({"micro": micro, "tap_errors": cb.tap.errors}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
