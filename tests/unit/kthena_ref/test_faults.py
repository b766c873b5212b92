"""kthena_ref.faults: every deliberate fault changes exactly the output it names, and is off by default.

Each row of ``CASES`` is one fault with a probe: a small planner / admission / plugin scenario that
returns the observable the fault breaks. The probe must give ``off`` with no fault, ``on`` with
the fault, and ``off`` again under every other fault, which is what
"breaks exactly one documented behaviour" means for a unit test.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from kthena_ref import faults
from kthena_ref.admission.rules import validate
from kthena_ref.api.types import ModelServing, PluginSpec
from kthena_ref.cli import main
from kthena_ref.planner.eviction import decide
from kthena_ref.planner.hooks import run_pod_create
from kthena_ref.planner.names import LABEL_ENTRY, PodId
from kthena_ref.planner.plan import Observed, plan
from kthena_ref.plugins import build_chain
from kthena_ref.plugins.base import HookRequest, NoOpHooks, PluginConfigError, Registry

from .builders import MS, T0, deleted, deleting, edit_spec, env_of, fresh_pods, label, names, ready, set_image, world
from .fault_cases_admission import CASES as ADMISSION_CASES
from .fault_cases_autoscaling import CASES as AUTOSCALING_CASES
from .fault_cases_conventions import CASES as CONVENTION_CASES
from .fault_cases_converters import CASES as CONVERTER_CASES
from .fault_cases_core import CASES as CORE_CASES
from .fault_cases_coverage_accelerators import CASES as COVERAGE_ACCELERATORS_CASES
from .fault_cases_coverage_core import CASES as COVERAGE_CORE_CASES
from .fault_cases_coverage_rollout import CASES as COVERAGE_ROLLOUT_CASES
from .fault_cases_deadline import CASES as DEADLINE_CASES
from .fault_cases_dns import CASES as DNS_CASES
from .fault_cases_gang import CASES as GANG_CASES
from .fault_cases_init_restarts import CASES as INIT_RESTART_CASES
from .fault_cases_plugins import CASES as PLUGIN_CASES
from .fault_cases_pods import CASES as POD_CASES
from .fault_cases_readiness import CASES as READINESS_CASES
from .fault_cases_roll import CASES as ROLL_CASES
from .fault_cases_rollout import CASES as ROLLOUT_CASES
from .fault_cases_scale_partition import CASES as SCALE_PARTITION_CASES
from .fault_cases_success import CASES as SUCCESS_CASES


@pytest.fixture(autouse=True)
def no_faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts and ends with no fault: nothing configured, the variable unset."""
    monkeypatch.delenv(faults.ENV, raising=False)
    before = faults._SWITCH.configured
    faults.configure(None)
    yield
    faults._SWITCH.configured = before
    monkeypatch.delenv(faults.ENV, raising=False)
    assert faults.enabled() == frozenset(), "a test left a fault enabled"


# -- scenarios ---------------------------------------------------------------------------------------


def by_name(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods}


def main_env(pod: dict[str, Any]) -> dict[str, Any]:
    return env_of(pod["spec"]["containers"][0])


def with_plugins(ms: ModelServing, *plugins: dict[str, Any]) -> ModelServing:
    return edit_spec(ms, lambda spec: spec.update(plugins=[copy.deepcopy(p) for p in plugins]))


HEADLESS = {"name": "headless-service"}


def headless_ms(workers: int = 1) -> ModelServing:
    return with_plugins(MS().role("r", 1, workers).build(), HEADLESS)


def fresh(ms: ModelServing) -> Any:
    return plan(Observed(ms=ms, pods=[], services=[], now=T0))


def with_uids(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    for obj in out:
        obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
    return out


def ms_dict(**role: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "ms"},
        "spec": {
            "replicas": 1,
            "template": {"roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": pod, **role}]},
        },
    }


