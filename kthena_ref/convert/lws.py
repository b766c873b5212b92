"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, ``sigs.k8s.io/lws`` v0.7.0) -> ModelServing (pure).

A LeaderWorkerSet runs ``replicas`` groups of ``size`` Pods: one leader and ``size - 1`` workers.
A ModelServing runs ``replicas`` ServingGroups, each of Roles made of one entry Pod and
``workerReplicas`` worker Pods. :func:`convert` maps one onto the other; the spec says only what
the plugin chain must be (``plugin-framework-and-headless-service.txt``: the converter declares
headless-service on new children, keeps the declaration as worker counts change, keeps the worker
template at size 1, and cannot migrate an existing child). Everything else is a reading, numbered
here and in ``docs/lws-readings.md`` (with the table of every LWS field):

LW1  The child is named as the LeaderWorkerSet, in its namespace, carries a controller
     ownerReference to it and a copy of its ``metadata.labels`` (none when it has none: the API
     server stores no empty map), not its annotations (the LWS's own, e.g. kubectl's
     last-applied configuration).
LW2  ``spec.replicas`` is the LWS's ``spec.replicas`` (default 1): an LWS group is a ServingGroup.
LW3  One Role, named ``default`` (upstream Kthena's name), with ``replicas: 1``: a group is one
     Role instance, so the Role's entry Pod is the leader and its workers are the group's workers.
LW4  ``workerReplicas`` is ``size - 1`` (``size`` default 1). A size below 1 is refused (the LWS
     API's minimum is the leader alone; upstream clamps to 0 workers).
LW5  ``entryTemplate`` is the ``leaderTemplate`` when set, else the ``workerTemplate`` (the LWS
     API: the leader "defaults to the worker template if not specified").
LW6  ``workerTemplate`` is the LWS ``workerTemplate`` always, also at size 1 (the spec: LWS keeps
     its worker template at size 1, so its single-Pod Role still gets the plugin's Services).
LW7  Pod template metadata: ``labels`` and ``annotations`` are carried; ``name`` and
     ``namespace`` are ignored (Pod names are generated, the namespace is the object's; the LWS
     controller ignores them too); ``finalizers`` are refused (a ModelServing template cannot
     carry them, and a finalizer is a promise to another controller that cannot be dropped).
LW8  Pod template specs are carried verbatim. The LWS controller's own Pod conventions (its
     ``leaderworkerset.sigs.k8s.io/*`` labels and annotations, ``LWS_LEADER_ADDRESS``,
     ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``, its hostnames and shared subdomain) are not
     reproduced: the headless-service plugin supplies Kthena's Role DNS instead (the spec).
LW9  ``spec.plugins`` is :func:`~kthena_ref.convert.plugins_for` of the existing child: a new
     child declares headless-service, an existing one keeps exactly what it has.
LW10 ``spec.schedulerName`` is the templates' ``spec.schedulerName``, ``default-scheduler`` when
     they set none (what an LWS Pod gets; the ModelServing default, volcano, would leave the Pods
     of a cluster without Volcano Pending). A leader and workers naming different schedulers are
     refused: a ModelServing has one scheduler for all its Pods.
LW11 ``leaderWorkerTemplate.restartPolicy`` is ``spec.recoveryPolicy``: RecreateGroupOnPodRestart
     (the default) is ServingGroupRecreate (the two definitions read alike: recreate every Pod of
     the group when one is recreated or a container restarts); None and its deprecated name
     Default are None (only the failed Pod is restarted).
LW12 ``rolloutStrategy`` (type RollingUpdate, the only one) is ServingGroupRollingUpdate (LWS
     updates group by group, as a unit); ``rollingUpdateConfiguration``'s ``maxUnavailable``,
     ``maxSurge`` and ``partition`` are copied: the two APIs define them alike (counts or
     percentages of replicas, maxUnavailable rounded down and defaulting to 1, maxSurge rounded up
     and defaulting to 0, not both 0; partition protects groups 0..N-1). LWS's note that surge
     groups stay while a partition is set is not reproduced. Without a rolloutStrategy the child
     has none: both defaults are a one-at-a-time group update. ``updateMethod`` stays Recreate,
     which is how an LWS replaces a group.
LW13 ``startupPolicy``: LeaderCreated (the default) is honoured as is, a ModelServing creates a
     group's Pods together; LeaderReady (workers only after the leader is Ready) has no
     equivalent and is ignored.
LW14 ``networkConfig.subdomainPolicy`` (Shared or UniquePerReplica) is ignored: Pod DNS comes from
     the headless-service plugin (per Role instance), not from an LWS headless Service (LW8).
LW15 ``leaderWorkerTemplate.subGroupPolicy`` is refused: a Role has no subgroups, so their
     placement and labels cannot be kept.
LW16 The exclusive-placement annotations (``leaderworkerset.sigs.k8s.io/exclusive-topology``,
     ``.../subgroup-exclusive-topology``) are ignored: the ModelServing API has no 1:1 group to
     topology placement (its networkTopology is Volcano's, a different contract).
LW17 A field this converter does not know (a later LWS API; the API server prunes fields the
     v0.7.0 CRD lacks) is refused rather than silently dropped. A ``null`` counts as unset.
LW18 The child must pass the ModelServing admission rules (:func:`kthena_ref.admission.rules.validate`,
     which includes the type model); each refusal becomes a problem at the LWS field it comes from
     (a name too long for the generated Pod names is ``metadata.name``).
LW19 An existing ModelServing of that name that this LWS does not control (no controller
     ownerReference with its uid) is a problem: the converter never takes over another object.
LW20 Status is not converted here: writing the ModelServing's counts back to the LWS is the shell's.

Fields of the ignored and refused kinds are reported in :attr:`Conversion.ignored` and
:attr:`Conversion.problems` with their dotted path and a one-sentence reason.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from .. import faults
from ..api.types import API_VERSION as MS_API_VERSION
from ..api.types import KIND as MS_KIND
from . import Conversion, Problem, owner_reference, plugins_for

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_KIND = "LeaderWorkerSet"
ROLE = "default"  # LW3
DEFAULT_SCHEDULER = "default-scheduler"  # LW10
EXCLUSIVE_ANNOTATIONS = (
    "leaderworkerset.sigs.k8s.io/exclusive-topology",
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
)
RECOVERY = {  # LW11
    "RecreateGroupOnPodRestart": "ServingGroupRecreate",
    "None": "None",
    "Default": "None",
}
STARTUP_POLICIES = ("LeaderCreated", "LeaderReady")

SPEC = "spec"
LWT = "spec.leaderWorkerTemplate"
LEADER = f"{LWT}.leaderTemplate"
WORKER = f"{LWT}.workerTemplate"
ROLLOUT = "spec.rolloutStrategy"
ROLLING = f"{ROLLOUT}.rollingUpdateConfiguration"

_KNOWN: dict[str, frozenset[str]] = {
    SPEC: frozenset({"replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"}),
    LWT: frozenset({"leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy"}),
    ROLLOUT: frozenset({"type", "rollingUpdateConfiguration"}),
    ROLLING: frozenset({"partition", "maxUnavailable", "maxSurge"}),
    "spec.networkConfig": frozenset({"subdomainPolicy"}),
}
_TEMPLATE_KEYS = frozenset({"metadata", "spec"})
_TEMPLATE_META_KEYS = frozenset({"labels", "annotations", "name", "namespace", "finalizers"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def convert(lws: dict[str, Any], existing: dict[str, Any] | None) -> Conversion:
    """The ModelServing ``lws`` asks for, given the child that exists (or None): see LW1-LW20."""
    return _Converter(lws, existing).run()


def key_path(base: str, key: str) -> str:
    """``base.key``, or ``base["a/b"]`` for a key that is not an identifier (a label, an annotation)."""
    return f"{base}.{key}" if _IDENTIFIER.fullmatch(key) else f"{base}[{json.dumps(key)}]"


class _Converter:
    def __init__(self, lws: dict[str, Any], existing: dict[str, Any] | None) -> None:
        self.lws = lws
        self.existing = existing
        self.problems: list[Problem] = []
        self.ignored: list[Problem] = []

    def refuse(self, field: str, reason: str) -> None:
        self.problems.append(Problem(field, reason))

    def ignore(self, field: str, reason: str) -> None:
        self.ignored.append(Problem(field, reason))

    def mapping(self, value: Any, at: str) -> dict[str, Any]:
        """``value`` as a mapping without its nulls (LW17); anything else is refused."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.refuse(at, f"must be an object, not {type(value).__name__}")
            return {}
        return {k: v for k, v in value.items() if v is not None}

    def unknown(self, value: dict[str, Any], at: str, known: frozenset[str]) -> None:
        for key in sorted(set(value) - known):
            self.refuse(
                key_path(at, key),
                "not a field of LeaderWorkerSet v1 (sigs.k8s.io/lws v0.7.0): its meaning cannot be kept",
            )

    def integer(self, value: Any, at: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.refuse(at, f"must be an integer, not {value!r}")
            return default
        return value

    # -- the object --------------------------------------------------------------------------------

    def run(self) -> Conversion:
        meta = self.mapping(self.lws.get("metadata"), "metadata")
        name, uid = meta.get("name"), meta.get("uid")
        if not isinstance(name, str) or not name:
            self.refuse("metadata.name", "required: the child ModelServing is named after it")
        if not isinstance(uid, str) or not uid:
            self.refuse("metadata.uid", "required for the child's controller ownerReference")
        namespace = str(meta.get("namespace") or "default")
        self.check_owner(uid)
        self.annotations(self.mapping(meta.get("annotations"), "metadata.annotations"))

        spec = self.mapping(self.lws.get("spec"), "spec")
        self.unknown(spec, SPEC, _KNOWN[SPEC])
        replicas = self.integer(spec.get("replicas"), "spec.replicas", 1)  # LW2
        lwt = self.mapping(spec.get("leaderWorkerTemplate"), LWT)
        self.unknown(lwt, LWT, _KNOWN[LWT])
        role, entry_from = self.role(lwt)
        recovery = self.recovery(lwt.get("restartPolicy"))
        scheduler = self.scheduler(lwt, entry_from)
        rollout = self.rollout(self.mapping(spec.get("rolloutStrategy"), ROLLOUT))
        self.startup(spec.get("startupPolicy"))
        self.network(self.mapping(spec.get("networkConfig"), "spec.networkConfig"))
        if self.problems:
            return self.result(None)

        child_spec: dict[str, Any] = {"replicas": replicas, "schedulerName": scheduler}
        plugins = plugins_for(self.existing)  # LW9
        if faults.active("lws-child-without-headless") and self.existing is None:
            plugins = None
        if faults.active("lws-plugins-rederived") and self.existing is not None:
            plugins = []
        if plugins is not None:
            child_spec["plugins"] = plugins
        child_spec["template"] = {"roles": [role]}
        if rollout is not None:
            child_spec["rolloutStrategy"] = rollout
        child_spec["recoveryPolicy"] = recovery
        child_meta: dict[str, Any] = {"name": name, "namespace": namespace}
        labels = {str(k): str(v) for k, v in self.mapping(meta.get("labels"), "metadata.labels").items()}
        if labels:  # the API server stores no empty map: an empty one would never match the stored child
            child_meta["labels"] = labels
        child_meta["ownerReferences"] = [owner_reference({**self.lws, "apiVersion": LWS_API_VERSION, "kind": LWS_KIND})]
        child = {"apiVersion": MS_API_VERSION, "kind": MS_KIND, "metadata": child_meta, "spec": child_spec}
        self.admitted(child, entry_from)
        return self.result(None if self.problems else child)

    def result(self, child: dict[str, Any] | None) -> Conversion:
        return Conversion(child, tuple(self.problems), tuple(self.ignored))

    def check_owner(self, uid: Any) -> None:  # LW19
        if self.existing is None or not uid:
            return
        refs = (self.existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(isinstance(r, dict) and r.get("controller") and r.get("uid") == uid for r in refs):
            self.refuse(
                "metadata.name",
                "a ModelServing of this name exists and this LeaderWorkerSet does not control "
                "it: the converter does not take over another object",
            )

    def annotations(self, annotations: dict[str, Any]) -> None:  # LW16
        for key in EXCLUSIVE_ANNOTATIONS:
            if key in annotations:
                self.ignore(
                    key_path("metadata.annotations", key),
                    "exclusive 1:1 placement of groups on a topology "
                    "domain has no ModelServing equivalent; Pods are placed by the scheduler alone",
                )

    # -- the Role --------------------------------------------------------------------------------

    def role(self, lwt: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The one Role (LW3-LW7) and where its entry template came from."""
        size = self.integer(lwt.get("size"), f"{LWT}.size", 1)
        if size < 1:  # LW4
            self.refuse(f"{LWT}.size", f"{size} is below 1: a group has at least its leader")
        if "subGroupPolicy" in lwt:  # LW15
            self.refuse(
                f"{LWT}.subGroupPolicy",
                "a ModelServing Role has no subgroups: their placement, labels and exclusive topology cannot be kept",
            )
        if "workerTemplate" not in lwt:
            self.refuse(WORKER, "required: it is every worker's template and the leader's by default")
        worker = self.template(lwt.get("workerTemplate"), WORKER)
        leader = self.template(lwt["leaderTemplate"], LEADER) if "leaderTemplate" in lwt else None
        entry_from = LEADER if leader is not None else WORKER  # LW5
        role = {
            "name": ROLE,
            "replicas": 1,
            "entryTemplate": leader if leader is not None else copy.deepcopy(worker),
            "workerReplicas": max(size - 1, 0) if not faults.active("lws-worker-replicas-equal-size") else size,
            "workerTemplate": worker,  # LW6: also at size 1
        }
        if size == 1 and faults.active("lws-size-one-without-worker-template"):
            del role["workerTemplate"]
        return role, entry_from

    def template(self, value: Any, at: str) -> dict[str, Any]:
        """An LWS PodTemplateSpec as a ModelServing PodTemplateSpec (LW7, LW8)."""
        template = self.mapping(value, at)
        self.unknown(template, at, _TEMPLATE_KEYS)
        meta = self.mapping(template.get("metadata"), f"{at}.metadata")
        self.unknown(meta, f"{at}.metadata", _TEMPLATE_META_KEYS)
        for key in ("name", "namespace"):
            if key in meta:
                self.ignore(
                    f"{at}.metadata.{key}",
                    f"a Pod's {key} is the ModelServing controller's (generated "
                    "names, the object's namespace), as it is the LWS controller's",
                )
        if meta.get("finalizers"):
            self.refuse(
                f"{at}.metadata.finalizers",
                "a ModelServing Pod template carries labels and annotations "
                "only, and dropping a finalizer would break its owner's promise",
            )
        out: dict[str, Any] = {}
        carried = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if k in meta}
        if carried:
            out["metadata"] = carried
        out["spec"] = copy.deepcopy(template.get("spec", {}))
        return out

    def scheduler(self, lwt: dict[str, Any], entry_from: str) -> str:  # LW10
        def named(key: str) -> str:
            template = lwt.get(key)
            spec = template.get("spec") if isinstance(template, dict) else None
            value = spec.get("schedulerName") if isinstance(spec, dict) else None
            return str(value) if value else DEFAULT_SCHEDULER

        worker = named("workerTemplate")
        leader = named("leaderTemplate") if entry_from == LEADER else worker
        if leader != worker:
            self.refuse(
                f"{LEADER}.spec.schedulerName",
                f"the leader names scheduler {leader!r} and the workers "
                f"{worker!r}: a ModelServing schedules all its Pods with one",
            )
        return worker

    # -- the rest of the spec ----------------------------------------------------------------------

    def recovery(self, policy: Any) -> str:  # LW11
        if policy is None:
            return RECOVERY["RecreateGroupOnPodRestart"]
        if policy not in RECOVERY:
            self.refuse(f"{LWT}.restartPolicy", f"{policy!r} is not one of {', '.join(RECOVERY)}")
            return RECOVERY["RecreateGroupOnPodRestart"]
        return RECOVERY[str(policy)]

    def rollout(self, strategy: dict[str, Any]) -> dict[str, Any] | None:  # LW12
        if not strategy:
            return None
        self.unknown(strategy, ROLLOUT, _KNOWN[ROLLOUT])
        kind = strategy.get("type", "RollingUpdate")
        if kind != "RollingUpdate":
            self.refuse(f"{ROLLOUT}.type", f"{kind!r} is not RollingUpdate, the only LWS rollout type")
        out: dict[str, Any] = {"type": "ServingGroupRollingUpdate"}
        rolling = self.mapping(strategy.get("rollingUpdateConfiguration"), ROLLING)
        self.unknown(rolling, ROLLING, _KNOWN[ROLLING])
        if rolling:
            out["rollingUpdateConfiguration"] = {
                k: rolling[k] for k in ("maxUnavailable", "maxSurge", "partition") if k in rolling
            }
        return out

    def startup(self, policy: Any) -> None:  # LW13
        if policy is None or policy == "LeaderCreated":
            return
        if policy == "LeaderReady":
            self.ignore(
                "spec.startupPolicy",
                "LeaderReady (workers only once the leader is Ready) has no ModelServing "
                "equivalent: a group's Pods are created together",
            )
            return
        self.refuse("spec.startupPolicy", f"{policy!r} is not one of {', '.join(STARTUP_POLICIES)}")

    def network(self, config: dict[str, Any]) -> None:  # LW14
        self.unknown(config, "spec.networkConfig", _KNOWN["spec.networkConfig"])
        if "subdomainPolicy" in config:
            self.ignore(
                "spec.networkConfig.subdomainPolicy",
                f"{config['subdomainPolicy']!r}: Pod DNS comes from the "
                "headless-service plugin (per Role instance), not from an LWS headless Service",
            )

    # -- LW18 ----------------------------------------------------------------------------------------

    def admitted(self, child: dict[str, Any], entry_from: str) -> None:
        from ..admission.rules import validate

        role = "spec.template.roles[0]"
        where = (  # the child's field -> the LWS field it comes from, longest first
            (f"{role}.entryTemplate", entry_from),
            (f"{role}.workerTemplate", WORKER),
            (f"{role}.workerReplicas", f"{LWT}.size"),
            (f"{role}.name", "metadata.name"),
            ("spec.rolloutStrategy.rollingUpdateConfiguration", ROLLING),
            ("spec.rolloutStrategy", ROLLOUT),
            ("spec.schedulerName", f"{WORKER}.spec.schedulerName"),
            ("spec.replicas", "spec.replicas"),
            ("metadata.name", "metadata.name"),
        )
        for error in validate(child):
            field = error.field
            for prefix, source in where:
                if field == prefix or field.startswith((f"{prefix}.", f"{prefix}[")):
                    field = source + field[len(prefix) :]
                    break
            self.refuse(field, f"the ModelServing made from it would be refused: {error.reason}")
