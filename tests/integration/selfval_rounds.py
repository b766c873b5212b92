"""Self-validation rounds: which faults share one controller start, and what runs again when a
round cannot be trusted (pure: the plan is a function of the tables, no cluster).

A *scoped* round starts the reference once with each of its faults scoped to the namespaces of its
own target behaviours (``kthena-ref run --fault NAME@LABEL``, the label the suite gives every test
namespace): no behaviour is the target of two faults of one round, so each behaviour runs once,
in its own namespace, where exactly one fault is on. A few untargeted *sentinel* behaviours run
beside them with no fault at all and must pass, and the controller must not crash: otherwise a
fault may have reached beyond its namespaces and the round is split in two and run again (down to
one fault, which then runs alone, process-wide). A fault whose targets do not all fail in a trusted
round runs again alone, process-wide (the variant as it always was), so a proof is only ever
accepted from a run where that fault is the only one its targets could meet.

Faults that cannot be scoped (the ones the rendered CRD schema consults: the harness installs that
schema for the whole cluster) run alone, one per controller start, as before; so does a fault the
colouring leaves alone in its round.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Round:
    """One controller start. ``faults``: fault -> its target behaviour ids; ``scoped``: each fault
    on only in its targets' namespaces (False: one fault, on everywhere)."""

    faults: Mapping[str, tuple[str, ...]]
    sentinels: tuple[str, ...] = ()
    scoped: bool = True
    name: str = field(default="", compare=False)

    def ids(self) -> list[str]:
        """The behaviours the round runs: every target, then the sentinels."""
        return list(dict.fromkeys([*(i for targets in self.faults.values() for i in targets), *self.sentinels]))

    def specs(self, label: Callable[[str], str]) -> list[str]:
        """The reference's ``--fault`` values: ``NAME@LABEL`` per target (``label``: behaviour id ->
        its namespace label) when scoped, else the bare names."""
        if not self.scoped:
            return list(self.faults)
        return [f"{fault}@{label(i)}" for fault, targets in self.faults.items() for i in targets]


def expand(patterns: Iterable[str], ids: Sequence[str]) -> tuple[str, ...]:
    """The behaviour ids (of ``ids``, in their order) matching any of ``patterns`` (ids or fnmatch)."""
    chosen = list(patterns)
    return tuple(i for i in ids if any(fnmatch.fnmatchcase(i, p) for p in chosen))


def alone(fault: str, targets: Sequence[str]) -> Round:
    """A fault on its own, process-wide: the variant as it ran before rounds."""
    return Round({fault: tuple(targets)}, scoped=False, name=fault)


def plan_rounds(
    caught_by: Mapping[str, Sequence[str]],
    ids: Sequence[str],
    *,
    unscopable: Iterable[str] = (),
    sentinels: Sequence[Sequence[str]] = (),
    max_targets: int = 40,
    key: Callable[[str], str] = lambda i: i,
) -> list[Round]:
    """The rounds that prove every fault of ``caught_by`` (fault -> target ids or patterns, expanded
    against the catalog's ``ids``).

    Greedy colouring: faults (those with a target most faults share first, then those with most
    targets, then by name) go into the first round where none of their targets is already a target (``key``: a
    behaviour's namespace label, so two ids sharing a label count as one behaviour) and the round
    stays within ``max_targets`` behaviours. Each scoped round gets one sentinel of each group of
    ``sentinels`` (alternatives, in order of preference) that none of its faults targets. Faults in ``unscopable`` and faults whose patterns
    match no behaviour run alone, and so does a fault left alone in its round (sentinels would only
    add to it). Scoped rounds come first, largest first (they take longest)."""
    blocked = set(unscopable)
    expanded = {fault: expand(patterns, ids) for fault, patterns in caught_by.items()}
    candidates = [f for f in expanded if f not in blocked and expanded[f]]
    keys_of = {f: {key(i) for i in expanded[f]} for f in candidates}
    sharing: dict[str, int] = {}
    for f in candidates:
        for k in keys_of[f]:
            sharing[k] = sharing.get(k, 0) + 1
    # the most constrained first (a behaviour many faults target), so they spread over the rounds
    conflicts = {f: max(sharing[k] for k in keys_of[f]) for f in candidates}
    scoped = sorted(candidates, key=lambda f: (-conflicts[f], -len(expanded[f]), f))
    groups: list[tuple[dict[str, tuple[str, ...]], set[str]]] = []
    for fault in scoped:
        keys = {key(i) for i in expanded[fault]}
        for members, taken in groups:
            if not keys & taken and len(taken) + len(keys) <= max_targets:
                members[fault] = expanded[fault]
                taken.update(keys)
                break
        else:
            groups.append(({fault: expanded[fault]}, set(keys)))
    shared = sorted((g for g in groups if len(g[0]) > 1), key=lambda g: -len(g[1]))
    rounds = [
        Round(
            dict(sorted(members.items())), pick_sentinels(sentinels, taken, key), name=f"round-{n + 1}-of-{len(shared)}"
        )
        for n, (members, taken) in enumerate(shared)
    ]
    single = {f for members, _ in groups if len(members) == 1 for f in members}
    return rounds + [alone(f, expanded[f]) for f in sorted(expanded) if f in blocked or not expanded[f] or f in single]


def pick_sentinels(
    groups: Sequence[Sequence[str]], taken: set[str], key: Callable[[str], str] = lambda i: i
) -> tuple[str, ...]:
    """Of each group, the first behaviour whose namespace label no fault of the round targets."""
    picked = (next((c for c in group if key(c) not in taken), None) for group in groups)
    return tuple(c for c in picked if c is not None)


def reruns(done: Round, proven: Mapping[str, bool], trusted: bool) -> list[Round]:
    """What runs again after ``done``: nothing for a fault alone (its verdict is final); for an
    untrusted scoped round (a sentinel failed, the controller crashed) its two halves, or the fault
    alone when it was one; for a trusted one, each fault whose proof failed, alone."""
    if not done.scoped:
        return []
    items = sorted(done.faults.items())
    if not trusted:
        if len(items) == 1:
            return [alone(*items[0])]
        half = len(items) // 2
        return [
            Round(dict(part), done.sentinels, name=f"{done.name}/{n}")
            for n, part in ((1, items[:half]), (2, items[half:]))
        ]
    return [alone(fault, targets) for fault, targets in items if not proven.get(fault, False)]


def crashed(log: str) -> bool:
    """Whether a controller's log shows an exception nothing caught (a traceback not following a
    logged ERROR line): the process died, and every behaviour after it would fail with it."""
    lines = log.splitlines()
    return any(
        line.startswith("Traceback (most recent call last)") and (n == 0 or " ERROR " not in lines[n - 1])
        for n, line in enumerate(lines)
    )
