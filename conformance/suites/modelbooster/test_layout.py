"""ModelBooster: the child's Roles and the headless-service plugin the converter declares.

The plugin document: "ModelBooster and LWS converters declare headless-service when creating new
ModelServings ... ModelBooster omits workerTemplate when there are no workers, so those Roles
receive no plugin DNS resources." A worker of ``pods: 1`` is one Pod per Role instance, an entry
with no workers (reading C2, C10); ``pods: 2`` an entry and one worker, which a ModelServing Role
can only express with a workerTemplate. Roles are read by their count and templates, never by
name (the spec names none).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.suites.headless_dns.instances import reaching

from . import BACKEND, CONVERTERS, booster, worker
from .children import declares_headless_service, roles
from .test_conversion import start

PREFILL_IMAGE = "registry.example/conformance/prefill:v1"
DECODE_IMAGE = "registry.example/conformance/decode:v1"


def _images(role: dict[str, Any]) -> set[str]:
    out = set()
    for key in ("entryTemplate", "workerTemplate"):
        spec = (role.get(key) or {}).get("spec") or {}
        out |= {str(c.get("image")) for c in spec.get("containers") or []}
    return out


@behaviour(
    "modelbooster/convert/headless-service-declared",
    "A new ModelServing a ModelBooster is converted into MUST declare the headless-service plugin.",
    CONVERTERS,
    Feature.MODEL_BOOSTER,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_a_new_child_declares_headless_service(ms: ModelServings) -> None:
    child, _ = start(ms, booster("mb-plugin"), ready=False)
    assert declares_headless_service(child), (
        f"the new child {child['metadata']['name']} does not declare headless-service (spec.plugins: "
        f"{child['spec'].get('plugins')}); the spec: ModelBooster converters declare headless-service when creating "
        "new ModelServings"
    )


@behaviour(
    "modelbooster/convert/single-pod-no-worker-template",
    "A worker with pods 1 MUST become a Role without workerTemplate, whose Pods get no hostname or subdomain and no "
    "headless Service reaching them.",
    CONVERTERS,
    Feature.MODEL_BOOSTER,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_a_single_pod_worker_gets_no_worker_template_and_no_dns(ms: ModelServings) -> None:
    child, pods = start(ms, booster("mb-single", pods=1))
    with_template = [r.get("name") for r in roles(child) if r.get("workerTemplate") is not None]
    assert roles(child) and not with_template, (
        f"a worker with pods 1 (no workers) must give Roles without workerTemplate; Roles {with_template} of "
        f"{child['metadata']['name']} have one"
    )
    dns = {p.metadata.name: (p.spec.hostname, p.spec.subdomain) for p in pods if p.spec.hostname or p.spec.subdomain}
    assert not dns, f"Pods of a Role without workerTemplate got plugin DNS settings (hostname, subdomain): {dns}"

    def headless() -> dict[str, set[str]]:
        services = ms.services()
        return {n: p for n, p in reaching(ms, pods).items() if n in services and services[n].spec.cluster_ip == "None"}

    ms.holds(
        f"no headless Service selecting or listing the Pods {sorted(p.metadata.name for p in pods)} of a Role without "
        "workerTemplate",
        headless,
        lambda seen: not seen,
    )


@behaviour(
    "modelbooster/convert/multi-pod-worker-template",
    "A worker with pods 2 MUST become a Role with a workerTemplate and one worker Pod per instance (workerReplicas 1).",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_a_two_pod_worker_gets_a_worker_template(ms: ModelServings) -> None:
    child, _ = start(ms, booster("mb-pair", pods=2))
    layout = [(r.get("name"), r.get("workerTemplate") is not None, r.get("workerReplicas")) for r in roles(child)]
    assert len(layout) == 1 and layout[0][1] and layout[0][2] == 1, (
        f"one server worker with pods 2 must give one Role with a workerTemplate and workerReplicas 1; the child "
        f"{child['metadata']['name']} has (name, workerTemplate set, workerReplicas) {layout}"
    )


@behaviour(
    "modelbooster/convert/disaggregated-roles",
    "A vLLMDisaggregated backend's prefill and decode workers SHOULD become separate Roles of the one child, each "
    "running its own worker's image.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_prefill_and_decode_are_separate_roles(ms: ModelServings) -> None:
    workers = [worker(pods=1, image=PREFILL_IMAGE, type_="prefill"), worker(pods=1, image=DECODE_IMAGE, type_="decode")]
    child, pods = start(ms, booster("mb-pd", backend_type="vLLMDisaggregated", workers=workers))
    layout = {str(r.get("name")): sorted(_images(r)) for r in roles(child)}
    prefill = [n for n, images in layout.items() if PREFILL_IMAGE in images and DECODE_IMAGE not in images]
    decode = [n for n, images in layout.items() if DECODE_IMAGE in images and PREFILL_IMAGE not in images]
    assert len(layout) == 2 and len(prefill) == 1 and len(decode) == 1, (
        f"prefill ({PREFILL_IMAGE}) and decode ({DECODE_IMAGE}) workers must be two separate Roles; the child "
        f"{child['metadata']['name']} has Roles with images {layout}"
    )
    images = {p.metadata.name: {c.image for c in p.spec.containers} for p in pods}
    both = [n for n, i in images.items() if {PREFILL_IMAGE, DECODE_IMAGE} <= i]
    assert not both, f"Pods run both the prefill and the decode image: {both}"
    for wanted in (PREFILL_IMAGE, DECODE_IMAGE):
        assert any(wanted in i for i in images.values()), f"no Pod of the child runs {wanted}: {images}"
