"""Acting on a phase in the built-in trainer: ``--on-phase RULE=ACTION`` (repeatable).

RULE selects detector events: ``phase`` (``accelerated_collapse``; a name two detectors share, ``drift`` or
``blowup``, matches both), ``detector/phase`` (``isdd/drift``), or a detector name (``grad``: any of its
phases), each optionally ``@severity`` (``entropy@critical``: only once the episode is at least that
severe). Names are checked against the detectors' phases (:data:`collapsewatch.detectors.PHASES`).

ACTION:

* ``checkpoint`` — save a checkpoint (to ``<store>/<run>/checkpoint/`` or ``checkpoint_dir``) at the next rollout
  boundary;
* ``stop`` — stop training at the next optimizer-step boundary (the run ends ``finished``, stopped early);
* ``rollback[:key=value,…]`` — at the next rollout boundary, restore the newest rollback snapshot taken
  before the episode's first step (model, optimizer, data-order and sampling RNGs, step count), apply the
  changed settings — ``lr``, ``objective``, ``objective_params.NAME``, ``mini_batches``, ``ppo_epochs``,
  ``max_grad_norm`` — and train on from there. E.g. ``rollback:lr=1e-4`` or
  ``rollback:objective=llds,objective_params.lam=0.2``. Snapshots are in-memory copies taken at every
  rollout boundary while a rollback rule exists (the last :data:`KEEP` are kept). A rollback rule fires once;
  if no snapshot is old enough, training stops instead (said in the log);
* ``notify:URL`` — POST the event to an http(s) URL in its service's body (Slack, Discord, else
  :func:`collapsewatch.alerts.event_payload`) through a :class:`collapsewatch.sinks.webhook.WebhookSink`: on a
  background thread (a slow or dead receiver never stalls training; a failure is logged once per host), one message
  per episode and severity, a digest when many are queued at once.

Each rule acts once per episode, when the episode first matches. The Monitor calls :meth:`PhaseActions.on_event`
on the training thread (inside ``observe`` / ``log``, mid-step), so actions that touch the model only
*record* a request there; the loop carries them out at its boundaries (:meth:`PhaseActions.at_rollout`).
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..detectors import PHASES
from ..detectors.events import SEVERITY_RANK

log = logging.getLogger("collapsewatch")
ACTIONS = ("checkpoint", "stop", "rollback", "notify")
ROLLBACK_KEYS = ("lr", "objective", "mini_batches", "ppo_epochs", "max_grad_norm")
KEEP = 8
"""Rollback snapshots kept (one per rollout boundary)."""


@dataclass(frozen=True)
class Rule:
    """One parsed ``--on-phase`` rule."""

    text: str
    detectors: frozenset[str]
    phase: str | None
    """None: any phase of ``detectors``."""
    severity: str
    action: str
    changes: tuple[tuple[str, Any], ...] = ()
    url: str | None = None

    def matches(self, event: Any) -> bool:
        return (event.detector in self.detectors and (self.phase is None or event.phase == self.phase)
                and SEVERITY_RANK.get(event.severity, -1) >= SEVERITY_RANK[self.severity])


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _selector(text: str, rule: str) -> tuple[frozenset[str], str | None, str]:
    sel, _, severity = text.partition("@")
    severity = severity or "info"
    if severity not in SEVERITY_RANK:
        raise ValueError(f"--on-phase {rule!r}: unknown severity {severity!r}; known: {', '.join(SEVERITY_RANK)}")
    detector, slash, phase = sel.partition("/")
    if slash:
        if detector not in PHASES or phase not in PHASES[detector]:
            known = ", ".join(f"{d}/{p}" for d, ps in PHASES.items() for p in ps)
            raise ValueError(f"--on-phase {rule!r}: unknown detector/phase {sel!r}; known: {known}")
        return frozenset([detector]), phase, severity
    if sel in PHASES:
        return frozenset([sel]), None, severity
    owners = frozenset(d for d, ps in PHASES.items() if sel in ps)
    if not owners:
        known = sorted({*PHASES, *(p for ps in PHASES.values() for p in ps)})
        raise ValueError(f"--on-phase {rule!r}: unknown phase or detector {sel!r}; known: {', '.join(known)}")
    return owners, sel, severity


def parse_rule(text: str) -> Rule:
    """``RULE=ACTION`` → Rule; ValueError naming the rule and what is wrong."""
    sel, eq, action = str(text).partition("=")
    if not eq or not sel or not action:
        raise ValueError(f"--on-phase {text!r}: expected PHASE=ACTION, e.g. accelerated_collapse=stop")
    detectors, phase, severity = _selector(sel.strip(), text)
    name, _, arg = action.strip().partition(":")
    if name not in ACTIONS:
        raise ValueError(f"--on-phase {text!r}: unknown action {name!r}; known: {', '.join(ACTIONS)}")
    if name == "notify":
        if not arg.startswith(("http://", "https://")):
            raise ValueError(f"--on-phase {text!r}: notify needs an http(s) URL, e.g. notify:http://127.0.0.1:9000/")
        return Rule(text, detectors, phase, severity, name, url=arg)
    if name in ("checkpoint", "stop") and arg:
        raise ValueError(f"--on-phase {text!r}: {name} takes no argument")
    changes = []
    for item in filter(None, arg.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not (key in ROLLBACK_KEYS or key.startswith("objective_params.")):
            raise ValueError(f"--on-phase {text!r}: rollback changes are key=value with key one of "
                             f"{', '.join(ROLLBACK_KEYS)}, objective_params.NAME; got {item!r}")
        changes.append((key, _value(value)))
    return Rule(text, detectors, phase, severity, name, changes=tuple(changes))


def changed_config(cfg: Any, changes: tuple[tuple[str, Any], ...]) -> Any:
    """``cfg`` (a TrainConfig) with a rollback's changes; its validation runs (ValueError names the field)."""
    values = {k: v for k, v in changes if not k.startswith("objective_params.")}
    new_params = {k.split(".", 1)[1]: v for k, v in changes if k.startswith("objective_params.")}
    # another objective starts from its own defaults: the old one's hyper-parameters may not exist there
    params = {} if values.get("objective", cfg.objective) != cfg.objective else dict(cfg.objective_params)
    return replace(cfg, **values, objective_params={**params, **new_params}, on_phase=())


