"""Fault cases of issue 31 (what a profile's success proves): a plugin's scope.roles ignored, and
repeated env entries of a template collapsed in its Pods."""

from __future__ import annotations

from typing import Any

from .builders import MS, env_of, fresh_pods, template
from .fault_cases_plugins import _plugins, _tweaked, _tweaks, _two_roles


def probe_scope_roles() -> list[str]:
    """demo-pod-tweaks listed for Role a only: the Pods it annotated."""
    return _tweaked(_plugins(_two_roles().build(), _tweaks({"roles": ["a"]})))


def probe_repeated_env() -> list[Any]:
    """A template with two env entries named OPTS: the values the Pod's container carries for it."""
    env = [{"name": "OPTS", "value": "--first"}, {"name": "OPTS", "value": "--second"}]
    pod = fresh_pods(MS().role("r", 1, 0, entry=template(env=env)).build())[0]
    container = pod["spec"]["containers"][0]
    return [e.get("value") for e in container.get("env") or [] if e["name"] == "OPTS"] or [env_of(container)]


CASES: list[tuple[Any, ...]] = [
    ("scope-roles-ignored", probe_scope_roles, ["ms-0-a-0-0", "ms-0-a-0-1"],
     ["ms-0-a-0-0", "ms-0-a-0-1", "ms-0-b-0-0", "ms-0-b-0-1"], ("scope-target-all-entry-only",)),
    ("repeated-env-collapsed", probe_repeated_env, ["--first", "--second"], ["--first"], ()),
]  # fmt: skip
