"""InPlaceUpdateFallback: a change an image patch cannot apply recreates the Pods and says why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot
from conformance.suites.rollout import patch_roles, roles_of, start, uids_of, with_image

from . import ELIGIBILITY, PLUGIN_INTERACTION, STRATEGY
from .test_inplace import V1, V2, body_of

FALLBACK = "InPlaceUpdateFallback"


def _templates(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [r[k]["spec"] for r in roles_of(body) for k in ("entryTemplate", "workerTemplate") if r.get(k)]


def _expect_fallback(
    ms: ModelServings, body: dict[str, Any], change: Callable[[dict[str, Any]], None], image: str, what: str
) -> None:
    """Apply ``change`` to the templates under a watch: every Pod must be replaced (none keeps its
    UID), end Running and Ready on ``image``, and an InPlaceUpdateFallback Event must say why."""
    name = body["metadata"]["name"]
    layout = start(ms, body)
    with RolloutWatch(ms, name, layout) as watch:
        before = set(uids_of(list(watch.latest().pods)).values())
        change(body)
        patch_roles(ms, body, roles_of(body))

        def replaced(s: Snapshot) -> bool:
            return s.settled_on(layout, {"server": image}) and not before & set(s.uids().values())

        watch.wait_for("rollout", f"{what}: every Pod replaced (new UIDs) and Ready on {image}", replaced)
    event = ms.wait_event(name, FALLBACK)
    assert (event.message or "").strip(), f"{what}: the {FALLBACK} Event must report why; its message is empty"


@behaviour(
    "inplace/fallback/ineligible-change",
    "With updateMethod InPlace, a change to anything but regular-container images (here the command) MUST recreate "
    "the Pods of the ServingGroup and MUST be reported by an InPlaceUpdateFallback Event with a message.",
    STRATEGY,
    Feature.IN_PLACE_FALLBACK,
)
def test_ineligible_change_falls_back_to_recreate(ms: ModelServings, manifest: Any) -> None:
    body = body_of(manifest, 1)

    def change(b: dict[str, Any]) -> None:
        for spec in _templates(b):
            spec["containers"][0]["command"] = ["serve", "--changed"]

    _expect_fallback(ms, body, change, V1, "InPlace, container command changed")


@behaviour(
    "inplace/fallback/init-container-image",
    "With updateMethod InPlace, a change of an init container's image MUST NOT be applied in place: the Pods MUST "
    "be recreated and an InPlaceUpdateFallback Event with a message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_init_container_image_change_falls_back(ms: ModelServings, manifest: Any) -> None:
    body = body_of(manifest, 1)
    for spec in _templates(body):
        spec["initContainers"] = [{"name": "init", "image": "registry.example/init:v1"}]

    def change(b: dict[str, Any]) -> None:
        for spec in _templates(b):
            spec["initContainers"][0]["image"] = "registry.example/init:v2"

    _expect_fallback(ms, body, change, V1, "InPlace, init container image changed")


@behaviour(
    "inplace/fallback/headless-service",
    "A ModelServing with the headless-service plugin and updateMethod InPlace MUST take the recreate fallback even "
    "for an image-only change, reporting an InPlaceUpdateFallback Event with a message.",
    PLUGIN_INTERACTION,
    Feature.IN_PLACE_FALLBACK,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_headless_service_always_falls_back(ms: ModelServings, manifest: Any) -> None:
    body = manifest("inplace-headless")

    def change(b: dict[str, Any]) -> None:
        with_image(b, V2)

    _expect_fallback(ms, body, change, V2, "InPlace with headless-service, image only")
