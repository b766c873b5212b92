"""ModelBooster: the cache volume of ``cacheURI`` in every Pod, engine and downloader alike.

The spec: "CacheURI specifies where the downloaded model is stored and how the storage volume is
mounted inside every pod (both the downloader init container and the inference engine)":
``hostpath://PATH`` a host-local directory mounted at ``/PATH``, empty an EmptyDir, ``pvc://CLAIM``
the claim mounted at ``/CLAIM``; "The inference engine reads from the same path". The host path of
the hostPath volume and the EmptyDir's mount path are not given and not asserted (reading C4). A
PVC cache is asserted on the child's Pods as created: the suite makes no claim, so they stay
Pending (reading C5).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import BACKEND, booster, cache_problems
from .test_conversion import pod_specs, start

HOST_PATH = "kc-cache/models"  # cacheURI hostpath://kc-cache/models: mounted at /kc-cache/models
CLAIM = "kc-model-cache"


def _judge(specs: dict[str, dict[str, Any]], volume: str, mount: str | None, what: str, check: Any = None) -> None:
    problems = {n: p for n, s in specs.items() if (p := cache_problems(s, volume, mount, check=check))}
    assert not problems, f"{what}: {problems}"


@behaviour(
    "modelbooster/convert/cache-hostpath",
    "With cacheURI hostpath://PATH every Pod of the child MUST have a hostPath volume mounted at /PATH in the "
    "container running the worker's image and in the downloader init container.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_a_hostpath_cache_is_mounted_in_every_pod(ms: ModelServings) -> None:
    _, pods = start(ms, booster("mb-hostpath", cache_uri=f"hostpath://{HOST_PATH}"))
    _judge(pod_specs(ms, pods), "hostPath", f"/{HOST_PATH}",
           f"cacheURI hostpath://{HOST_PATH} must be a hostPath volume mounted at /{HOST_PATH} in the engine and the "
           "downloader of every Pod")  # fmt: skip


@behaviour(
    "modelbooster/convert/cache-empty",
    "Without cacheURI every Pod of the child MUST have an emptyDir volume mounted at the same path in the container "
    "running the worker's image and in the downloader init container.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_no_cache_uri_is_an_empty_dir_in_every_pod(ms: ModelServings) -> None:
    _, pods = start(ms, booster("mb-emptydir"))
    _judge(pod_specs(ms, pods), "emptyDir", None,
           "without cacheURI the cache must be an EmptyDir volume mounted in the engine and the downloader of every "
           "Pod, at the same path")  # fmt: skip


@behaviour(
    "modelbooster/convert/cache-pvc",
    "With cacheURI pvc://CLAIM every Pod of the child MUST have a volume of the claim CLAIM mounted at /CLAIM in the "
    "container running the worker's image and in the downloader init container.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_a_pvc_cache_is_mounted_in_every_pod(ms: ModelServings) -> None:
    # The claim does not exist (the suite makes none), so the Pods stay Pending: they are judged as created.
    _, pods = start(ms, booster("mb-pvc", cache_uri=f"pvc://{CLAIM}"), ready=False)

    def claim(volume: dict[str, Any]) -> bool:
        return bool(volume["persistentVolumeClaim"].get("claimName") == CLAIM)

    _judge(pod_specs(ms, pods), "persistentVolumeClaim", f"/{CLAIM}",
           f"cacheURI pvc://{CLAIM} must be the claim {CLAIM} mounted at /{CLAIM} in the engine and the downloader of "
           "every Pod", claim)  # fmt: skip
