"""The exploration the slot agents run together, batch by batch.

A batch holds at most one proposal per decision maker, each changing one slot of its own
dimension from the incumbent (the fastest correct candidate so far). Once the batch is judged
its candidates and the incumbent are ranked by time; a proposal that ranks above the incumbent
by more than the noise wins. A maker that won keeps its direction; one that lost turns round,
then moves to its next slot; two makers that won in the same batch get their changes combined.
Failures (a build error, a wrong answer) rank last and are never retried: identical sources
are judged once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.templates.slots import Config, DecisionMaker, Observation, Slot, SlotSpace

NOISE_FLOOR = 0.01


@dataclass(frozen=True)
class Proposal:
    config: Config
    maker: str  # a dimension, "initial", "fallback" or "combined"
    slot: str | None = None
    changes: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Outcome:
    ok: bool
    ms: float | None = None
    iqr_ms: float | None = None
    reason: str = ""


@dataclass
class _Explorer:
    """Where one maker is in its walk over its slots."""

    maker: DecisionMaker
    slots: list[Slot]
    index: int = 0
    direction: int = 1
    turned: bool = False
    done: bool = False


@dataclass
class Search:
    space: SlotSpace
    makers: list[DecisionMaker]
    obs: Observation
    max_candidates: int = 12
    incumbent: Config | None = None
    best: Outcome | None = None
    judged: dict[str, Outcome] = field(default_factory=dict)
    batch: list[tuple[Proposal, Outcome | None]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    history: list[tuple[Proposal, Outcome]] = field(default_factory=list)
    _explorers: list[_Explorer] = field(default_factory=list)
    _started: bool = False
    _combined: Proposal | None = None
    _closed: list[tuple[Proposal, Outcome | None]] | None = None

    def __post_init__(self) -> None:
        for maker in self.makers:
            slots = [s for s in self.space.slots.values() if maker.owns(s) and len(s.values) > 1]
            self._explorers.append(_Explorer(maker, slots, done=not slots))

    # -- what to judge next -------------------------------------------------------------------
    def next(self) -> Proposal | None:
        if not self._started:
            self._started = True
            from agent.templates.slots import initial_config

            config = initial_config(self.space, self.makers, self.obs)
            self.batch = [(Proposal(config, "initial"), None)]
            return self.batch[0][0]
        pending = [p for p, o in self.batch if o is None]
        if pending:
            return pending[0]
        self._close_batch()
        if len(self.judged) >= self.max_candidates:
            return None
        if self.incumbent is None:
            return self._fallback()
        self.batch = [(p, None) for p in self._new_batch()]
        return self.batch[0][0] if self.batch else None

    def record(self, proposal: Proposal, outcome: Outcome) -> None:
        key = self.space.key(proposal.config)
        self.judged[key] = outcome
        self.history.append((proposal, outcome))
        self.obs.times[key] = outcome.ms if outcome.ok else None
        self.batch = [(p, outcome if p is proposal else o) for p, o in self.batch]
        if self.incumbent is None and outcome.ok:
            self.incumbent, self.best = proposal.config, outcome
        what = (
            f"{outcome.ms:.4g} ms"
            if outcome.ok and outcome.ms is not None
            else ("ok" if outcome.ok else outcome.reason)
        )
        self.log.append(
            f"{proposal.maker}{' ' + str(dict(proposal.changes)) if proposal.changes else ''}: {what}"
        )

    def seen(self, config: Config) -> Outcome | None:
        return self.judged.get(self.space.key(config))

    # -- batches ------------------------------------------------------------------------------
    def _close_batch(self) -> None:
        """Rank the finished batch with the incumbent; move the incumbent and the makers (once)."""
        if self._closed is self.batch:
            return
        self._closed = self.batch
        if self.incumbent is None or self.best is None or self.best.ms is None:
            return
        timed = [(p, o) for p, o in self.batch if o is not None and o.ok and o.ms is not None]
        ranked = sorted(timed, key=lambda po: po[1].ms or 0.0)
        winners = [
            p for p, o in ranked if self._beats(o, self.best) and p.maker not in ("initial", "fallback")
        ]
        for explorer in self._explorers:
            mine = [p for p, _ in self.batch if p.maker == explorer.maker.dimension]
            if not mine:
                continue
            if mine[0] in winners:
                explorer.turned = False
            else:
                self._turn(explorer)
        if winners:
            top = winners[0]
            self.incumbent, self.best = top.config, next(o for p, o in ranked if p is top)
            self.log.append(f"incumbent <- {top.maker} {dict(top.changes)}")
            if len(winners) >= 2:
                merged = dict(self.incumbent)
                for p in winners[1:]:
                    merged.update(dict(p.changes))
                repaired = self.space.repair(merged)
                if repaired is not None:
                    changes = tuple(c for p in winners for c in p.changes)
                    self._combined = Proposal(repaired, "combined", changes=changes)

    def _beats(self, new: Outcome, old: Outcome) -> bool:
        if new.ms is None or old.ms is None:
            return False
        noise = max(NOISE_FLOOR, ((new.iqr_ms or 0.0) + (old.iqr_ms or 0.0)) / (2 * old.ms))
        return new.ms < old.ms * (1 - noise)

    def _turn(self, explorer: _Explorer) -> None:
        if not explorer.turned:
            explorer.direction, explorer.turned = -explorer.direction, True
            return
        explorer.turned, explorer.direction = False, 1
        explorer.index += 1
        if explorer.index >= len(explorer.slots):
            explorer.done = True

    def _new_batch(self) -> list[Proposal]:
        proposals: list[Proposal] = []
        combined, self._combined = self._combined, None
        if combined is not None and self.seen(combined.config) is None:
            proposals.append(combined)
        for explorer in self._explorers:
            proposal = self._propose(explorer)
            if proposal is not None and all(p.config != proposal.config for p in proposals):
                proposals.append(proposal)
        room = self.max_candidates - len(self.judged)
        return proposals[: max(room, 0)]

    def _propose(self, explorer: _Explorer) -> Proposal | None:
        """The maker's next one-slot change of the incumbent that is valid and not judged yet."""
        assert self.incumbent is not None
        while not explorer.done:
            slot = explorer.slots[explorer.index]
            current = self.incumbent[slot.name]
            i = slot.values.index(current)
            j = i + explorer.direction
            while 0 <= j < len(slot.values):
                # Only this maker's own slots may move: one dimension per proposal.
                others = {n for n, s in self.space.slots.items() if not explorer.maker.owns(s)}
                config = self.space.repair(
                    {**self.incumbent, slot.name: slot.values[j]}, pinned=others | {slot.name}
                )
                if config is not None and self.seen(config) is None and config != self.incumbent:
                    changes = tuple((k, v) for k, v in config.items() if self.incumbent.get(k) != v)
                    return Proposal(config, explorer.maker.dimension, slot.name, changes)
                j += explorer.direction
            self._turn(explorer)
        return None

    def _fallback(self) -> Proposal | None:
        """After the first candidate failed: the most conservative valid point, once."""
        if any(p.maker == "fallback" for p, _ in self.batch):
            return None
        config = self.space.repair({s.name: s.values[0] for s in self.space.slots.values()})
        if config is None or self.seen(config) is not None:
            return None
        self.batch = [(Proposal(config, "fallback"), None)]
        return self.batch[0][0]
