"""Can an image patch move Pods from one revision to the next? (pure, no I/O).

Why this module exists: under ``rolloutStrategy.updateMethod: InPlace`` the controller patches
container images on existing Pods, but only when an image patch alone turns the old Pods into
exactly the Pods the new revision would create. Admission never blocks an update for this (the
design review of upstream PR #1882 removed that webhook); instead the controller asks this module
and, when there is any finding, recreates the ServingGroup (or, under RoleRollingUpdate, the Role
instance) and reports the findings in an ``InPlaceUpdateFallback`` event. ``kthena-ref
check-update`` runs the same check on two files, so users can see the answer before applying.

A finding is any change an image patch cannot apply, listed exhaustively and in a deterministic
order (spec order: ModelServing fields, then Roles in the order of the new revision, entry before
worker, then removed Roles and the Role order), each with the field path and one plain sentence:

- only the ``image`` of regular containers may differ; any other difference in a Role's
  ``entryTemplate`` or ``workerTemplate`` (labels, annotations, any PodSpec field, init containers,
  env, command, resources, volumes...) is reported at its path, as are Role and container names,
  order, additions and removals, ``workerReplicas`` and an added or removed ``workerTemplate``;
- the fields that only pace a rollout (Role ``replicas``, ``maxUnavailable``, ``maxSurge``,
  ``partition``; they are not part of a revision, see :func:`.pods.role_template`) and the
  ModelServing's ``replicas``, ``rolloutStrategy``, ``recoveryPolicy``,
  ``template.restartGracePeriodSeconds`` and ``revisionHistoryLimit`` never are;
- a Pod template whose images change must have a ``restartPolicy`` that resolves to ``Always``
  (omitted = Always), and none of its regular containers may set ``restartPolicy`` or
  ``restartPolicyRules``: the update relies on kubelet restarting the patched container. These
  rules are checked on the new template; a changed value is reported as a change anyway;
- ``restartPolicy`` and ``imagePullPolicy`` compare by their resolved values (an omitted
  ``imagePullPolicy`` resolves as the API server defaults it: ``Always`` for an image without tag
  and digest or tagged ``latest``, otherwise ``IfNotPresent``), so setting one explicitly to the
  value it already had is no finding. An image change that changes the resolved pull policy is
  one: the Pod keeps its policy, so the patch could not match the Pod recreate would make;
- absent, ``null``, ``[]`` and ``{}`` are the same value (they make the same Pod);
- at ModelServing level (:func:`check_eligibility`, :func:`check_role_eligibility`): changes of
  ``schedulerName``, the plugin chain (compared as :func:`..plugins.base.normalized_chain`
  compares it), ``gangPolicy`` and ``networkTopology``, and every plugin of the new ModelServing
  that does not declare ``supports_in_place`` (headless-service, spec reading 29) even when only
  images change. ``gangPolicy`` and ``networkTopology`` are not part of a revision: the controller
  compares them with what the unit's ControllerRevision recorded (:func:`check_group_settings`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .. import faults
from ..api.types import ModelServing, Role
from ..plugins.base import PluginConfigError, Registry, normalized_chain
from ..plugins.builtin import REGISTRY
from .pods import group_settings, role_template

ONLY_IMAGES = "only regular-container images can change in place"
_RESTART_REASON = "the in-place update relies on kubelet restarting the patched container"


@dataclass(frozen=True)
class Finding:
    """One change an image patch cannot apply: where it is and why it blocks an in-place update."""

    field: str  # e.g. "spec.template.roles[0].entryTemplate.spec.containers[0].command"
    reason: str  # one plain sentence


@dataclass(frozen=True)
class ImageChange:
    """A regular container whose image differs between the two revisions."""

    role: str
    template: str  # "entry" | "worker"
    container: str
    old: str
    new: str


# -- image references --------------------------------------------------------------------------

# The grammar of github.com/distribution/reference, which the API server's defaulting parses with.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)


def parse_image(image: str) -> tuple[str, str, str] | None:
    """(repository, tag, digest) of an image reference ("" for a part it lacks), None if invalid.

    ``reg:5000/img`` is repository ``reg:5000/img`` without a tag (the colon belongs to the
    registry's port); ``img@sha256:...`` has a digest and no tag."""
    match = _REFERENCE.fullmatch(image)
    if match is None:
        return None
    return match["name"], match["tag"] or "", match["digest"] or ""


def default_pull_policy(image: str) -> str:
    """The ``imagePullPolicy`` the API server gives a container that omits it: ``Always`` when the
    tag is ``latest``, or there is neither a tag nor a digest; otherwise ``IfNotPresent`` (also
    for a reference it cannot parse, as the API server does)."""
    parsed = parse_image(image)
    if parsed is None:
        return "IfNotPresent"
    _, tag, digest = parsed
    if tag == "latest" or (not tag and not digest):
        return "Always"
    return "IfNotPresent"


def effective_pull_policy(container: dict[str, Any]) -> str:
    policy = container.get("imagePullPolicy")
    if faults.active("explicit-pull-policy-ignored"):
        policy = None  # an explicit imagePullPolicy is not looked at: the image's default stands
    return str(policy) if policy else default_pull_policy(str(container.get("image") or ""))


# -- generic differences -----------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _key(key: str) -> str:
    """A path segment for a map key: ``.name``, or ``["app.kubernetes.io/name"]`` when quoting is needed."""
    return f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{json.dumps(key)}]"