def check_rules(rules: tuple[str, ...], cfg: Any) -> tuple[Rule, ...]:
    """Parse every rule and try each rollback's changed config now, so a bad rule fails before training."""
    parsed = tuple(parse_rule(r) for r in rules)
    for rule in parsed:
        if rule.action == "rollback":
            try:
                changed_config(cfg, rule.changes)
            except (ValueError, TypeError) as e:
                raise ValueError(f"--on-phase {rule.text!r}: {e}") from e
    return parsed


@dataclass
class Snapshot:
    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    rng: Any
    gen: torch.Tensor
    torch_rng: torch.Tensor


@dataclass(frozen=True)
class Restart:
    """What the loop continues from after a rollback."""

    step: int
    cfg: Any


class PhaseActions:
    """The ``--on-phase`` rules of one run: requests from events, carried out at the loop's boundaries."""

    def __init__(self, rules: tuple[str, ...], cfg: Any, *, world_size: int = 1, run: str = "") -> None:
        self.rules = check_rules(rules, cfg)
        self.rollback = any(r.action == "rollback" for r in self.rules)
        if self.rollback and world_size > 1:
            raise ValueError("--on-phase …=rollback needs a single process (ranks would roll back apart)")
        self.run = run
        self.stop = False
        self.done: list[str] = []
        """One line per action carried out (also logged)."""
        self._pending: list[tuple[Rule, Any]] = []
        self._fired: set[tuple[int, tuple]] = set()
        self._rolled_back: set[Rule] = set()
        self._snapshots: deque[Snapshot] = deque(maxlen=KEEP)
        self._hooks: dict[str, Any] = {}  # URL → its Sinks (one WebhookSink, its news filter)

    def on_event(self, event: Any) -> None:
        """The Monitor's ``on_event``: record what each matching rule asks for (once per episode)."""
        for i, rule in enumerate(self.rules):
            if (i, event.key) in self._fired or not rule.matches(event):
                continue
            self._fired.add((i, event.key))
            if rule.action == "notify":
                self._notify(rule, event)
            elif rule.action == "stop":
                self.stop = True
                self._say(f"stop at step {event.step_end}: {event.detector}/{event.phase} ({rule.text})")
            else:
                self._pending.append((rule, event))

    def snapshot(self, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer, rng: Any,
                 gen: torch.Generator) -> None:
        """Keep the state before optimizer step ``step`` (only while a rollback rule exists)."""
        if not self.rollback or (self._snapshots and self._snapshots[-1].step == step):
            return
        weights = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self._snapshots.append(Snapshot(step, weights, copy.deepcopy(opt.state_dict()), rng.getstate(),
                                        gen.get_state(), torch.get_rng_state()))

    def at_rollout(self, step: int, cfg: Any, model: torch.nn.Module, opt: torch.optim.Optimizer, rng: Any,
                   gen: torch.Generator, save: Callable[[int], Any]) -> Restart | None:
        """Carry out the pending checkpoint / rollback requests; a Restart when the run was rolled back."""
        pending, self._pending = self._pending, []
        restart = None
        for rule, event in pending:
            if rule.action == "checkpoint":
                save(step)
                self._say(f"checkpoint at step {step}: {event.detector}/{event.phase} ({rule.text})")
            elif rule.action == "rollback" and restart is None and rule not in self._rolled_back:
                self._rolled_back.add(rule)
                restart = self._restore(rule, event, step, cfg, model, opt, rng, gen)
        return restart

    def _restore(self, rule: Rule, event: Any, step: int, cfg: Any, model: torch.nn.Module,
                 opt: torch.optim.Optimizer, rng: Any, gen: torch.Generator) -> Restart | None:
        snap = next((s for s in reversed(self._snapshots) if s.step < event.step_start), None)
        if snap is None:
            self.stop = True
            self._say(f"rollback impossible at step {step}: no snapshot before step {event.step_start} "
                      f"(kept {[s.step for s in self._snapshots]}); stopping instead ({rule.text})")
            return None
        new_cfg = changed_config(cfg, rule.changes)
        model.load_state_dict(snap.model)
        opt.load_state_dict(snap.optimizer)
        for group in opt.param_groups:  # the optimizer's state dict carries the old learning rate
            group["lr"] = new_cfg.lr
        rng.setstate(snap.rng)
        gen.set_state(snap.gen)
        torch.set_rng_state(snap.torch_rng)
        while self._snapshots and self._snapshots[-1].step > snap.step:
            self._snapshots.pop()  # the discarded branch's states
        changes = ", ".join(f"{k}={v}" for k, v in rule.changes) or "no change"
        self._say(f"rollback at step {step} to step {snap.step} (before {event.detector}/{event.phase} from "
                  f"step {event.step_start}) with {changes} ({rule.text})")
        return Restart(snap.step, new_cfg)

    def _notify(self, rule: Rule, event: Any) -> None:
        from ..sinks import Sinks
        from ..sinks.webhook import WebhookSink

        if rule.url not in self._hooks:  # the rule's own @severity decides what is sent: the sink sends from info
            self._hooks[rule.url] = Sinks([WebhookSink(rule.url, least="info")])
        hook = self._hooks[rule.url]
        if hook.events([dict(event.as_row(), run=self.run)]):
            self._say(f"notify {hook.sinks[0].label}: {event.detector}/{event.phase} at step {event.step_start}")

    def close(self, timeout: float = 10.0) -> None:
        """Send the notify messages still queued (waiting at most ``timeout`` seconds per URL)."""
        for hook in self._hooks.values():
            for sink in hook.sinks:
                sink.close(timeout)

    def _say(self, line: str) -> None:
        self.done.append(line)
        log.warning("collapsewatch: %s", line)
