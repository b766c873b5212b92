"""Probes of the faults of helper "pods" (issue 13, second wave): the CRD's embedded PodSpec and a
plugin config error accepted at admission.

Why this module exists: ``test_faults.py`` holds one probe per fault; these two are kept apart so
the table there stays readable. Each row is ``(fault, probe, off, on, overlaps)``: ``overlaps``
names the other faults that break the same observable on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.api.crd import crd

from .fault_cases_plugins import probe_config_error

Row = tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]


def probe_pod_spec_fields() -> dict[str, bool]:
    """Whether the CRD's embedded PodSpec knows the Pod-level resources and a container's restartPolicyRules."""
    version = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    role = version["properties"]["spec"]["properties"]["template"]["properties"]["roles"]["items"]
    pod = role["properties"]["workerTemplate"]["properties"]["spec"]["properties"]
    container = pod["containers"]["items"]["properties"]
    return {"resources": "resources" in pod, "restartPolicyRules": "restartPolicyRules" in container}


CASES: list[Row] = [
    (
        "pod-spec-schema-outdated",
        probe_pod_spec_fields,
        {"resources": True, "restartPolicyRules": True},
        {"resources": False, "restartPolicyRules": False},
        (),
    ),
    # (plugin-config-error-skips-plugin accepts the config too, and then creates the Pods)
    (
        "plugin-config-error-logged-only",
        probe_config_error,
        (["spec.plugins[0].config.env"], "PluginConfigError: spec.plugins[0].config.env"),
        ([], "PluginConfigError: spec.plugins[0].config.env"),
        ("plugin-config-error-skips-plugin",),
    ),
]