def fields(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [e.field for e in validate(obj, old)]


# -- one probe per fault -----------------------------------------------------------------------------


def probe_scale_down() -> list[str]:
    """3 ready groups scaled to 2: which Pods go."""
    w = world(MS().replicas(3).role("r", 1, 0).build())
    w.ms = edit_spec(w.ms, lambda spec: spec.update(replicas=2))
    return deleted(w.plan())


def probe_worker_index() -> dict[str, str]:
    return {name: main_env(p)["WORKER_INDEX"] for name, p in by_name(fresh_pods(MS().role("r", 1, 2).build())).items()}


def probe_group_size() -> set[str]:
    return {main_env(p)["GROUP_SIZE"] for p in fresh_pods(MS().role("r", 1, 2).build())}


def probe_recovery() -> tuple[list[str], list[str]]:
    """RoleRecreate: the worker of the only instance was deleted behind the controller's back."""
    w = world(MS().role("r", 1, 1).recovery("RoleRecreate").build())
    del w.pods["ms-0-r-0-1"]
    p = w.plan(lost=frozenset({"ms-0-r-0-1"}))
    return deleted(p), names(p.create_pods)


def probe_available() -> tuple[int, str]:
    status = world(MS().replicas(2).role("r", 1, 1).build()).plan().status
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    return status["availableReplicas"], available["status"]


def probe_missing_worker_template() -> list[str]:
    return fields(ms_dict(workerReplicas=1))


def probe_entry_label() -> dict[str, str | None]:
    return {name: label(p, LABEL_ENTRY) for name, p in by_name(fresh_pods(MS().role("r", 1, 1).build())).items()}


def probe_plugin_order() -> str:
    """Two plugins that each append their name to one annotation: the order they ran in."""

    class Marker(NoOpHooks):
        def __init__(self, spec: PluginSpec, field: str) -> None:
            self.name = spec.name

        def on_pod_create(self, req: HookRequest) -> None:
            assert req.pod is not None
            notes = req.pod["metadata"].setdefault("annotations", {})
            notes["order"] = ",".join(filter(None, [notes.get("order"), self.name]))

    registry = Registry()
    registry.register("first", Marker)
    registry.register("second", Marker)
    ms = with_plugins(MS().role("r", 1, 0).build(), {"name": "first"}, {"name": "second"})
    pod: dict[str, Any] = {"metadata": {"name": "ms-0-r-0-0"}, "spec": {"containers": []}}
    run_pod_create(build_chain(ms, registry), ms, ms.spec.template.roles, PodId(0, "r", 0, 0), pod)
    return str(pod["metadata"]["annotations"]["order"])


def probe_chain_immutability() -> list[str]:
    old = ms_dict()
    new = copy.deepcopy(old)
    new["spec"]["plugins"] = [HEADLESS]
    return fields(new, old)


def probe_unknown_plugin() -> tuple[list[str], str]:
    """Admission's answer, then what the controller makes of the object."""
    obj = ms_dict()
    obj["spec"]["plugins"] = [{"name": "not-registered"}]
    obj["metadata"].update(namespace="default", uid="uid-ms")
    try:
        created = ",".join(names(fresh(ModelServing.model_validate(obj)).create_pods))
    except PluginConfigError as exc:
        created = f"PluginConfigError: {exc.field}"
    return fields(obj), created


def probe_demo_env() -> list[str]:
    ms = with_plugins(
        MS().role("r", 1, 0).build(), {"name": "demo-pod-tweaks", "config": {"env": [{"name": "X", "value": "1"}]}}
    )
    return list(main_env(fresh(ms).create_pods[0]))


def probe_discovery_service() -> tuple[list[str], set[str]]:
    result = fresh(headless_ms())
    return sorted(names(result.create_services)), {p["spec"]["subdomain"] for p in result.create_pods}


def probe_entry_selector() -> dict[str, str]:
    services = by_name(fresh(headless_ms()).create_services)
    return dict(services["ms-0-r-0-0"]["spec"]["selector"])


def probe_entry_address() -> set[str]:
    return {main_env(p)["ENTRY_ADDRESS"] for p in fresh(headless_ms()).create_pods}


def probe_hostname_as_fqdn() -> set[bool]:
    return {bool(p["spec"].get("setHostnameAsFQDN")) for p in fresh(headless_ms()).create_pods}


def probe_publish_not_ready() -> set[bool]:
    return {s["spec"]["publishNotReadyAddresses"] for s in fresh(headless_ms()).create_services}


def probe_services_recreated() -> list[str]:
    """The instance runs; its Entry Service was deleted by someone: is it created again?"""
    ms = headless_ms()
    first = fresh(ms)
    pods = [ready(p) for p in first.create_pods]
    services = [s for s in with_uids(first.create_services) if s["metadata"]["name"] != "ms-0-r-0-0"]
    return names(plan(Observed(ms=ms, pods=pods, services=services, now=T0)).create_services)


def probe_deletion_identity() -> tuple[list[str], bool]:
    """Scale 1 -> 0; the worker is gone and a replacement took its name while the entry still terminates."""
    base = MS().replicas(1).role("r", 1, 1)
    pods = [ready(p) for p in fresh_pods(base.build())]
    ms = base.replicas(0).build()
    first = plan(Observed(ms=ms, pods=pods, now=T0))
    now = by_name(pods)
    now["ms-0-r-0-0"] = deleting(now["ms-0-r-0-0"])
    now["ms-0-r-0-1"]["metadata"]["uid"] = "uid-replacement"
    result = plan(Observed(ms=ms, pods=list(now.values()), pending=first.pending, now=T0))
    reported = any(reason == "DeletionIdentityChanged" for reason, _ in result.reports)
    return deleted(result), reported


def probe_migration() -> tuple[list[str], str, list[str]]:
    """An instance on the legacy layout (subdomain = the entry-named all-member Service) lost worker 2."""
    ms = headless_ms(workers=2)
    first = fresh(ms)
    legacy_service = with_uids([by_name(first.create_services)["ms-0-r-0-0"]])[0]
    legacy_service["spec"]["selector"].pop(LABEL_ENTRY, None)  # all members
    pods = by_name([ready(p) for p in first.create_pods])
    for pod in pods.values():
        pod["spec"]["subdomain"] = "ms-0-r-0-0"
    del pods["ms-0-r-0-2"]
    result = plan(Observed(ms=ms, pods=list(pods.values()), services=[legacy_service], now=T0))
    recreated = by_name(result.create_pods)["ms-0-r-0-2"]["spec"]["subdomain"]
    return names(result.create_services), recreated, sorted({reason for reason, _ in result.reports})


def probe_rollout_first_step(**rollout: Any) -> Callable[[], list[str]]:
    """4 ready groups, a new image: the Pods the first rollout step deletes and creates."""

    def probe() -> list[str]:
        w = world(MS().replicas(4).role("r", 1, 0).rollout(**rollout).build())
        w.ms = edit_spec(w.ms, set_image("engine:v2"))
        p = w.plan()
        return sorted(deleted(p) + [f"+{n}" for n in names(p.create_pods)])

    return probe


def _in_place(change: Callable[[dict[str, Any]], None], **ms_rollout: Any) -> Any:
    w = world(MS().replicas(2).role("r", 1, 0).rollout(**ms_rollout).build())
    w.ms = edit_spec(w.ms, lambda spec: spec["rolloutStrategy"].update(updateMethod="InPlace"))
    w.ms = edit_spec(w.ms, change)
    return w


def _set_command(spec: dict[str, Any]) -> None:
    spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["command"] = ["serve", "--new"]


def probe_in_place_ineligible() -> tuple[list[str], list[str]]:
    """InPlace and a command change: recreated, not patched."""
    p = _in_place(_set_command, max_unavailable=1).plan()
    return deleted(p), [patch.name for patch in p.patch_pods]


def probe_fallback_event() -> list[str]:
    """InPlace, an image-only change, the headless-service plugin (which does not support in-place)."""
    w = _in_place(set_image("engine:v2"), max_unavailable=1)
    w.ms = with_plugins(w.ms, HEADLESS)
    return sorted({e.reason for e in w.plan().events})


def probe_progress_deadline() -> list[str]:
    """An in-place update that never arrives, 61 s after it started (progressDeadlineSeconds 60)."""
    w = _in_place(set_image("engine:v2"), max_unavailable=2)
    w.ms = edit_spec(w.ms, lambda spec: spec["rolloutStrategy"].update(progressDeadlineSeconds=60))
    w.patched_pods_arrive = False
    w.step()
    w.now = w.now + dt.timedelta(seconds=61)
    p = w.plan()
    return sorted({reason for reason, _ in p.reports})


def probe_role_unchanged() -> list[str]:
    """RoleRollingUpdate, two Roles, only the first one's image changes: what the first step deletes."""
    w = world(MS().role("a", 1, 0).role("b", 1, 0).rollout(type="RoleRollingUpdate").build())
    w.ms = edit_spec(w.ms, set_image("engine:v2", role=0))
    return deleted(w.plan())


def probe_coordination() -> list[str]:
    """maxSkew 25%: Role a (budget 4) may not run ahead of Role b (budget 1)."""
    ms = MS().role("a", 4, 0).role("b", 4, 0).rollout(type="RoleRollingUpdate").build()

    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["maxUnavailable"] = 4
        spec["rolloutStrategy"]["roleCoordination"] = {"maxSkew": "25%"}
        for role in spec["template"]["roles"]:
            role["entryTemplate"]["spec"]["containers"][0]["image"] = "engine:v2"

    w = world(ms)
    w.ms = edit_spec(w.ms, change)
    return deleted(w.plan())


def probe_eviction(replicas: int, unready: set[int], target: int, **strategy: Any) -> tuple[bool, str]:
    """Evict the Pod of ServingGroup ``target`` (one single-Pod Role) while the groups in
    ``unready`` are not ready: (allowed, the budget the refusal names)."""
    ms = edit_spec(
        MS().replicas(replicas).role("r", 1, 0).build(),
        lambda spec: spec.update(rolloutStrategy={"evictionStrategy": strategy}),
    )
    pods = [ready(p) for p in fresh_pods(ms)]
    for pod in pods:
        if int(pod["metadata"]["name"].split("-")[1]) in unready:
            pod["status"]["conditions"][-1]["status"] = "False"
    decision = decide(ms, pods, pods[target])
    budget = decision.message.split("below ", 1)[1].split(" (", 1)[0] if not decision.allowed else ""
    return decision.allowed, budget


@dataclass(frozen=True)
class Case:
    fault: str
    probe: Callable[[], Any]
    off: Any
    on: Any
    overlaps: tuple[str, ...] = ()  # other faults that break the same observable on purpose


CASES = [
    # Core
    Case("scale-down-lowest-ordinal", probe_scale_down, ["ms-2-r-0-0"], ["ms-0-r-0-0"]),
    Case(
        "wrong-worker-index",
        probe_worker_index,
        {"ms-0-r-0-0": "0", "ms-0-r-0-1": "1", "ms-0-r-0-2": "2"},
        {"ms-0-r-0-0": "0", "ms-0-r-0-1": "2", "ms-0-r-0-2": "3"},
    ),
    Case("wrong-group-size", probe_group_size, {"3"}, {"2"}),
    Case("no-recovery", probe_recovery, (["ms-0-r-0-0"], []), ([], ["ms-0-r-0-1"])),
    Case("stale-available-replicas", probe_available, (2, "True"), (0, "True")),
    Case(
        "admission-allows-missing-worker-template",
        probe_missing_worker_template,
        ["spec.template.roles[0].workerTemplate"],
        [],
    ),
    Case(
        "no-entry-label",
        probe_entry_label,
        {"ms-0-r-0-0": "true", "ms-0-r-0-1": None},
        {"ms-0-r-0-0": None, "ms-0-r-0-1": None},
    ),
    # Plugins
    Case("plugin-order-reversed", probe_plugin_order, "first,second", "second,first"),
    Case("chain-immutability-not-enforced", probe_chain_immutability, ["spec.plugins"], [], ("headless-addable",)),
    Case(
        "unknown-plugin-accepted",
        probe_unknown_plugin,
        (["spec.plugins[0].name"], "PluginConfigError: spec.plugins[0].name"),
        ([], "ms-0-r-0-0"),
        ("unknown-plugin-logged-only",),
    ),
    Case("demo-env-replaces", probe_demo_env, ["GROUP_SIZE", "WORKER_INDEX", "X"], ["X"]),
    # HeadlessServiceDNS
    Case(
        "no-discovery-service",
        probe_discovery_service,
        (["ms-0-r-0", "ms-0-r-0-0"], {"ms-0-r-0"}),
        (["ms-0-r-0-0"], {"ms-0-r-0"}),
        ("third-service-per-instance",),
    ),
    Case(
        "entry-service-selects-all",
        probe_entry_selector,
        {
            "modelserving.volcano.sh/name": "ms",
            "modelserving.volcano.sh/group-name": "ms-0",
            "modelserving.volcano.sh/role-id": "r-0",
            LABEL_ENTRY: "true",
        },
        {
            "modelserving.volcano.sh/name": "ms",
            "modelserving.volcano.sh/group-name": "ms-0",
            "modelserving.volcano.sh/role-id": "r-0",
        },
    ),
    Case(
        "wrong-entry-address",
        probe_entry_address,
        {"ms-0-r-0-0.default"},
        {"ms-0-r-0.default"},
        ("entry-pod-own-address",),
    ),
    Case("hostname-as-fqdn", probe_hostname_as_fqdn, {False}, {True}),
    Case(
        "services-not-published-before-ready",
        probe_publish_not_ready,
        {True},
        {False},
    ),
    Case("services-not-recreated", probe_services_recreated, ["ms-0-r-0-0"], []),
    Case("deletion-identity-ignored", probe_deletion_identity, ([], True), (["ms-0-r-0-1"], False)),
    Case(
        "migration-layout-changed",
        probe_migration,
        ([], "ms-0-r-0-0", ["MigrationRequired"]),
        (["ms-0-r-0"], "ms-0-r-0", []),
    ),
    # Rollout
    Case(
        "unavailable-rounds-up",
        probe_rollout_first_step(max_unavailable="30%"),
        ["ms-3-r-0-0"],
        ["ms-2-r-0-0", "ms-3-r-0-0"],
        ("recreate-updates-in-place",),  # an image-only change patched in place deletes nothing
    ),
    Case(
        "surge-ignored",
        probe_rollout_first_step(max_unavailable=0, max_surge=1),
        ["+ms-4-r-0-0"],
        [],
        ("recreate-updates-in-place",),  # patched in place, no surge group is needed
    ),
    Case("partition-ignored", probe_rollout_first_step(partition=4), [], ["ms-3-r-0-0"]),
    Case("role-unchanged-recreated", probe_role_unchanged, ["ms-0-a-0-0"], ["ms-0-a-0-0", "ms-0-b-0-0"]),
    Case(
        "coordination-ignored",
        probe_coordination,
        ["ms-0-a-3-0", "ms-0-b-3-0"],
        ["ms-0-a-0-0", "ms-0-a-1-0", "ms-0-a-2-0", "ms-0-a-3-0", "ms-0-b-3-0"],
    ),
    # InPlaceUpdate
    Case("in-place-ineligible-patched", probe_in_place_ineligible, (["ms-1-r-0-0"], []), ([], ["ms-1-r-0-0"])),
    Case(
        "no-fallback-event",
        probe_fallback_event,
        ["InPlaceUpdateFallback", "RoleDeleting"],
        ["RoleDeleting"],
        ("in-place-recreates",),  # no update in place, so no fallback from one
    ),
    Case(
        "no-progress-deadline",
        probe_progress_deadline,
        ["ProgressDeadlineExceeded"],
        [],
        # a stuck Pod taken for a finished update has no deadline to pass; no update in place has none either
        ("in-place-ready-on-patch", "in-place-recreates"),
    ),
    # EvictionBudget
    Case(  # 1 of 3 ready after the eviction, minAvailable 2: refused; the fault lets it leave 1
        "eviction-budget-off-by-one",
        lambda: probe_eviction(3, {2}, 0, minAvailable=2),
        (False, "minAvailable 2"),
        (True, ""),
    ),
    Case(  # 2 of 3 ready after the eviction, minAvailable 2: allowed; the fault refuses it
        "eviction-budget-too-strict",
        lambda: probe_eviction(3, set(), 0, minAvailable=2),
        (True, ""),
        (False, "minAvailable 2"),
    ),
    Case(  # 50% of 3 is 1.5: 2 rounded up, 1 down (nothing ready is left either way)
        "eviction-percent-rounds-down",
        lambda: probe_eviction(3, {1, 2}, 0, minAvailable="50%"),
        (False, "minAvailable 2"),
        (False, "minAvailable 1"),
    ),
    Case(  # roleMinAvailable 2 with 1 ready instance: evicting it is refused, also off by one
        "role-eviction-budget-ignored",
        lambda: probe_eviction(2, {1}, 0, protectionLevel="Role", roleMinAvailable={"r": 2}),
        (False, "roleMinAvailable[r] 2"),
        (True, ""),
    ),
]


CASES += [Case(*row) for row in CORE_CASES]
CASES += [Case(*row) for row in PLUGIN_CASES]
CASES += [Case(*row) for row in DNS_CASES]
CASES += [Case(*row) for row in INIT_RESTART_CASES]
CASES += [Case(*row) for row in READINESS_CASES]
CASES += [Case(*row) for row in SCALE_PARTITION_CASES]
CASES += [Case(*row) for row in ROLL_CASES]
CASES += [Case(*row) for row in ROLLOUT_CASES]
CASES += [Case(*row) for row in CONVENTION_CASES]
CASES += [Case(*row) for row in POD_CASES]
CASES += [Case(*row) for row in DEADLINE_CASES]
CASES += [Case(*row) for row in GANG_CASES]
CASES += [Case(*row) for row in ADMISSION_CASES]
CASES += [Case(*row) for row in COVERAGE_CORE_CASES]
CASES += [Case(*row) for row in COVERAGE_ROLLOUT_CASES]
CASES += [Case(*row) for row in COVERAGE_ACCELERATORS_CASES]
CASES += [Case(*row) for row in AUTOSCALING_CASES]
CASES += [Case(*row) for row in CONVERTER_CASES]
CASES += [Case(*row) for row in SUCCESS_CASES]


def test_every_fault_has_exactly_one_case() -> None:
    assert sorted(c.fault for c in CASES) == sorted(faults.FAULTS)


@pytest.mark.parametrize("case", CASES, ids=[c.fault for c in CASES])
def test_the_fault_changes_its_behaviour_and_only_while_injected(case: Case) -> None:
    assert case.off != case.on
    assert case.probe() == case.off, "without the fault the behaviour is the documented one"
    with faults.injected(case.fault) as active:
        assert active == {case.fault}
        assert case.probe() == case.on
    assert faults.enabled() == frozenset()
    assert case.probe() == case.off, "leaving the block switches the fault off again"


def asked_by(probe: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, frozenset[str] | None]:
    """``probe()`` with no fault, and the faults it asked about on the way (None: it read the whole set).

    A fault the probe never asks about cannot change its result: the probe is deterministic, so
    with that fault injected it runs exactly as without until its first ``faults.active`` answer
    that differs, and only the injected fault's answer differs. So only the asked faults need
    injecting (the whole set when the probe read :func:`faults.enabled` itself): O(faults x asked)
    probes instead of O(faults squared)."""
    asked: set[str] = set()
    inside, whole = [0], [False]
    real_active, real_enabled = faults.active, faults.enabled

    def active(name: str, *args: Any, **kwargs: Any) -> bool:
        asked.add(name)
        inside[0] += 1
        try:
            return real_active(name, *args, **kwargs)
        finally:
            inside[0] -= 1

    def enabled(*args: Any, **kwargs: Any) -> frozenset[str]:
        whole[0] = whole[0] or not inside[0]
        return real_enabled(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(faults, "active", active)
        patch.setattr(faults, "enabled", enabled)
        result = probe()
    return result, None if whole[0] else frozenset(asked)


@pytest.mark.parametrize("case", CASES, ids=[c.fault for c in CASES])
def test_no_other_fault_changes_the_behaviour(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    off, asked = asked_by(case.probe, monkeypatch)
    assert off == case.off
    # The fault itself changes the probe, so the probe must ask about it: if it does not, faults are read
    # some other way than faults.active and the narrowing below would be unsound.
    assert asked is None or case.fault in asked, f"the probe never asked faults.active about {case.fault!r}"
    candidates = faults.FAULTS.keys() if asked is None else asked
    changed = []
    for other in sorted(candidates - {case.fault, *case.overlaps}):
        with faults.injected(other):
            if case.probe() != case.off:
                changed.append(other)
    assert changed == []


def test_services_of_new_instances_are_still_created_under_services_not_recreated() -> None:
    with faults.injected("services-not-recreated"):
        assert sorted(names(fresh(headless_ms()).create_services)) == ["ms-0-r-0", "ms-0-r-0-0"]


# -- the switch --------------------------------------------------------------------------------------


def test_faults_are_off_by_default() -> None:
    assert faults.enabled() == frozenset()
    assert not any(faults.active(name) for name in faults.FAULTS)


def test_every_fault_is_described() -> None:
    for name, description in faults.FAULTS.items():
        assert name == name.strip().lower() and "," not in name and description.strip()


def test_the_environment_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, " no-recovery, wrong-group-size ,,")
    assert faults.enabled() == {"no-recovery", "wrong-group-size"}
    assert faults.active("no-recovery") and not faults.active("no-entry-label")
    monkeypatch.setenv(faults.ENV, "")
    assert faults.enabled() == frozenset()


def test_unknown_names_in_the_environment_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "no-recovery,no-such-fault")
    with pytest.raises(ValueError, match=r"KTHENA_REF_FAULTS: no-such-fault \(known: admission-allows"):
        faults.enabled()


def test_configure_wins_over_the_environment_and_none_returns_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "no-recovery")
    assert faults.configure(["wrong-group-size"]) == {"wrong-group-size"}
    assert not faults.active("no-recovery")
    assert faults.configure([]) == frozenset()
    assert faults.configure("no-entry-label") == {"no-entry-label"}, "a single name, not its characters"
    assert faults.configure(None) == {"no-recovery"}


