"""The embedded cluster does, for real, what the conformance suite will rely on.

Each test proves one piece of the control plane (or one kwok stage) works end to end on the shared
embedded cluster; none of them emulates what kube-apiserver or kube-controller-manager do.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from conformance.cluster.errors import HarnessError
from conformance.cluster.faults import PULL_FAILURE_REASONS, Fault, FaultInjector, unpullable
from conformance.cluster.pki import CertificateAuthority
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.registry import get_provider
from conformance.framework.waits import holds_for, wait_for

pytestmark = pytest.mark.cluster

IMAGE = "registry.example/model-server:v1"


def pod_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": IMAGE}], **spec},
    }


def condition(pod: Any, kind: str) -> str | None:
    for cond in (pod.status.conditions or []) if pod.status else []:
        if cond.type == kind:
            return str(cond.status)
    return None


def ready_pod(core: client.CoreV1Api, namespace: str, name: str, **spec: Any) -> Any:
    core.create_namespaced_pod(namespace, pod_body(name, **spec))
    return wait_for(
        f"pod {name} Running and Ready",
        lambda: core.read_namespaced_pod(name, namespace),
        until=lambda p: p.status.phase == "Running" and condition(p, "Ready") == "True",
    )


@pytest.fixture
def core(api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def test_nodes_carry_configured_labels_capacity_and_taints(
    core: client.CoreV1Api, cluster: ClusterInfo, request: pytest.FixtureRequest
) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    provider = get_provider(request.config.getoption("--cluster-provider"))
    assert provider.nodes(cluster.name) == sorted(cluster.details["nodes"]) == sorted(nodes)
    special = nodes["special-0"]
    assert special.metadata.labels["conformance.kthena.io/pool"] == "special"
    assert special.status.capacity["cpu"] == "8"
    assert [(t.key, t.effect) for t in special.spec.taints or []] == [("conformance.kthena.io/special", "NoSchedule")]
    assert all(condition(n, "Ready") == "True" for n in nodes.values())


def test_pod_becomes_running_and_ready_with_an_ip(core: client.CoreV1Api, namespace: str) -> None:
    pod = ready_pod(core, namespace, "web")
    assert pod.status.pod_ip
    assert pod.spec.node_name.startswith("worker-"), "the untolerated pod must avoid the tainted node"
    assert [s.image for s in pod.status.container_statuses] == [IMAGE]


def test_volcano_scheduler_profile_schedules_pods(core: client.CoreV1Api, namespace: str) -> None:
    pod = ready_pod(core, namespace, "gang-member", schedulerName="volcano")
    assert pod.spec.node_name
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=gang-member,reason=Scheduled")
    assert [e.reporting_component or e.source.component for e in events.items] == ["volcano"]


def test_headless_service_endpointslice_publishes_hostnames(
    api_client: Any, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "members"},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"group": "g0"}},
        },
    )
    for name in ("g0-entry", "g0-worker-1"):
        body = pod_body(name, hostname=name, subdomain="members")
        body["metadata"]["labels"]["group"] = "g0"
        core.create_namespaced_pod(namespace, body)
    discovery = client.DiscoveryV1Api(api_client)

    def hostnames() -> dict[str, bool]:
        slices = discovery.list_namespaced_endpoint_slice(
            namespace, label_selector="kubernetes.io/service-name=members"
        )
        return {ep.hostname: bool(ep.conditions.ready) for s in slices.items for ep in s.endpoints or []}

    assert wait_for("EndpointSlice hostnames", hostnames, until=lambda h: len(h) == 2) == {
        "g0-entry": True,
        "g0-worker-1": True,
    }


def test_deleting_an_owner_garbage_collects_its_dependents(core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    body = pod_body("dependent")
    body["metadata"]["ownerReferences"] = [ref]
    core.create_namespaced_pod(namespace, body)
    core.delete_namespaced_config_map("owner", namespace)
    wait_for(
        "the dependent pod to be garbage-collected",
        lambda: [p.metadata.name for p in core.list_namespaced_pod(namespace).items],
        until=lambda names: "dependent" not in names,
    )


def test_pod_disruption_budget_makes_eviction_return_429(
    api_client: Any, core: client.CoreV1Api, namespace: str
) -> None:
    ready_pod(core, namespace, "guarded")
    policy = client.PolicyV1Api(api_client)
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "keep-one"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    wait_for(
        "the PDB to observe its pod",
        lambda: policy.read_namespaced_pod_disruption_budget("keep-one", namespace).status,
        until=lambda s: s is not None and s.observed_generation == 1 and s.expected_pods == 1,
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction(
            "guarded", namespace, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded"}}
        )
    assert err.value.status == 429


def test_resource_claim_template_is_allocated_from_a_published_slice(
    api_client: Any, core: client.CoreV1Api, namespace: str
) -> None:
    resource = client.ResourceV1Api(api_client)
    driver = (
        f"{namespace}.gpu.fake.kthena-conformance.io"  # unique per test: DeviceClasses and slices are cluster-scoped
    )
    resource.create_device_class(
        {"metadata": {"name": driver}, "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}}
    )
    resource.create_resource_slice(
        {
            "metadata": {"name": f"{driver}-worker-0"},
            "spec": {
                "driver": driver,
                "nodeName": "worker-0",
                "pool": {"name": "worker-0", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}],
            },
        }
    )
    try:
        resource.create_namespaced_resource_claim_template(
            namespace,
            {
                "metadata": {"name": "one-gpu"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}},
            },
        )
        ready_pod(core, namespace, "trainer", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
        pod = core.read_namespaced_pod("trainer", namespace)
        assert pod.spec.node_name == "worker-0"
        claims = resource.list_namespaced_resource_claim(namespace).items
        assert len(claims) == 1
        results = claims[0].status.allocation.devices.results
        assert [(r.driver, r.pool, r.device) for r in results] == [(driver, "worker-0", "gpu-0")]
    finally:
        core.delete_namespaced_pod("trainer", namespace, grace_period_seconds=0)
        resource.delete_resource_slice(f"{driver}-worker-0")
        resource.delete_device_class(driver)


def test_in_place_image_patch_is_reflected_with_a_restart(core: client.CoreV1Api, namespace: str) -> None:
    """As a kubelet restarting the container would: NotReady with the new image, then Ready again."""
    pod = ready_pod(core, namespace, "inplace")
    uid = pod.metadata.uid
    seen: list[tuple[str, str | None]] = []  # (image in containerStatuses, Ready), in watch order
    stream = watch.Watch()
    events = stream.stream(
        core.list_namespaced_pod,
        namespace,
        field_selector="metadata.name=inplace",
        resource_version=pod.metadata.resource_version,
        timeout_seconds=60,
    )
    core.patch_namespaced_pod(
        "inplace", namespace, {"spec": {"containers": [{"name": "main", "image": IMAGE.replace("v1", "v2")}]}}
    )
    for event in events:
        current = event["object"]
        statuses = current.status.container_statuses or []
        seen.append((statuses[0].image if statuses else "", condition(current, "Ready")))
        if seen[-1] == (IMAGE.replace("v1", "v2"), "True"):
            stream.stop()
    assert seen and seen[-1] == (IMAGE.replace("v1", "v2"), "True"), f"never Ready on the new image: {seen}"
    assert (IMAGE.replace("v1", "v2"), "False") in seen, f"expected NotReady while restarting; seen {seen}"
    pod = core.read_namespaced_pod("inplace", namespace)
    status = pod.status.container_statuses[0]
    assert pod.metadata.uid == uid
    assert status.restart_count == 1
    assert status.ready is True


def test_pod_can_be_made_not_ready_and_ready_again(
    core: client.CoreV1Api, namespace: str, faults: FaultInjector
) -> None:
    ready_pod(core, namespace, "flaky")
    faults.inject(namespace, "flaky", Fault.NOT_READY)
    pod = wait_for(
        "Ready=False",
        lambda: core.read_namespaced_pod("flaky", namespace),
        until=lambda p: condition(p, "Ready") == "False",
    )
    assert pod.status.phase == "Running"
    assert pod.status.container_statuses[0].ready is False
    faults.inject(namespace, "flaky", Fault.CLEAR)
    wait_for(
        "Ready=True again",
        lambda: core.read_namespaced_pod("flaky", namespace),
        until=lambda p: condition(p, "Ready") == "True",
    )


def test_pod_can_be_failed_on_demand(core: client.CoreV1Api, namespace: str, faults: FaultInjector) -> None:
    ready_pod(core, namespace, "doomed")
    faults.inject(namespace, "doomed", Fault.FAIL)
    pod = wait_for(
        "phase Failed",
        lambda: core.read_namespaced_pod("doomed", namespace),
        until=lambda p: p.status.phase == "Failed",
    )
    assert condition(pod, "Ready") == "False"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 1


def test_pod_can_be_restarted_on_demand(core: client.CoreV1Api, namespace: str, faults: FaultInjector) -> None:
    ready_pod(core, namespace, "bouncy")
    for expected in (1, 2):
        faults.inject(namespace, "bouncy", Fault.RESTART)
        pod = wait_for(
            f"restartCount {expected}",
            lambda: core.read_namespaced_pod("bouncy", namespace),
            until=lambda p, n=expected: p.status.container_statuses[0].restart_count == n,  # type: ignore[misc]
        )
        assert condition(pod, "Ready") == "True"
        assert pod.status.container_statuses[0].last_state.terminated is not None


SIDECAR = {"name": "proxy", "image": "registry.example/proxy:v1", "restartPolicy": "Always"}


def test_a_sidecar_can_be_restarted_on_demand(core: client.CoreV1Api, namespace: str, faults: FaultInjector) -> None:
    """The first init container, a sidecar, restarts (restartCount + 1, a lastState); the regular
    containers do not; with NOT_READY first the Pod stays not Ready, as a crashing sidecar leaves it."""
    ready_pod(core, namespace, "sidecar", initContainers=[SIDECAR])
    faults.inject(namespace, "sidecar", Fault.NOT_READY)
    for expected in (1, 2):
        faults.inject(namespace, "sidecar", Fault.RESTART_SIDECAR)
        pod = wait_for(
            f"the sidecar's restartCount {expected}",
            lambda: core.read_namespaced_pod("sidecar", namespace),
            until=lambda p, n=expected: p.status.init_container_statuses[0].restart_count == n,  # type: ignore[misc]
        )
        sidecar = pod.status.init_container_statuses[0]
        assert sidecar.state.running is not None and sidecar.last_state.terminated is not None
        assert pod.status.container_statuses[0].restart_count == 0
        assert condition(pod, "Ready") == "False"


def test_only_a_sidecar_can_be_restarted(core: client.CoreV1Api, namespace: str, faults: FaultInjector) -> None:
    """A running Pod's kubelet never restarts a regular init container: the injector refuses it."""
    ready_pod(core, namespace, "plain-init", initContainers=[{"name": "setup", "image": IMAGE}])
    with pytest.raises(HarnessError, match="no sidecar"):
        faults.inject(namespace, "plain-init", Fault.RESTART_SIDECAR)


