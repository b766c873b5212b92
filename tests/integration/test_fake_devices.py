"""The fake DRA drivers on an embedded cluster of their own (GPU and NPU node pools).

The cluster's supervisor runs the two ResourceSlice publishers; the real kube-controller-manager
makes ResourceClaims from templates and the real kube-scheduler allocates devices from the
published slices. Nothing here emulates allocation. The kubelet plugin's gRPC path is also driven
against this cluster's API (claims read for real), through a real gRPC client on unix sockets.

Own cluster, so marker ``serial`` (it runs in the pass where clusters of their own start).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from conformance.cluster.kube import api_client as make_api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import wait_for
from fake_devices.drivers import GPU, NPU
from fake_devices.kubeletplugin.pb import dra_v1_pb2 as dra
from fake_devices.kubeletplugin.pb import dra_v1_pb2_grpc as dra_grpc
from fake_devices.kubeletplugin.server import KubeletPlugin, api_lookup

pytestmark = [pytest.mark.serial, pytest.mark.slow]

GPUS_PER_NODE = 2
NPUS_PER_NODE = 4
DEPLOY = Path(__file__).resolve().parents[2] / "fake-devices" / "deploy"
GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def spec(name: str) -> ClusterSpec:
    from conformance.implementations import reference

    # The reference's CRDs exist before kube-controller-manager starts: its garbage collector then
    # removes a deleted ModelServing's claims at once, not after its next 30 s discovery resync.
    return ClusterSpec(
        name=name,
        crds=reference.crds(),
        node_pools=[
            NodePool(name="worker", count=1),
            NodePool(name="gpu", count=2, labels={GPU.count_label: str(GPUS_PER_NODE)}),
            NodePool(name="npu", count=1, labels={NPU.count_label: str(NPUS_PER_NODE)}),
        ],
    )


@pytest.fixture(scope="module")
def cluster_with_devices() -> Iterator[ClusterInfo]:
    provider = LocalProvider()
    info = provider.up(spec(f"fd-{secrets.token_hex(3)}"), owner_pid=os.getpid())
    try:
        yield info
    finally:
        provider.down(info.name)


@pytest.fixture(scope="module")
def api(cluster_with_devices: ClusterInfo) -> Any:
    return make_api_client(cluster_with_devices.kubeconfig)


@pytest.fixture
def ns(api: Any) -> Iterator[str]:
    core = client.CoreV1Api(api)
    name = f"fd-{secrets.token_hex(4)}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(f"ServiceAccount {name}/default", lambda: core.read_namespaced_service_account("default", name))
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def slices(api: Any) -> list[dict[str, Any]]:
    resp = client.ResourceV1Api(api).list_resource_slice(_preload_content=False)
    return list(json.loads(resp.data)["items"])


def slice_map(api: Any) -> dict[tuple[str, str], list[str]]:
    """(driver, node) -> device names."""
    return {
        (s["spec"]["driver"], s["spec"]["nodeName"]): [d["name"] for d in s["spec"]["devices"]] for s in slices(api)
    }


def claim_template(name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    request = {
        "name": "dev",
        "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count},
    }
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": [request]}}}}


def pod(name: str, template: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "engine:v1", "resources": {"claims": [{"name": "dev"}]}}],
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": template}],
        },
    }


def scheduled(core: client.CoreV1Api, ns: str, name: str) -> Any:
    return wait_for(
        f"pod {name} scheduled and Running",
        lambda: core.read_namespaced_pod(name, ns),
        until=lambda p: bool(p.spec.node_name) and p.status.phase == "Running",
        timeout=60,
    )


def unschedulable(core: client.CoreV1Api, ns: str, name: str) -> str:
    """The scheduler's message on a Pod it could not place."""

    def condition(p: Any) -> Any:
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)

    p = wait_for(
        f"pod {name} reported unschedulable",
        lambda: core.read_namespaced_pod(name, ns),
        until=lambda p: (c := condition(p)) is not None and c.status == "False" and c.reason == "Unschedulable",
        timeout=60,
    )
    assert not p.spec.node_name and p.status.phase == "Pending"
    return str(condition(p).message)