def test_configure_rejects_unknown_names_and_keeps_the_previous_state() -> None:
    faults.configure(["no-recovery"])
    with pytest.raises(ValueError, match=r"unknown fault\(s\) in the fault list: bogus \(known: .*wrong-worker-index"):
        faults.configure(["no-recovery", "bogus"])
    assert faults.enabled() == {"no-recovery"}


def test_asking_for_an_unknown_fault_is_a_bug() -> None:
    with pytest.raises(ValueError, match="unknown fault 'no-such'"):
        faults.active("no-such")


def test_injected_restores_the_previous_state_even_on_error() -> None:
    faults.configure(["no-recovery"])
    with pytest.raises(RuntimeError), faults.injected("wrong-group-size", "no-entry-label"):
        assert faults.enabled() == {"wrong-group-size", "no-entry-label"}
        raise RuntimeError("boom")
    assert faults.enabled() == {"no-recovery"}
    faults.configure(None)
    with faults.injected("no-recovery"):
        pass
    assert faults._SWITCH.configured is None, "an unconfigured process goes back to following the variable"


# -- kthena-ref run --fault --------------------------------------------------------------------------


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> list[frozenset[str]]:
    """``run`` with the controller replaced by a stub recording the faults active when it starts."""
    import kthena_ref.runtime.main as runtime_main

    started: list[frozenset[str]] = []

    async def stub(*args: Any, **kwargs: Any) -> None:
        started.append(faults.enabled())

    monkeypatch.setattr(runtime_main, "run_controller", stub)
    return started