def _set_condition(core: client.CoreV1Api, namespace: str, pod: str, kind: str, status: str) -> None:
    """What a readiness gate's owner does: set its condition through the status subresource."""
    core.patch_namespaced_pod_status(pod, namespace, {"status": {"conditions": [{"type": kind, "status": status}]}})


def _ready_condition(core: client.CoreV1Api, namespace: str, pod: str, status: str) -> Any:
    return wait_for(
        f"pod {pod} Ready={status}",
        lambda: core.read_namespaced_pod(pod, namespace),
        until=lambda p: condition(p, "Ready") == status,
    )


def test_readiness_gates_are_never_set_and_ready_follows_them(core: client.CoreV1Api, namespace: str) -> None:
    """As a kubelet: gate conditions are someone else's; Ready needs every one True, both ways."""
    gates = ["example.com/load-balancer", "example.com/warm"]
    core.create_namespaced_pod(namespace, pod_body("gated", readinessGates=[{"conditionType": g} for g in gates]))
    pod = wait_for(
        "pod gated Running with ready containers",
        lambda: core.read_namespaced_pod("gated", namespace),
        until=lambda p: p.status.phase == "Running" and condition(p, "ContainersReady") == "True",
    )
    assert condition(pod, "Ready") == "False", "a Pod whose gates are not set must not be Ready"
    assert all(condition(pod, g) is None for g in gates), "the simulated kubelet must never set a gate"
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert ready.reason == "ReadinessGatesNotReady"
    assert 'readiness gate "example.com/load-balancer" does not exist' in ready.message

    _set_condition(core, namespace, "gated", gates[0], "True")
    pod = wait_for(
        "the first gate True",
        lambda: core.read_namespaced_pod("gated", namespace),
        until=lambda p: condition(p, gates[0]) == "True",
    )
    assert condition(pod, "Ready") == "False", "one gate of two True must not make the Pod Ready"
    _set_condition(core, namespace, "gated", gates[1], "True")
    pod = _ready_condition(core, namespace, "gated", "True")
    assert not next(c for c in pod.status.conditions if c.type == "Ready").reason
    _set_condition(core, namespace, "gated", gates[0], "False")
    pod = _ready_condition(core, namespace, "gated", "False")
    assert condition(pod, "ContainersReady") == "True"
    _set_condition(core, namespace, "gated", gates[0], "True")
    _ready_condition(core, namespace, "gated", "True")