def allocations(api: Any, ns: str | None = None) -> dict[str, list[tuple[str, str, str]]]:
    """claim name -> (driver, pool, device) allocated to it."""
    resource = client.ResourceV1Api(api)
    resp = (
        resource.list_namespaced_resource_claim(ns, _preload_content=False)
        if ns
        else resource.list_resource_claim_for_all_namespaces(_preload_content=False)
    )
    out = {}
    for c in json.loads(resp.data)["items"]:
        results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        out[f"{c['metadata']['namespace']}/{c['metadata']['name']}"] = [
            (r["driver"], r["pool"], r["device"]) for r in results
        ]
    return out


def no_device_twice(api: Any) -> None:
    every = [d for devices in allocations(api).values() for d in devices]
    assert len(every) == len(set(every)), f"a device is allocated twice: {every}"


# -- publishing -----------------------------------------------------------------------------------


def test_cluster_up_publishes_one_pool_per_device_node(api: Any, cluster_with_devices: ClusterInfo) -> None:
    assert cluster_with_devices.details["fake_devices"] == {"gpu": ["gpu-0", "gpu-1"], "npu": ["npu-0"]}
    assert any("DRA devices" in line for line in cluster_with_devices.simulates)
    assert slice_map(api) == {
        (GPU.driver, "gpu-0"): ["gpu-0", "gpu-1"],
        (GPU.driver, "gpu-1"): ["gpu-0", "gpu-1"],
        (NPU.driver, "npu-0"): [f"npu-{i}-0" for i in range(NPUS_PER_NODE)],
    }
    for s in slices(api):
        assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
        assert s["spec"]["pool"]["resourceSliceCount"] == 1
    classes = {d.metadata.name for d in client.ResourceV1Api(api).list_device_class().items}
    assert {GPU.driver, NPU.driver} <= classes