def _join(rel: str, segment: str) -> str:
    return (rel + segment).lstrip(".")


def _empty(value: Any) -> bool:
    return value is None or value in ([], {})


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _diff(old: Any, new: Any, path: str, rel: str) -> list[tuple[str, str]]:
    """Every difference between ``old`` and ``new`` as (field path, "<rel> changed ..." sentence)."""
    if old == new or (_empty(old) and _empty(new)):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, str]] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), path + _key(key), _join(rel, _key(key)))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            out += _diff(o, n, f"{path}[{i}]", f"{rel}[{i}]")
        return out
    if _empty(old):
        return [(path, f"{rel} added")]
    if _empty(new):
        return [(path, f"{rel} removed")]
    if isinstance(old, list) and isinstance(new, list):
        return [(path, f"{rel} changed from {len(old)} to {len(new)} items")]
    if _scalar(old) and _scalar(new):
        return [(path, f"{rel} changed from {_show(old)} to {_show(new)}")]
    return [(path, f"{rel} changed")]


def _changes(old: Any, new: Any, path: str, rel: str) -> list[Finding]:
    return [Finding(p, f"{ONLY_IMAGES}; {what}") for p, what in _diff(old, new, path, rel)]


# -- names: added, removed, renamed, reordered -------------------------------------------------


@dataclass(frozen=True)
class _Pairing:
    """How two named lists line up: matched (old index, new index) pairs and the rest."""

    pairs: list[tuple[int, int]]  # by new index; renamed items are paired by position
    renamed: list[int]  # new indexes whose item was renamed (paired with the same old index)
    added: list[int]  # new indexes
    removed: list[int]  # old indexes
    reordered: bool  # do the items in both lists appear in another order?


def _pair(old: list[str], new: list[str]) -> _Pairing:
    old_set, new_set = set(old), set(new)
    old_index = {name: i for i, name in reversed(list(enumerate(old)))}  # first occurrence wins
    pairs, renamed, added, used_old = [], [], [], set()
    for j, name in enumerate(new):
        if name in old_set:
            pairs.append((old_index[name], j))
            used_old.add(old_index[name])
        elif j < len(old) and old[j] not in new_set:
            pairs.append((j, j))
            renamed.append(j)
            used_old.add(j)
        else:
            added.append(j)
    removed = [i for i, name in enumerate(old) if i not in used_old and name not in new_set]
    common_old = [n for n in old if n in new_set]
    common_new = [n for n in new if n in old_set]
    return _Pairing(pairs, renamed, added, removed, common_old != common_new)


# -- Pod templates -----------------------------------------------------------------------------

_CONTAINER_SPECIAL = ("name", "image", "imagePullPolicy", "restartPolicy", "restartPolicyRules")