def test_a_not_ready_fault_cleared_on_a_gated_pod_waits_for_its_gate(
    core: client.CoreV1Api, namespace: str, faults: FaultInjector
) -> None:
    core.create_namespaced_pod(namespace, pod_body("gated-flaky", readinessGates=[{"conditionType": "example.com/g"}]))
    wait_for(
        "containers ready",
        lambda: core.read_namespaced_pod("gated-flaky", namespace),
        until=lambda p: condition(p, "ContainersReady") == "True",
    )
    faults.inject(namespace, "gated-flaky", Fault.NOT_READY)
    wait_for(
        "ContainersReady=False",
        lambda: core.read_namespaced_pod("gated-flaky", namespace),
        until=lambda p: condition(p, "ContainersReady") == "False",
    )
    faults.inject(namespace, "gated-flaky", Fault.CLEAR)
    pod = wait_for(
        "ContainersReady=True again",
        lambda: core.read_namespaced_pod("gated-flaky", namespace),
        until=lambda p: condition(p, "ContainersReady") == "True",
    )
    assert condition(pod, "Ready") == "False", "clearing the fault must not make a Pod with an unset gate Ready"
    _set_condition(core, namespace, "gated-flaky", "example.com/g", "True")
    _ready_condition(core, namespace, "gated-flaky", "True")


