"""Whether a run's embedded cluster gets real nodes, and which: decided before it is provisioned.

Behaviours observable only inside a running container (:mod:`conformance.framework.realnodes`)
need real nodes: a containerd and a kubelet on this host (:mod:`conformance.cluster.realnode`).
On the embedded (local) cluster a run uses them by default when the host supports them: one real
node per device class of the certified capability files (so the fake DRA drivers' kubelet plugin
prepares devices for real and the container sees their CDI environment), or one plain real node
without accelerators. ``--no-real-nodes`` turns them off, ``--real-nodes`` insists (a host that
cannot run them is then an error, not a quiet fallback); without either, the environment
variable ``KTHENA_REAL_NODES`` (``on``, ``off``, ``auto``) decides (the project's own tests set it
to ``off``, so only the tests about real nodes compete for the host). Either way the report says
what ran.

:func:`plan_real_nodes` and :func:`asked_by_env` are pure; :func:`host_problem` reads the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.errors import BadInput, HarnessError
from ..framework.realnodes import OBSERVED_REAL as REAL
from ..framework.realnodes import OBSERVED_SIMULATED as SIMULATED

PLAIN_POOL = "real"  # the real pool of a run without device classes
ENV = "KTHENA_REAL_NODES"
_CHOICES: dict[str, bool | None] = {"on": True, "off": False, "auto": None, "": None}


def asked_by_env(value: str | None) -> bool | None:
    """``KTHENA_REAL_NODES``'s answer: True (``on``), False (``off``), None (``auto`` or unset). Pure."""
    try:
        return _CHOICES[(value or "").strip().lower()]
    except KeyError:
        raise BadInput(f"{ENV}={value!r}: expected on, off or auto", f"unset {ENV} to decide by the host") from None


@dataclass(frozen=True)
class RealNodePlan:
    """``use`` real nodes or not; ``note`` what the report says about it (always one line)."""

    use: bool
    note: str


def plan_real_nodes(asked: bool | None, provider: str, problem: str | None) -> RealNodePlan:
    """Decide from ``asked`` (``--real-nodes`` True, ``--no-real-nodes`` False, neither None), the
    provider and what keeps the host from running real nodes (None: nothing). Pure.

    Raises :class:`HarnessError` when real nodes were asked for and cannot be had."""
    consequence = "behaviours observable only inside a running container are inconclusive"
    if provider != "local":
        if asked:
            raise HarnessError(
                f"--real-nodes: real nodes are the embedded cluster's (provider local), not provider {provider}'s",
                "on kind every node is real; an existing cluster declares its real nodes itself "
                "(ConfigMap kube-public/kthena-conformance-cluster)",
            )
        return RealNodePlan(False, f"real nodes: as the {provider} cluster declares them")
    if asked is False:
        return RealNodePlan(False, f"real nodes: none (--no-real-nodes); {consequence}")
    if problem is not None:
        if asked:
            raise HarnessError(f"--real-nodes: {problem}", "fix what is named, or run without --real-nodes")
        return RealNodePlan(False, f"real nodes: none, the host cannot run them ({problem}); kwok only, {consequence}")
    return RealNodePlan(True, "real nodes: yes (containerd and a kubelet on this host beside the kwok nodes)")


def host_problem(own_run_dir: Path) -> str | None:
    """Why this host cannot run real nodes now (preflight, or another cluster than the one in
    ``own_run_dir`` holds them: a kept cluster reused by the run holds them itself); None if it can."""
    from ..cluster.realnode import fleet, preflight

    reqs = preflight.evaluate(preflight.gather_facts())
    if not preflight.usable(reqs):
        return preflight.summary(reqs)
    holder = fleet.host_lock_holder()
    if holder is not None and str(own_run_dir) not in holder:
        return f"real nodes already run on this host ({holder}); one cluster at a time may run them"
    return None


def observed_notes(tests: Sequence[Any]) -> list[str]:
    """The report's lines on where Pod-level conditions were observed: which behaviours ran in
    containers on real nodes and which were simulated (each a :class:`TestResult` with
    ``observed``). Pure."""
    real = sorted(t.id for t in tests if t.observed and t.observed.startswith(REAL))
    simulated = sorted(t.id for t in tests if t.observed and t.observed.startswith(SIMULATED))
    out = []
    if real:
        out.append(f"observed in running containers on real nodes: {', '.join(real)}")
    if simulated:
        out.append(f"simulated (no container ran: kwok's stages played the kubelet): {', '.join(simulated)}")
    return out
