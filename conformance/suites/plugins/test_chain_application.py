"""Plugins: when the chain runs. No chain at all when spec.plugins is omitted or empty; the whole
chain again on every Pod the controller creates later (a replacement, a new ServingGroup's Pods,
a new revision's Pods).

"Omitted or empty plugins means no plugin chain": the Pods carry no plugin's mutation. Which
mutations a plugin may make is open, so the test looks for the ones the spec documents the
built-ins (and older controllers, which did it without an explicit plugin) making: hostname,
subdomain and ``ENTRY_ADDRESS`` from headless-service, a headless Service selecting the Pods, a
runtimeClassName from demo-pod-tweaks. The manifest's Roles have workers, so headless-service
would have acted on them.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, member, role_of
from conformance.framework.plugin import SuiteState
from conformance.suites.plugins.builtin import builtin_plugin, missing_mutation
from conformance.suites.rollout import patch_roles, with_image

PLUGINS = "plugin-framework-and-headless-service.txt"
NAME = "tweaks"


def _where(pod: Any) -> str:
    return f"{role_of(pod)}/{member(pod)} Pod {pod.metadata.name}"


def _untouched(ms: ModelServings, manifest: Any, plugins: list[Any] | None, what: str) -> None:
    body = manifest("plugins-two-roles")
    if plugins is None:
        body["spec"].pop("plugins", None)
    else:
        body["spec"]["plugins"] = plugins
    ms.create(body)
    pods = ms.wait_pods(NAME, expected_pod_count(body))
    touched = {}
    for pod in pods:
        found = []
        if pod.spec.hostname or pod.spec.subdomain:
            found.append(f"hostname={pod.spec.hostname!r} subdomain={pod.spec.subdomain!r}")
        if pod.spec.runtime_class_name:
            found.append(f"runtimeClassName={pod.spec.runtime_class_name!r}")
        for container in [*pod.spec.containers, *(pod.spec.init_containers or [])]:
            if any(e.name == "ENTRY_ADDRESS" for e in container.env or []):
                found.append(f"ENTRY_ADDRESS in container {container.name}")
        if found:
            touched[_where(pod)] = found
    assert not touched, f"with {what} (no plugin chain) expected no plugin's mutation on the Pods; seen {touched}"
    services = ms.services()
    selecting = {
        name: [p.metadata.name for p in pods if _selects(svc.spec.selector, p.metadata.labels)]
        for name, svc in services.items()
        if svc.spec.cluster_ip == "None"
    }
    selecting = {k: v for k, v in selecting.items() if v}
    assert not selecting, (
        f"with {what} (no plugin chain) expected no headless Service selecting the ModelServing's Pods; "
        f"seen {selecting}"
    )


def _selects(selector: dict[str, str] | None, labels: dict[str, str] | None) -> bool:
    return bool(selector) and all((labels or {}).get(k) == v for k, v in (selector or {}).items())


@behaviour(
    "plugins/chain/omitted-means-no-chain",
    "A ModelServing whose spec.plugins is omitted MUST get no plugin chain: no hostname, subdomain, ENTRY_ADDRESS "
    "or runtimeClassName on its Pods and no headless Service selecting them.",
    f"{PLUGINS}#Overview",
    Feature.PLUGIN_FRAMEWORK,
)
def test_omitted_plugins_mean_no_chain(ms: ModelServings, manifest: Any) -> None:
    _untouched(ms, manifest, None, "spec.plugins omitted")


@behaviour(
    "plugins/chain/empty-means-no-chain",
    "A ModelServing whose spec.plugins is an empty list MUST get no plugin chain: no hostname, subdomain, "
    "ENTRY_ADDRESS or runtimeClassName on its Pods and no headless Service selecting them.",
    f"{PLUGINS}#Overview",
    Feature.PLUGIN_FRAMEWORK,
)
def test_empty_plugins_mean_no_chain(ms: ModelServings, manifest: Any) -> None:
    _untouched(ms, manifest, [], "spec.plugins: []")


@behaviour(
    "plugins/chain/recreated-pods-mutated",
    "Every Pod the controller creates after the first ones MUST go through the plugin chain: the plugin's mutation "
    "is on the Pods of a ServingGroup added by a scale-up, on a Pod replacing a deleted one (where Recovery is "
    "supported) and on the Pods of a rollout's new revision (where RollingUpdate is supported).",
    f"{PLUGINS}#Workflow",
    Feature.PLUGIN_FRAMEWORK,
)
def test_later_pods_get_the_plugins_mutations(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body = manifest("plugins-two-roles")
    plugin = builtin_plugin(suite.support)
    body["spec"]["plugins"] = [plugin]
    count = expected_pod_count(body)
    ms.create(body)
    seen = {p.metadata.uid for p in ms.wait_pods(NAME, count)}
    ms.patch(NAME, {"spec": {"replicas": 2}})
    seen = _later_pods_mutated(ms, plugin, seen, 2 * count, "scale", "of the ServingGroup added by scaling to 2")
    if suite.support.supports(Feature.RECOVERY):
        # A worker of Role alpha: whatever the recovery policy rebuilds (the Pod, its Role instance or
        # its ServingGroup), Role beta may keep its Pods, so a recreation into a running group is seen.
        victim = next(p for p in ms.pods(NAME) if role_of(p) == "alpha" and member(p) == "worker")
        ms.kube.core.delete_namespaced_pod(victim.metadata.name, ms.ns)
        seen = _later_pods_mutated(ms, plugin, seen, 2 * count, "recovery", f"replacing the deleted {_where(victim)}")
    if suite.support.supports(Feature.ROLLING_UPDATE):
        image = "registry.example/engine:v2"
        patch_roles(ms, body, with_image(body, image))
        _later_pods_mutated(ms, plugin, seen, 2 * count, "rollout", f"of the new revision (image {image})", image)


def _later_pods_mutated(
    ms: ModelServings,
    plugin: dict[str, Any],
    before: set[str],
    count: int,
    wait: str,
    why: str,
    image: str | None = None,
) -> set[str]:
    """Wait for ``count`` live Pods, at least one not in ``before`` (all on ``image`` when given),
    check the plugin's mutation on every new one; returns every UID seen."""

    def arrived(pods: list[Any]) -> bool:
        live = [p for p in pods if not p.metadata.deletion_timestamp]
        on_image = image is None or all(c.image == image for p in live for c in p.spec.containers)
        return len(live) == count == len(pods) and any(p.metadata.uid not in before for p in live) and on_image

    pods = ms.wait(wait, f"{count} Pods of {ms.ns}/{NAME}, new ones {why}", lambda: ms.pods(NAME), arrived)
    for pod in (p for p in pods if p.metadata.uid not in before):
        missing = missing_mutation(plugin, pod)
        assert missing is None, f"expected on {_where(pod)}, created {why}, {missing}"
    return before | {p.metadata.uid for p in pods}