def _waiting_reasons(events: Any, name: str, stop_at: str, stream: watch.Watch) -> list[tuple[str, str, str]]:
    """(phase, Ready, main container's waiting reason) in watch order, until ``stop_at`` is seen."""
    seen: list[tuple[str, str, str]] = []
    for event in events:
        pod = event["object"]
        main = next((s for s in pod.status.container_statuses or [] if s.name == "main"), None)
        waiting = main.state.waiting.reason if main and main.state and main.state.waiting else ""
        seen.append((pod.status.phase, condition(pod, "Ready") or "", waiting or ""))
        if waiting == stop_at:
            stream.stop()
    return seen


def test_a_new_pod_on_an_unpullable_image_stays_pending(core: client.CoreV1Api, namespace: str) -> None:
    """ErrImagePull, then ImagePullBackOff; never Running, never Ready; the other container runs."""
    body = pod_body("unpullable")
    body["spec"]["containers"] = [
        {"name": "main", "image": unpullable(IMAGE)},
        {"name": "side", "image": IMAGE},
    ]
    stream = watch.Watch()
    events = stream.stream(
        core.list_namespaced_pod, namespace, field_selector="metadata.name=unpullable", timeout_seconds=60
    )
    core.create_namespaced_pod(namespace, body)
    seen = _waiting_reasons(events, "unpullable", "ImagePullBackOff", stream)
    reasons = [w for _, _, w in seen if w]
    assert reasons[:1] == ["ErrImagePull"] and reasons[-1:] == ["ImagePullBackOff"], f"seen {seen}"
    assert all(phase == "Pending" and ready != "True" for phase, ready, _ in seen), f"seen {seen}"
    pod = holds_for(
        "Pending and not Ready",
        lambda: core.read_namespaced_pod("unpullable", namespace),
        lambda p: p.status.phase == "Pending" and condition(p, "Ready") == "False",
        seconds=3,
    )
    main, side = pod.status.container_statuses
    assert (main.image, main.ready, main.restart_count) == (unpullable(IMAGE), False, 0)
    assert side.state.running is not None and side.ready is True
    assert pod.status.pod_ip, "the sandbox is up: the Pod has its IP while it waits"


