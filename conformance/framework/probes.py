"""Probes of a cluster's ModelServing admission, shared by the preflight and the harness.

One probe: a dry-run create of a spec the CRD schema accepts but any validating webhook for
ModelServing must reject (``workerReplicas: 1`` without a ``workerTemplate``). Dry-run: nothing is
stored, whatever the answer.
"""

from __future__ import annotations

from typing import Any

PROBE = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "admission-probe"},
    "spec": {
        "template": {
            "roles": [
                {
                    "name": "r",
                    "workerReplicas": 1,
                    "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ]
        }
    },
}


def webhook_answer(api: Any, namespace: str = "default") -> tuple[int | None, str]:
    """(HTTP status of the rejection, or None when the probe was accepted; the answer's body)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom: Any = client.CustomObjectsApi(api)
    try:
        custom.create_namespaced_custom_object(
            "workload.serving.volcano.sh", "v1alpha1", namespace, "modelservings", PROBE, dry_run="All"
        )
    except ApiException as exc:
        return int(exc.status), str(exc.body)
    return None, ""