def _compare_template(
    old: dict[str, Any], new: dict[str, Any], path: str, role: str, which: str
) -> tuple[list[Finding], list[ImageChange]]:
    """Findings and image changes between two PodTemplateSpecs (API dicts) of Role ``role``."""
    findings: list[Finding] = []
    images: list[ImageChange] = []
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    findings += _changes(old_meta, new_meta, f"{path}.metadata", "metadata")
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    spec_path = f"{path}.spec"
    old_containers: list[dict[str, Any]] = old_spec.get("containers") or []
    new_containers: list[dict[str, Any]] = new_spec.get("containers") or []
    pairing = _pair([str(c.get("name")) for c in old_containers], [str(c.get("name")) for c in new_containers])

    for i, j in pairing.pairs:
        o, n = old_containers[i], new_containers[j]
        if o.get("image") != n.get("image"):
            images.append(ImageChange(role, which, str(n.get("name")), str(o.get("image")), str(n.get("image"))))
    patched = bool(images)
    if faults.active("eligibility-ignores-restart-policy"):
        patched = False  # the restartPolicy rules for templates whose images change are not checked

    # The Pod-level fields, restartPolicy by its resolved value.
    for key in sorted((set(old_spec) | set(new_spec)) - {"containers", "restartPolicy"}):
        findings += _changes(old_spec.get(key), new_spec.get(key), spec_path + _key(key), key)
    old_restart = old_spec.get("restartPolicy") or "Always"
    new_restart = new_spec.get("restartPolicy") or "Always"
    if old_restart != new_restart:
        findings.append(
            Finding(
                f"{spec_path}.restartPolicy",
                f"{ONLY_IMAGES}; restartPolicy changed from {old_restart} to {new_restart}",
            )
        )
    elif patched and new_restart != "Always":
        findings.append(
            Finding(
                f"{spec_path}.restartPolicy",
                f"restartPolicy is {new_restart}, but in-place updates need Always: {_RESTART_REASON}",
            )
        )

    # The containers: names and order, then each matched pair.
    for j in pairing.renamed:
        findings.append(
            Finding(
                f"{spec_path}.containers[{j}].name",
                f"{ONLY_IMAGES}; container {old_containers[j].get('name')} renamed to {new_containers[j].get('name')}",
            )
        )
    for j in pairing.added:
        findings.append(
            Finding(f"{spec_path}.containers[{j}]", f"{ONLY_IMAGES}; container {new_containers[j].get('name')} added")
        )
    for i in pairing.removed:
        findings.append(
            Finding(f"{spec_path}.containers[{i}]", f"{ONLY_IMAGES}; container {old_containers[i].get('name')} removed")
        )
    if pairing.reordered and not faults.active("eligibility-ignores-container-order"):
        findings.append(
            Finding(
                f"{spec_path}.containers",
                f"{ONLY_IMAGES}; containers reordered from "
                f"{', '.join(str(c.get('name')) for c in old_containers)} to "
                f"{', '.join(str(c.get('name')) for c in new_containers)}",
            )
        )
    for i, j in pairing.pairs:
        findings += _compare_container(old_containers[i], new_containers[j], f"{spec_path}.containers[{j}]", patched)
    return findings, images


def _compare_container(old: dict[str, Any], new: dict[str, Any], path: str, patched: bool) -> list[Finding]:
    findings: list[Finding] = []
    for key in sorted((set(old) | set(new)) - set(_CONTAINER_SPECIAL)):
        findings += _changes(old.get(key), new.get(key), path + _key(key), key)
    old_policy, new_policy = effective_pull_policy(old), effective_pull_policy(new)
    if old_policy != new_policy and not faults.active("eligibility-ignores-pull-policy"):
        if old.get("imagePullPolicy") and new.get("imagePullPolicy"):
            reason = f"{ONLY_IMAGES}; imagePullPolicy changed from {old_policy} to {new_policy}"
        else:
            reason = (
                f"imagePullPolicy is omitted and the image changes from {old.get('image')} to {new.get('image')}, "
                f"so the effective pull policy changes from {old_policy} to {new_policy}, which an image patch "
                f"cannot change; set imagePullPolicy explicitly (to {old_policy} to keep it)"
            )
        findings.append(Finding(f"{path}.imagePullPolicy", reason))
    for key in ("restartPolicy", "restartPolicyRules"):
        if _diff(old.get(key), new.get(key), "", ""):
            findings += _changes(old.get(key), new.get(key), f"{path}.{key}", key)
        elif patched and not _empty(new.get(key)):
            findings.append(
                Finding(
                    f"{path}.{key}",
                    f"regular containers may not set {key} for an in-place update: {_RESTART_REASON} "
                    "under the Pod's restartPolicy Always",
                )
            )
    return findings