def test_publisher_follows_nodes_labels_and_deleted_slices(api: Any, cluster_with_devices: ClusterInfo) -> None:
    core = client.CoreV1Api(api)
    resource = client.ResourceV1Api(api)
    node = "extra-gpu"
    body = {
        "metadata": {"name": node, "labels": {GPU.count_label: "1"}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110"}},
    }
    core.create_node(body)
    try:
        wait_for(
            "a slice for the new node", lambda: slice_map(api).get((GPU.driver, node)), until=lambda d: d == ["gpu-0"]
        )
        name = f"{node}-{GPU.driver}"
        resource.delete_resource_slice(name)  # behind the publisher's back
        wait_for("the slice recreated", lambda: slice_map(api).get((GPU.driver, node)), until=lambda d: d == ["gpu-0"])
        core.patch_node(node, {"metadata": {"labels": {GPU.count_label: "3"}}})
        wait_for(
            "the slice grown",
            lambda: slice_map(api).get((GPU.driver, node)),
            until=lambda d: d is not None and len(d) == 3,
        )
        gen = next(s for s in slices(api) if s["metadata"]["name"] == name)["spec"]["pool"]["generation"]
        assert gen >= 2
        for bad in ("lots", "1e3", "100000"):  # ("-1" is not even a valid label value)
            core.patch_node(node, {"metadata": {"labels": {GPU.count_label: bad}}})
            wait_for(
                f"no slice with label {bad!r}",
                lambda: slice_map(api).get((GPU.driver, node)),
                until=lambda d: d is None,
            )
            core.patch_node(node, {"metadata": {"labels": {GPU.count_label: "1"}}})
            wait_for("the slice back", lambda: slice_map(api).get((GPU.driver, node)), until=lambda d: d == ["gpu-0"])
        core.patch_node(node, {"metadata": {"labels": {GPU.count_label: None}}})
        wait_for(
            "no slice without the label", lambda: slice_map(api).get((GPU.driver, node)), until=lambda d: d is None
        )
        core.patch_node(node, {"metadata": {"labels": {GPU.count_label: "2"}}})
        wait_for("the slice for the relabelled node", lambda: slice_map(api).get((GPU.driver, node)), until=bool)
    finally:
        core.delete_node(node)
    wait_for("no slice for the deleted node", lambda: slice_map(api).get((GPU.driver, node)), until=lambda d: d is None)
    status = LocalProvider().status(cluster_with_devices.name) or {}
    alive = status.get("components_alive", {})
    assert alive.get("fake-devices-gpu") and alive.get("fake-devices-npu"), "a publisher crashed"


# -- allocation by the real scheduler ---------------------------------------------------------------


def test_pods_get_free_devices_and_the_rest_wait_with_the_schedulers_reason(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    resource = client.ResourceV1Api(api)
    resource.create_namespaced_resource_claim_template(ns, claim_template("one-gpu", GPU.driver, 1))
    resource.create_namespaced_resource_claim_template(ns, claim_template("two-gpus", GPU.driver, 2))
    resource.create_namespaced_resource_claim_template(ns, claim_template("two-npus", NPU.driver, 2))
    resource.create_namespaced_resource_claim_template(ns, claim_template("nine-npus", NPU.driver, 9))

    for name, template in (("g1", "one-gpu"), ("g2", "two-gpus"), ("n2", "two-npus")):
        core.create_namespaced_pod(ns, pod(name, template))
    placed = {name: scheduled(core, ns, name).spec.node_name for name in ("g1", "g2", "n2")}
    assert placed["g1"].startswith("gpu-") and placed["g2"].startswith("gpu-") and placed["g1"] != placed["g2"]
    assert placed["n2"] == "npu-0"
    claims = allocations(api, ns)
    by_pod = {name: next(v for k, v in claims.items() if k.startswith(f"{ns}/{name}-")) for name in placed}
    assert len(by_pod["g1"]) == 1 and len(by_pod["g2"]) == 2 and len(by_pod["n2"]) == 2
    for name, devices in by_pod.items():
        assert {pool for _, pool, _ in devices} == {placed[name]}  # devices from the pod's own node
    no_device_twice(api)

    # 3 of 4 GPUs are taken: two more on one node do not exist; nine NPUs never will.
    core.create_namespaced_pod(ns, pod("g2-more", "two-gpus"))
    core.create_namespaced_pod(ns, pod("n9", "nine-npus"))
    message = unschedulable(core, ns, "g2-more")
    assert "cannot allocate all claims" in message, message
    assert "cannot allocate all claims" in unschedulable(core, ns, "n9")

    # Deleting g2 frees its GPUs (its claim goes with it): g2-more takes them.
    core.delete_namespaced_pod("g2", ns, grace_period_seconds=0)
    assert scheduled(core, ns, "g2-more").spec.node_name == placed["g2"]
    no_device_twice(api)


def test_a_device_class_that_does_not_exist_is_the_schedulers_reason(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(ns, claim_template("ghost", "tpu.example.com"))
    core.create_namespaced_pod(ns, pod("ghost", "ghost"))
    message = unschedulable(core, ns, "ghost")
    assert "tpu.example.com" in message and "not" in message, message


def test_modelserving_roles_get_gpus_and_npus(
    api: Any, ns: str, cluster_with_devices: ClusterInfo, tmp_path: Path
) -> None:
    from conformance.implementations import reference

    reference.install(cluster_with_devices)
    kubeconfig = reference.token_kubeconfig(cluster_with_devices, tmp_path)
    controller = reference.start(kubeconfig, tmp_path / "kthena-ref.log", owner_pid=os.getpid())
    try:
        resource = client.ResourceV1Api(api)
        resource.create_namespaced_resource_claim_template(ns, claim_template("one-gpu", GPU.driver, 1))
        resource.create_namespaced_resource_claim_template(ns, claim_template("three-npus", NPU.driver, 3))

        def role(name: str, template: str) -> dict[str, Any]:
            return {
                "name": name,
                "replicas": 1,
                "workerReplicas": 0,
                "entryTemplate": pod("x", template) | {"metadata": {}},
            }

        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ModelServing",
            "metadata": {"name": "llm"},
            "spec": {
                "replicas": 2,
                "schedulerName": "default-scheduler",
                "template": {"roles": [role("prefill", "one-gpu"), role("decode", "three-npus")]},
            },
        }
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        core = client.CoreV1Api(api)
        label = "modelserving.volcano.sh/name=llm"
        pods = wait_for(
            "4 ModelServing pods, 3 Running",
            lambda: core.list_namespaced_pod(ns, label_selector=label).items,
            until=lambda ps: len(ps) == 4 and sum(p.status.phase == "Running" for p in ps) == 3,
            timeout=90,
        )
        running = {p.metadata.name: p.spec.node_name for p in pods if p.status.phase == "Running"}
        (pending,) = [p.metadata.name for p in pods if p.status.phase != "Running"]
        # Both prefill pods get a GPU (4 on 2 nodes); the one NPU node has 4 NPUs: one 3-NPU decode
        # pod fits, the other waits with the scheduler's reason.
        assert sorted(n for n in running if "prefill" in n) == ["llm-0-prefill-0-0", "llm-1-prefill-0-0"]
        assert all(node.startswith("gpu-") for n, node in running.items() if "prefill" in n)
        assert [node for n, node in running.items() if "decode" in n] == ["npu-0"]
        assert "decode" in pending
        assert "cannot allocate all claims" in unschedulable(core, ns, pending)
        no_device_twice(api)

        custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "llm")
        wait_for(
            "the ModelServing's claims gone (devices freed)",
            lambda: allocations(api, ns),
            until=lambda claims: not claims,
            timeout=60,
        )
    finally:
        controller.stop()


# -- kind artefacts and the kubelet plugin against this API -------------------------------------------


def test_deploy_manifests_pass_server_side_dry_run(api: Any, ns: str, tmp_path: Path) -> None:
    # Its discovery cache in the test's own directory: by default it is /tmp/osrcp-*.json, left behind.
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            if res.namespaced:
                doc["metadata"]["namespace"] = ns  # the real one ("fake-devices") does not exist here
                res.create(body=doc, namespace=ns, query_params=[("dryRun", "All")])
            else:
                try:
                    res.create(body=doc, query_params=[("dryRun", "All")])
                except ApiException as exc:
                    assert exc.status == 409, f"{path.name} {doc['kind']}: {exc.body}"  # DeviceClasses exist


def test_kubelet_plugin_prepares_a_real_claim(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(ns, claim_template("two-npus", NPU.driver, 2))
    core.create_namespaced_pod(ns, pod("npu-user", "two-npus"))
    node = scheduled(core, ns, "npu-user").spec.node_name
    (claim_ref,) = core.read_namespaced_pod_status("npu-user", ns).status.resource_claim_statuses
    claim = client.ResourceV1Api(api).read_namespaced_resource_claim(claim_ref.resource_claim_name, ns)
    root = Path(tempfile.mkdtemp(prefix="fd-", dir="/tmp"))
    try:
        plugin = KubeletPlugin(
            NPU, node, api_lookup(api), plugin_dir=root / "p", registry_dir=root / "r", cdi_dir=root / "cdi"
        )
        with plugin, grpc.insecure_channel(f"unix://{plugin.dra_socket}") as channel:
            stub = dra_grpc.DRAPluginStub(channel)
            req = [dra.Claim(namespace=ns, name=claim.metadata.name, uid=claim.metadata.uid)]
            resp = stub.NodePrepareResources(dra.NodePrepareResourcesRequest(claims=req), timeout=10)
            entry = resp.claims[claim.metadata.uid]
            assert not entry.error, entry.error
            devices = sorted(d.device_name for d in entry.devices)
            allocated = sorted(r.device for r in claim.status.allocation.devices.results)
            assert devices == allocated and len(devices) == 2
            spec = json.loads((root / "cdi" / f"{NPU.driver}-{claim.metadata.uid}.json").read_text())
            env = [e for d in spec["devices"] for e in d["containerEdits"]["env"]]
            assert {f"NPU_DEVICE_{d.removeprefix('npu-').replace('-', '_')}={d}" for d in devices} <= set(env)
            un = stub.NodeUnprepareResources(dra.NodeUnprepareResourcesRequest(claims=req), timeout=10)
            assert not un.claims[claim.metadata.uid].error
            assert list((root / "cdi").iterdir()) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
