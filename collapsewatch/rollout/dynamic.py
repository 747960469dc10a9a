"""Dynamic sampling (DAPO, arXiv 2503.14476 §3.2; as run by SAMPO / ARL-Arena): a group whose rewards are all
equal has advantage 0 everywhere and teaches nothing, so the rollout is repeated and such groups are left out
until the batch holds the target number of groups with unequal rewards, or the tries run out.

ARL-Arena's ``dynamic_multi_turn_loop`` / ``filter_group_data`` (WillDreamer/ARL-Arena
``agent_system/multi_turn_rollout/{rollout_loop,utils}.py`` @ a25a2a229c85), followed here:

* every try rolls out the *same* prompts again (``gen_batch`` is reused; DAPO's own recipe draws new prompts);
* a try keeps its groups with unequal rewards, in order, up to the groups still missing;
* the last try (``max_tries``) fills what is still missing with its all-equal groups, in order, so the trained
  batch always has ``n_groups`` groups (some may then be degenerate: ``zero_std_group_frac`` shows them).

"All equal" is :func:`collapsewatch.batch.group_zero_std` (NaN rewards left out; < 2 scored rewards = no signal),
the rule of the advantages and of ``zero_std_group_frac``. Not offered: ARL-Arena's cold start (no dynamic
sampling during the first 15 / 5 training steps of its SAMPO scripts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collapsewatch.batch import group_zero_std
from collapsewatch.rollout.batch import RolloutBatch, concat_batches, select_rows


@dataclass(frozen=True)
class DynamicSamplingStats:
    """What dynamic sampling did for one trained batch (logged as the step scalars of the same names)."""

    tries: int
    """Rollouts made (1 = the first already had enough groups with unequal rewards)."""
    resampled_groups: int
    """Groups rolled out again: (tries − 1) × groups per rollout."""
    filtered_groups: int
    """All-equal groups left out of the trained batch."""


def dynamic_rollout(rollout: Callable[[], RolloutBatch], n_groups: int, max_tries: int,
                    pad_id: int) -> tuple[RolloutBatch, DynamicSamplingStats]:
    """Call ``rollout()`` (the same prompts each time, ``n_groups`` groups) until ``n_groups`` groups with unequal
    rewards are collected or ``max_tries`` rollouts were made; the last try fills the gap with all-equal groups.
    Returns the kept rows (groups renumbered 0..n_groups−1 in the order kept) and what was done."""
    if n_groups < 1 or max_tries < 1:
        raise ValueError(f"dynamic_rollout needs n_groups >= 1 and max_tries >= 1, got {n_groups}, {max_tries}")
    kept: list[RolloutBatch] = []
    have, filtered, tries = 0, 0, 0
    while have < n_groups and tries < max_tries:
        tries += 1
        batch = rollout()
        good, flat = _split_groups(batch)
        take = good[: n_groups - have]
        fill = flat[: n_groups - have - len(take)] if tries == max_tries else []  # ARL-Arena's last_try
        filtered += len(flat) - len(fill)
        take = take + fill
        if take:
            kept.append(select_rows(batch, [r for g in sorted(take) for r in g]))
            have += len(take)
    out = concat_batches(kept, pad_id)
    _, out.group_ids = out.group_ids.unique_consecutive(return_inverse=True)  # 0..n−1 in the order kept
    return out, DynamicSamplingStats(tries, (tries - 1) * n_groups, filtered)


def _split_groups(batch: RolloutBatch) -> tuple[list[list[int]], list[list[int]]]:
    """Row lists of the groups with unequal rewards and of the all-equal groups, each in group order."""
    flat_rows = group_zero_std(batch.group_ids, batch.rewards).tolist()  # (B,) per row: its group has no signal
    groups: dict[int, list[int]] = {}
    for row, g in enumerate(batch.group_ids.tolist()):
        groups.setdefault(g, []).append(row)
    good = [rows for g, rows in sorted(groups.items()) if not flat_rows[rows[0]]]
    flat = [rows for g, rows in sorted(groups.items()) if flat_rows[rows[0]]]
    return good, flat