def test_run_configures_the_faults_and_warns(
    controller: list[frozenset[str]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kthena_ref.faults"):
        result = CliRunner().invoke(main, ["run", "--fault", "no-recovery", "--fault", "wrong-group-size"])
    assert result.exit_code == 0, result.output
    assert controller == [{"no-recovery", "wrong-group-size"}]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("FAULTS INJECTED" in m and "no-recovery, wrong-group-size" in m for m in warnings)


def test_run_honours_the_environment_variable(controller: list[frozenset[str]]) -> None:
    result = CliRunner().invoke(main, ["run"], env={faults.ENV: "no-entry-label"})
    assert result.exit_code == 0, result.output
    assert controller == [{"no-entry-label"}]


def test_run_without_faults_runs_the_documented_controller(
    controller: list[frozenset[str]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kthena_ref.faults"):
        result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 0, result.output
    assert controller == [frozenset()]
    assert not [r for r in caplog.records if "FAULTS" in r.getMessage()]


@pytest.mark.parametrize(
    ("args", "env", "code", "says"),
    [
        (["--fault", "no-such-fault"], {}, 2, "Invalid value for '--fault'"),
        ([], {faults.ENV: "no-recovery,no-such-fault"}, 1, "unknown fault(s) in KTHENA_REF_FAULTS: no-such-fault"),
    ],
)
def test_run_rejects_unknown_faults_without_a_traceback(
    controller: list[frozenset[str]], args: list[str], env: dict[str, str], code: int, says: str
) -> None:
    result = CliRunner().invoke(main, ["run", *args], env=env)
    assert result.exit_code == code
    assert says in result.output
    assert "Traceback" not in result.output and controller == []
