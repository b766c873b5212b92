"""Test namespaces: one fresh namespace per test, labelled with the run, removed in order.

Every namespace the suite makes carries ``conformance.kthena.io/suite=true`` and the run id, so
leftovers of an interrupted run (Ctrl-C, a killed worker, ``--keep``) are found and removed by
:func:`sweep` (``kthena-conformance sweep``). Cleanup deletes the test's ModelServings first, in
reverse creation order, waits for their Pods to go, then deletes the namespace and waits for it:
a cleanup that does not finish is an error of the test, never a pass.
"""

from __future__ import annotations

import functools
import secrets
import time
from dataclasses import dataclass
from typing import Any

from .outcomes import Inconclusive
from .waits import WaitTimeout, wait_for

SUITE_LABEL = "conformance.kthena.io/suite"
RUN_LABEL = "conformance.kthena.io/run-id"
BEHAVIOUR_LABEL = "conformance.kthena.io/behaviour"


def _label_value(text: str) -> str:
    value = "".join(c if c.isalnum() or c in "-_." else "." for c in text)[:63]
    return value.strip("-_.") or "x"


@dataclass
class TestNamespace:
    name: str
    run_id: str


def create(kube: Any, run_id: str, behaviour_id: str, *, timeout: float) -> TestNamespace:
    from kubernetes import client

    name = f"kc-{secrets.token_hex(4)}"
    labels = {SUITE_LABEL: "true", RUN_LABEL: run_id, BEHAVIOUR_LABEL: _label_value(behaviour_id)}
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    try:  # Pods cannot be created before the namespace's default ServiceAccount exists
        wait_for(
            f"ServiceAccount {name}/default",
            lambda: kube.core.read_namespaced_service_account("default", name),
            timeout=timeout,
        )
    except WaitTimeout as exc:
        raise Inconclusive(f"test namespace not usable: {exc}") from exc
    return TestNamespace(name, run_id)


def cleanup(kube: Any, ns: TestNamespace, modelservings: list[str], *, timeout: float) -> None:
    """Reverse-order deletion: the test's ModelServings, then (once they and every Pod are
    gone) the namespace. Raises :class:`Inconclusive` when it does not finish in time.

    The namespace's own removal (the namespace controller's sweep, ~5 s even when empty) is not
    waited for here: the runner waits for all of the run's namespaces at the end, so a test pays
    only for what it made."""
    from kubernetes.client.exceptions import ApiException

    from .modelserving import GROUP, PLURAL, VERSION

    deadline = time.monotonic() + timeout
    try:
        for name in reversed(modelservings):
            try:
                kube.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, ns.name, PLURAL, name, propagation_policy="Background"
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise

            def read(name: str = name) -> Any:
                return kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns.name, PLURAL, name)

            wait_for(
                f"ModelServing {ns.name}/{name} to be gone",
                functools.partial(_gone, read),
                timeout=max(1.0, deadline - time.monotonic()),
                interval=0.2,
            )
        wait_for(
            f"Pods of {ns.name} to be gone",
            lambda: kube.core.list_namespaced_pod(ns.name).items,
            until=lambda items: not items,
            timeout=max(1.0, deadline - time.monotonic()),
            interval=0.2,
        )
        delete_namespace(kube, ns.name)
    except (WaitTimeout, ApiException) as exc:
        raise Inconclusive(f"cleanup of {ns.name} did not finish: {exc}") from exc


def _gone(read: Any) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def delete_namespace(kube: Any, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        kube.core.delete_namespace(name, propagation_policy="Background")
    except ApiException as exc:
        if exc.status != 404:
            raise


def _exists(kube: Any, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        kube.core.read_namespace(name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def cluster_scoped_labels(run_id: str) -> dict[str, str]:
    """Labels for a cluster-scoped object a test creates (the sweeper finds it by them)."""
    return {SUITE_LABEL: "true", RUN_LABEL: run_id}


def _sweep_cluster_scoped(kube: Any, run_id: str | None) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    selector = f"{SUITE_LABEL}=true" + (f",{RUN_LABEL}={run_id}" if run_id else "")
    node = client.NodeV1Api(kube.api)
    items: list[Any] = node.list_runtime_class(label_selector=selector).items
    for rc in items:
        try:
            node.delete_runtime_class(str(rc.metadata.name))
        except ApiException as exc:
            if exc.status != 404:
                raise
    # ValidatingAdmissionPolicies (and their bindings) a test made to refuse a request on purpose.
    admission = client.AdmissionregistrationV1Api(kube.api)
    for kind in ("validating_admission_policy_binding", "validating_admission_policy"):
        try:
            found: list[Any] = getattr(admission, f"list_{kind}")(label_selector=selector).items
        except ApiException as exc:
            if exc.status in (403, 404):  # not served by this cluster, or not ours to see
                continue
            raise
        for obj in found:
            try:
                getattr(admission, f"delete_{kind}")(str(obj.metadata.name))
            except ApiException as exc:
                if exc.status != 404:
                    raise


def leftovers(kube: Any, run_id: str | None = None) -> list[str]:
    selector = f"{SUITE_LABEL}=true" + (f",{RUN_LABEL}={run_id}" if run_id else "")
    return sorted(n.metadata.name for n in kube.core.list_namespace(label_selector=selector).items)


def sweep(kube: Any, run_id: str | None = None, *, wait: float = 0.0) -> list[str]:
    """Delete the suite's namespaces (of one run, or all) and the cluster-scoped objects tests
    label as theirs (RuntimeClasses, ValidatingAdmissionPolicies and their bindings); returns the
    namespaces' names."""
    names = leftovers(kube, run_id)
    for name in names:
        delete_namespace(kube, name)
    _sweep_cluster_scoped(kube, run_id)
    if wait > 0 and names:
        wait_for(
            f"{len(names)} swept namespaces to be deleted",
            lambda: [n for n in names if _exists(kube, n)],
            until=lambda remaining: not remaining,
            timeout=wait,
            interval=0.5,
        )
    return names
