"""Install a generated CRD on the shared test cluster, once per run, and wait until it is Established.

Used by the tests that judge the reference's generated CRDs with the real kube-apiserver
(``test_crd.py``, ``test_autoscaling_crd.py``): one xdist worker at a time (a file lock), an older
run's or cluster's CRD of the same name replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.framework.waits import wait_for


def install_crd(api_client: Any, body: dict[str, Any], lock: Path) -> None:
    from filelock import FileLock

    ext = client.ApiextensionsV1Api(api_client)
    name = body["metadata"]["name"]
    with FileLock(str(lock)):
        try:
            ext.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise

            def replace() -> object:  # its status moves under us: retry on a conflict
                current = ext.read_custom_resource_definition(name)
                body["metadata"]["resourceVersion"] = current.metadata.resource_version
                return ext.replace_custom_resource_definition(name, body)

            wait_for(f"CRD {name} replaced", replace)

    def established() -> bool:
        got = ext.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in got.status.conditions or [])

    wait_for(f"CRD {name} Established", established)