# -- Roles -------------------------------------------------------------------------------------

_TEMPLATES = (("entryTemplate", "entry"), ("workerTemplate", "worker"))


def _compare_role(old: Role, new: Role, path: str) -> tuple[list[Finding], list[ImageChange]]:
    findings: list[Finding] = []
    images: list[ImageChange] = []
    old_data, new_data = role_template(old), role_template(new)
    if old.name != new.name:
        findings.append(Finding(f"{path}.name", f"{ONLY_IMAGES}; role {old.name} renamed to {new.name}"))
    others = (set(old_data) | set(new_data)) - {"name", "entryTemplate", "workerTemplate"}
    if faults.active("eligibility-ignores-worker-replicas"):
        others.discard("workerReplicas")
    for key in sorted(others):  # workerReplicas, and any field a revision gains later
        findings += _changes(old_data.get(key), new_data.get(key), path + _key(key), key)
    for key, which in _TEMPLATES:
        o, n = old_data.get(key), new_data.get(key)
        if o is None and n is None:
            continue
        if o is None or n is None:
            findings.append(Finding(f"{path}.{key}", f"{ONLY_IMAGES}; {key} {'added' if o is None else 'removed'}"))
            continue
        more, changed = _compare_template(o, n, f"{path}.{key}", new.name, which)
        findings += more
        images += changed
    return findings, images


def _roles_path(i: int) -> str:
    return f"spec.template.roles[{i}]"


def _compare_roles(old: list[Role], new: list[Role], role: str | None) -> tuple[list[Finding], list[ImageChange]]:
    findings: list[Finding] = []
    images: list[ImageChange] = []
    if role is not None:
        new_index = next((j for j, r in enumerate(new) if r.name == role), None)
        old_index = next((i for i, r in enumerate(old) if r.name == role), None)
        if new_index is None and old_index is None:
            raise ValueError(f"role {role!r} is in neither revision")
        if old_index is None:
            assert new_index is not None
            return [Finding(_roles_path(new_index), f"{ONLY_IMAGES}; role {role} added")], []
        if new_index is None:
            return [Finding(_roles_path(old_index), f"{ONLY_IMAGES}; role {role} removed")], []
        return _compare_role(old[old_index], new[new_index], _roles_path(new_index))

    pairing = _pair([r.name for r in old], [r.name for r in new])
    paired = dict((j, i) for i, j in pairing.pairs)
    for j, new_role in enumerate(new):
        if j in pairing.added:
            findings.append(Finding(_roles_path(j), f"{ONLY_IMAGES}; role {new_role.name} added"))
            continue
        more, changed = _compare_role(old[paired[j]], new_role, _roles_path(j))
        findings += more
        images += changed
    for i in pairing.removed:
        findings.append(Finding(_roles_path(i), f"{ONLY_IMAGES}; role {old[i].name} removed"))
    if pairing.reordered:
        findings.append(
            Finding(
                "spec.template.roles",
                f"{ONLY_IMAGES}; roles reordered from {', '.join(r.name for r in old)} to "
                f"{', '.join(r.name for r in new)}",
            )
        )
    return findings, images


def check_roles(old: list[Role], new: list[Role], *, role: str | None = None) -> list[Finding]:
    """Every change from the Roles ``old`` to the Roles ``new`` (two revisions) that an image patch
    cannot apply: all Roles (``role=None``, the ServingGroup as the unit) or only Role ``role``
    (RoleRollingUpdate; then the other Roles and the Role order are not looked at). Paths index
    Roles by their position in ``new`` (in ``old`` for a removed Role). Raises ValueError when
    ``role`` is in neither list."""
    return _compare_roles(old, new, role)[0]


def image_changes(old: list[Role], new: list[Role], *, role: str | None = None) -> list[ImageChange]:
    """The regular-container image changes between two revisions (for Roles and containers present
    in both), in the order of ``new``: Roles, entry before worker, containers. Listed whether or not
    :func:`check_roles` has findings. Raises ValueError when ``role`` is in neither list."""
    return _compare_roles(old, new, role)[1]


