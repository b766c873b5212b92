"""Every wait the suite makes, named and documented with its maximum.

A test never picks its own number: it asks :class:`Timeouts` for a named wait
(``timeouts.seconds("pods-running")``) and passes that to :func:`.waits.wait_for`. So a slow
cluster is handled in one place (``--timeout-scale 3`` multiplies every wait; ``--timeout
recovery=600`` raises one), the effective values go into the report, and the waits table in docs/running-the-suite.md is
generated from :data:`WAITS` (:func:`documentation`).

Deadlines are cooperative: a wait polls until its deadline and then fails with what it last saw;
nothing kills a thread or a process on timeout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_SCALE = 100.0


@dataclass(frozen=True)
class Wait:
    """One named wait: its default maximum and what it bounds."""

    name: str
    seconds: float
    description: str


WAITS: dict[str, Wait] = {
    w.name: w
    for w in (
        Wait("admission", 15, "The API server answers a create or update (admission webhooks included)."),
        Wait("pods-created", 60, "The controller creates the Pods a ModelServing asks for."),
        Wait("pods-running", 120, "Created Pods are scheduled and reach Running and Ready."),
        Wait("servinggroups-ready", 180, "Every ServingGroup of a ModelServing is reported Running in status."),
        Wait("status-updated", 60, "The controller reports a change in status (observedGeneration, conditions)."),
        Wait("scale", 180, "A replica change (spec or scale subresource) is carried out and reported."),
        Wait("recovery", 180, "A failed or deleted Pod or ServingGroup is replaced according to the policy."),
        Wait("services", 60, "Services a plugin or the controller owns are created, changed or recreated."),
        Wait("endpoints", 60, "EndpointSlices list the expected addresses and hostnames."),
        Wait("events", 60, "An expected Event is recorded."),
        Wait("deletion", 120, "Deleted objects and everything they own are gone (garbage collection)."),
        Wait("steady-state", 8, "How long a 'must not change' observation lasts before it counts as held."),
        Wait("namespace-cleanup", 120, "A test's namespace is deleted after the test."),
        Wait("controller-ready", 60, "The implementation under test is running and answering."),
        Wait(
            "rollout",
            240,
            "A rolling update (image or template change) finishes: every Pod Running and Ready at the target "
            "and status reporting the update revision.",
        ),
        Wait(
            "progress-deadline",
            180,
            "An in-place update's progressDeadlineSeconds (60 s in the tests) passes and the controller reports "
            "ProgressDeadlineExceeded.",
        ),
        Wait("podgroups", 60, "PodGroups a controller owns for gang scheduling are created, changed or removed."),
        Wait(
            "eviction",
            60,
            "An eviction budget counts ServingGroups or Role instances that are ready again: a refused Eviction, "
            "retried, is allowed.",
        ),
        Wait(
            "drain",
            240,
            "A node drain (cordon, then refused Evictions retried while the controller replaces what was "
            "evicted elsewhere) removes every selected Pod from the node.",
        ),
        Wait(
            "autoscale",
            120,
            "An autoscaler acts on a changed metric: Prometheus scrapes it, a loop reads it and writes the replicas "
            "(upstream Kthena loops every 15 s).",
        ),
        Wait(
            "autoscale-down",
            420,
            "An autoscaler lowers replicas the metric no longer needs (covers upstream Kthena's 300 s scale-down "
            "stabilisation).",
        ),
        Wait(
            "autoscale-steady",
            30,
            "How long an autoscaler's 'must not change' observation lasts at most (two of upstream Kthena's 15 s "
            "loops): it ends earlier once the policy's status reports that the autoscaler wants the replicas the unit "
            "has (currentReplicas == desiredReplicas == them).",
        ),
    )
}


class TimeoutConfigError(ValueError):
    """A bad ``--timeout`` or ``--timeout-scale`` value (the message names the option)."""


@dataclass(frozen=True)
class Timeouts:
    """The effective waits: ``(override or default) * scale``."""

    scale: float = 1.0
    overrides: dict[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and 0 < self.scale <= MAX_SCALE):
            raise TimeoutConfigError(f"timeout scale must be > 0 and <= {MAX_SCALE:g}, got {self.scale!r}")
        for name, seconds in self.overrides.items():
            _known(name)
            if not (math.isfinite(seconds) and seconds > 0):
                raise TimeoutConfigError(f"timeout {name!r} must be > 0 seconds, got {seconds!r}")

    def seconds(self, name: str) -> float:
        """The effective maximum of the wait called ``name``."""
        wait = _known(name)
        return self.overrides.get(name, wait.seconds) * self.scale

    @classmethod
    def from_options(cls, scale: float | str, overrides: list[str]) -> Timeouts:
        """From ``--timeout-scale X`` and ``--timeout name=seconds`` (repeatable, or comma-separated;
        ``120`` and ``120s`` both mean 120 seconds)."""
        factor = _number(scale, "--timeout-scale", str(scale))
        if not 0 < factor <= MAX_SCALE:
            raise TimeoutConfigError(f"--timeout-scale: must be > 0 and <= {MAX_SCALE:g}, got {scale!r}")
        parsed: dict[str, float] = {}
        for entry in overrides:
            for item in (part.strip() for part in entry.split(",")):
                if not item:
                    continue
                name, sep, value = item.partition("=")
                name = name.strip()
                if not sep or not name:
                    raise TimeoutConfigError(f"--timeout: expected name=seconds, got {item!r}")
                if name not in WAITS:
                    raise TimeoutConfigError(f"--timeout: unknown wait {name!r} (known: {', '.join(WAITS)})")
                if name in parsed:
                    raise TimeoutConfigError(f"--timeout: {name!r} given more than once")
                seconds = _number(value.strip().removesuffix("s"), "--timeout", item)
                if seconds <= 0:
                    raise TimeoutConfigError(f"--timeout: seconds must be > 0, got {item!r}")
                parsed[name] = seconds
        return cls(scale=factor, overrides=parsed)

    def as_report(self) -> dict[str, Any]:
        """The effective values, their defaults and what they bound (the report's ``run.timeouts``)."""
        return {
            "scale": self.scale,
            "waits": {
                name: {"seconds": self.seconds(name), "default": wait.seconds, "description": wait.description}
                for name, wait in WAITS.items()
            },
        }


def documentation() -> str:
    """A markdown table of the waits and their defaults, for docs/running-the-suite.md."""
    lines = [
        "| wait | default (s) | what it bounds |",
        "|---|---:|---|",
        *(f"| `{w.name}` | {w.seconds:g} | {w.description} |" for w in WAITS.values()),
        "",
        "`--timeout-scale X` multiplies every wait (0 < X <= 100); `--timeout name=seconds` replaces one "
        "default before scaling. The report records the effective values.",
    ]
    return "\n".join(lines) + "\n"


def _known(name: str) -> Wait:
    try:
        return WAITS[name]
    except KeyError:
        raise TimeoutConfigError(f"unknown wait {name!r} (known: {', '.join(WAITS)})") from None


def _number(text: float | str, option: str, shown: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise TimeoutConfigError(f"{option}: not a number: {shown!r}") from None
    if not math.isfinite(value):
        raise TimeoutConfigError(f"{option}: not a finite number: {shown!r}")
    return value
