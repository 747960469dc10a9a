"""The trainer's progress line: step, reward, entropy, ratio p05 (A>0), clip fractions, and each new flag.

Probe metrics come from the monitor's last finished step (one step behind; the probe runs off the
training thread). The ratio and clip fields are NULL on an on-policy step (r ≡ 1): the line keeps the last step that
had them, marked ``(step N)`` when it is not the step shown. New detector events are printed above the bar as they
arrive.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from .config import TrainConfig

OFF_POLICY = ("ratio_p05_pos", "clip_low_frac", "clip_high_frac")
"""The progress line's fields an on-policy step leaves NULL."""


def _f(x: Any, fmt: str = ".3f") -> str:
    return "—" if x is None else format(x, fmt)


class Progress:
    def __init__(self, cfg: TrainConfig, enabled: bool) -> None:
        self.enabled = enabled and cfg.progress
        self.console = Console(stderr=True)
        self.seen: set[tuple] = set()
        self._bar = None
        self._off: dict[str, Any] = {}  # the OFF_POLICY values of the last step that had any, and its "step"
        if self.enabled:
            self._bar = RichProgress(TextColumn("[bold]{task.fields[run]}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("{task.fields[stats]}"), console=self.console)
            self._task = self._bar.add_task("train", total=cfg.steps, run=cfg.run_name, stats="")
            self._bar.start()

    def update(self, step: int, reward: float, latest: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self._bar.update(self._task, completed=step, stats=self.stats(reward, latest))

    def stats(self, reward: float, latest: dict[str, Any]) -> str:
        """The line's fields from ``latest`` (the monitor's last finished step, with its ``step``)."""
        if any(latest.get(k) is not None for k in OFF_POLICY):
            self._off = {**{k: latest.get(k) for k in OFF_POLICY}, "step": latest.get("step")}
        off = self._off
        older = f" (step {off['step']})" if off and off["step"] != latest.get("step") else ""
        return (f"reward {reward:.3f}  entropy {_f(latest.get('entropy_mean'))}  "
                f"r p05(A>0) {_f(off.get('ratio_p05_pos'))}  clip lo/hi {_f(off.get('clip_low_frac'))}/"
                f"{_f(off.get('clip_high_frac'))}{older}")

    def event(self, ev: Any) -> None:
        key = (ev.detector, ev.phase, ev.step_start)
        if key in self.seen:
            return  # an episode extended: already announced
        self.seen.add(key)
        colour = {"critical": "red", "warning": "yellow"}.get(ev.severity, "cyan")
        line = f"[{colour}]⚑ step {ev.step_start}: {ev.detector}/{ev.phase} ({ev.severity}) — {ev.message}"
        (self._bar.console if self._bar else self.console).print(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