# -- ModelServing ------------------------------------------------------------------------------


def plugin_blockers(ms: ModelServing, *, registry: Registry = REGISTRY) -> list[Finding]:
    """The plugins of ``ms`` that do not support in-place updates (spec reading 29): their
    ModelServing always takes the recreate fallback, even when only images change. A plugin that is
    not registered, or whose config is invalid, cannot say, and blocks too."""
    findings: list[Finding] = []
    for i, spec in enumerate(ms.spec.plugins or []):
        field = f"spec.plugins[{i}]"
        try:
            plugin = registry.build(spec, field)
        except PluginConfigError as exc:
            findings.append(Finding(field, f"plugin {spec.name} cannot be checked for in-place support: {exc.reason}"))
            continue
        if not getattr(plugin, "supports_in_place", False):
            findings.append(
                Finding(
                    field,
                    f"plugin {spec.name} does not support in-place updates; "
                    "ModelServings with it are always updated by recreating Pods",
                )
            )
    return findings


def _plugin_changes(old: ModelServing, new: ModelServing) -> list[Finding]:
    old_plugins, new_plugins = old.spec.plugins or [], new.spec.plugins or []
    findings: list[Finding] = []
    for i in range(max(len(old_plugins), len(new_plugins))):
        field = f"spec.plugins[{i}]"
        if i >= len(old_plugins):
            findings.append(Finding(field, f"{ONLY_IMAGES}; plugin {new_plugins[i].name} added to the chain"))
        elif i >= len(new_plugins):
            findings.append(Finding(field, f"{ONLY_IMAGES}; plugin {old_plugins[i].name} removed from the chain"))
        elif normalized_chain([old_plugins[i]]) != normalized_chain([new_plugins[i]]):
            a, b = old_plugins[i].name, new_plugins[i].name
            what = f"plugin {a} changed (config or scope)" if a == b else f"plugin {a} replaced by {b}"
            findings.append(Finding(field, f"{ONLY_IMAGES}; {what}"))
    return findings


def _serving_group_changes(old: ModelServing, new: ModelServing) -> list[Finding]:
    findings: list[Finding] = []
    if old.spec.scheduler_name != new.spec.scheduler_name:
        findings += _changes(old.spec.scheduler_name, new.spec.scheduler_name, "spec.schedulerName", "schedulerName")
    findings += _plugin_changes(old, new)
    findings += plugin_blockers(new)
    findings += check_group_settings(group_settings(old), new)
    return findings


def check_group_settings(old: dict[str, Any], new: ModelServing) -> list[Finding]:
    """The changes of ``gangPolicy`` and ``networkTopology`` from ``old`` (as
    :func:`.pods.group_settings` records them) to ``new``: they are not part of a revision, but an
    image patch cannot apply them (PR 1882), so the controller compares what a unit's revision
    was recorded with (:mod:`.fallback`)."""
    after = group_settings(new)
    findings: list[Finding] = []
    for name in ("gangPolicy", "networkTopology"):
        if name == "gangPolicy" and faults.active("eligibility-ignores-gang-policy"):
            continue  # a gangPolicy change is patched in place
        if name == "networkTopology" and faults.active("eligibility-ignores-network-topology"):
            continue  # a networkTopology change is patched in place
        findings += _changes(old.get(name), after.get(name), f"spec.template.{name}", name)
    return findings


def check_eligibility(old: ModelServing, new: ModelServing) -> list[Finding]:
    """Every change from ``old`` to ``new`` that an image patch cannot apply, the ServingGroup as the
    unit: ``schedulerName``, the plugin chain, plugins without in-place support in ``new``,
    ``gangPolicy``, ``networkTopology``, then every Role (:func:`check_roles`)."""
    return _serving_group_changes(old, new) + check_roles(old.spec.template.roles, new.spec.template.roles)


def check_role_eligibility(old: ModelServing, new: ModelServing, role: str) -> list[Finding]:
    """As :func:`check_eligibility` for the Role instance as the unit (RoleRollingUpdate): the
    ModelServing-level fields (they shape every Pod) and Role ``role`` only. Raises ValueError when
    ``role`` is in neither ModelServing."""
    return _serving_group_changes(old, new) + check_roles(old.spec.template.roles, new.spec.template.roles, role=role)