def test_an_in_place_patch_to_an_unpullable_image_fails_the_pull(core: client.CoreV1Api, namespace: str) -> None:
    """As a kubelet after killing the container: waiting on the pull, NotReady, phase still Running,
    the status naming the exited container's image; patching the image back restarts it."""
    pod = ready_pod(core, namespace, "repull")
    stream = watch.Watch()
    events = stream.stream(
        core.list_namespaced_pod,
        namespace,
        field_selector="metadata.name=repull",
        resource_version=pod.metadata.resource_version,
        timeout_seconds=60,
    )
    core.patch_namespaced_pod(
        "repull", namespace, {"spec": {"containers": [{"name": "main", "image": unpullable(IMAGE)}]}}
    )
    seen = _waiting_reasons(events, "repull", "ImagePullBackOff", stream)
    reasons = [w for _, _, w in seen if w]
    assert reasons[:1] == ["ErrImagePull"] and reasons[-1:] == ["ImagePullBackOff"], f"seen {seen}"
    pod = holds_for(
        "Running, NotReady, waiting on the pull",
        lambda: core.read_namespaced_pod("repull", namespace),
        lambda p: p.status.phase == "Running" and condition(p, "Ready") == "False",
        seconds=3,
    )
    main = pod.status.container_statuses[0]
    assert (main.image, main.ready, main.restart_count) == (IMAGE, False, 0)
    assert main.state.waiting.reason in PULL_FAILURE_REASONS
    assert main.last_state.terminated is not None
    core.patch_namespaced_pod("repull", namespace, {"spec": {"containers": [{"name": "main", "image": IMAGE}]}})
    pod = _ready_condition(core, namespace, "repull", "True")
    main = pod.status.container_statuses[0]
    assert (main.image, main.restart_count) == (IMAGE, 1) and main.state.running is not None


class _DenyForbidden(http.server.BaseHTTPRequestHandler):
    """A validating webhook that denies objects named "forbidden"."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        allowed = request["name"] != "forbidden"
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": request["uid"],
                "allowed": allowed,
                "status": {"code": 403, "message": "metadata.name: 'forbidden' is reserved by the test webhook"},
            },
        }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_validating_webhook_served_on_loopback_is_called(
    api_client: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path / "webhook-pki")
    pair = ca.issue("webhook", common_name="test-webhook", hosts=("127.0.0.1",), server=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DenyForbidden)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pair.cert), str(pair.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"deny-forbidden-{namespace}"
    try:
        admission.create_validating_webhook_configuration(
            {
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "deny.conformance.kthena.io",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{server.server_address[1]}/validate",
                            "caBundle": base64.b64encode(ca.cert_pem).decode(),
                        },
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["configmaps"],
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                        "timeoutSeconds": 5,
                    }
                ],
            }
        )

        def try_forbidden() -> int:
            try:
                core.create_namespaced_config_map(namespace, {"metadata": {"name": "forbidden"}})
            except ApiException as exc:
                return int(exc.status)
            core.delete_namespaced_config_map("forbidden", namespace)
            return 201

        # The apiserver picks up a new webhook configuration asynchronously.
        assert wait_for("the webhook to deny", try_forbidden, until=lambda s: s == 403) == 403
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "allowed"}})
    finally:
        admission.delete_validating_webhook_configuration(name)
        server.shutdown()
        server.server_close()


def test_rbac_governs_service_account_tokens(
    api_client: Any, core: client.CoreV1Api, namespace: str, cluster: ClusterInfo
) -> None:
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    token = core.create_namespaced_service_account_token(
        "reader", namespace, {"spec": {"audiences": [], "expirationSeconds": 600}}
    ).status.token
    config = client.Configuration()
    config.host = api_client.configuration.host
    config.ssl_ca_cert = api_client.configuration.ssl_ca_cert
    config.api_key = {"authorization": f"Bearer {token}"}
    as_reader = client.CoreV1Api(client.ApiClient(config))
    with pytest.raises(ApiException) as err:
        as_reader.list_namespaced_pod(namespace)
    assert err.value.status == 403
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        {"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "reader-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )
    assert (
        wait_for(
            "the binding to take effect", lambda: as_reader.list_namespaced_pod(namespace).items, until=lambda _: True
        )
        == []
    )
