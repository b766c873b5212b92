"""ModelBooster: changes to a booster and what becomes of its child.

Worker counts change under a stable plugin declaration ("keep the declaration stable as worker
counts change"); a renamed backend replaces the child ("update name will cause the old
ModelServing deletion and a new ModelServing creation"); status.observedGeneration tracks the
generation. The child is found by its controller ownerReference each time (its name may change).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import BACKEND, BOOSTER, CONVERTERS, MODEL_STATUS, booster, pod_count, worker
from .children import Sources, plugin_chain, wait_child
from .test_conversion import start


@behaviour(
    "modelbooster/convert/plugins-stable-on-pods-change",
    "When a ModelBooster's worker pods change (2 to 3) its child MUST carry the new Pod count with exactly the "
    "plugin chain it had.",
    CONVERTERS,
    Feature.MODEL_BOOSTER,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_the_plugin_chain_is_kept_when_pods_change(ms: ModelServings) -> None:
    body = booster("mb-grow", pods=2)
    child, _ = start(ms, body, ready=False)
    before = plugin_chain(child)
    boosters = Sources(ms, BOOSTER)
    boosters.patch("mb-grow", {"spec": {"backend": {"workers": [worker(pods=3)]}}})
    body["spec"]["backend"]["workers"] = [worker(pods=3)]
    count = pod_count(body)

    def carried(child: dict[str, Any]) -> bool:
        live = [p for p in ms.pods(child["metadata"]["name"]) if not p.metadata.deletion_timestamp]
        return len(live) == count

    what = f" with {count} live Pods after the worker's pods went from 2 to 3"
    after = plugin_chain(wait_child(ms, boosters, "mb-grow", until=carried, wait="scale", what=what))
    assert after == before, (
        f"the child's plugin chain changed when the worker's pods went from 2 to 3: before {before}, after {after} "
        "(the spec: converters keep the declaration stable as worker counts change)"
    )


@behaviour(
    "modelbooster/convert/backend-rename-replaces-child",
    "Renaming a ModelBooster's backend MUST delete its child ModelServing and create a new one controlled by the "
    "booster.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_renaming_the_backend_replaces_the_child(ms: ModelServings) -> None:
    from kubernetes.client.exceptions import ApiException

    boosters = Sources(ms, BOOSTER)
    first, _ = start(ms, booster("mb-rename", backend_name="one"), ready=False)
    old_name, old_uid = first["metadata"]["name"], first["metadata"]["uid"]
    boosters.patch("mb-rename", {"spec": {"backend": {"name": "two"}}})
    what = f" other than the old child {old_name} (uid {old_uid}) after renaming the backend"
    second = wait_child(ms, boosters, "mb-rename", until=lambda c: c["metadata"]["uid"] != old_uid, what=what)

    def old_left() -> str:
        try:
            obj = ms.get(old_name)
        except ApiException as exc:
            if exc.status == 404:
                return ""
            raise
        return "" if obj["metadata"]["uid"] != old_uid else f"{old_name} (uid {old_uid}) still exists"

    ms.wait("deletion", f"the old child {ms.ns}/{old_name} (uid {old_uid}) to be deleted after the backend's rename",
            old_left, lambda left: not left)  # fmt: skip
    ms.wait_pods(second["metadata"]["name"], pod_count(booster("x")), ready=False)


def _generations(boosters: Sources, name: str) -> dict[str, Any]:
    obj = boosters.get(name)
    return {"generation": obj["metadata"].get("generation"),
            "observedGeneration": (obj.get("status") or {}).get("observedGeneration")}  # fmt: skip


@behaviour(
    "modelbooster/status/observed-generation",
    "A ModelBooster's status.observedGeneration MUST reach its metadata.generation after its creation and after a "
    "change of its spec.",
    MODEL_STATUS,
    Feature.MODEL_BOOSTER,
)
def test_observed_generation_tracks_the_generation(ms: ModelServings) -> None:
    boosters = Sources(ms, BOOSTER)
    start(ms, booster("mb-status"), ready=False)

    def current(seen: dict[str, Any]) -> bool:
        return seen["observedGeneration"] is not None and seen["observedGeneration"] == seen["generation"]

    ms.wait("status-updated", f"status.observedGeneration of ModelBooster {ms.ns}/mb-status to reach its generation",
            lambda: _generations(boosters, "mb-status"), current)  # fmt: skip
    changed = boosters.patch("mb-status", {"spec": {"backend": {"workers": [worker(pods=3)]}}})
    generation = changed["metadata"]["generation"]
    ms.wait("status-updated",
            f"status.observedGeneration of ModelBooster {ms.ns}/mb-status to reach generation {generation} after a "
            "change of its spec", lambda: _generations(boosters, "mb-status"),
            lambda seen: current(seen) and seen["generation"] >= generation)  # fmt: skip
