"""kwok acts only on the Pod a stage was computed for, as a kubelet does (pure data).

Why this module exists: kwok plays a stage on the Pod object it saw, but patches and deletes by
*name*, without the Pod's UID as a precondition (``pkg/kwok/controllers/pod_controller.go``,
v0.8.0: ``Pods(ns).Delete(name, grace 0)`` and ``Patch(name, ...)``), and its event queue can lag
behind the API server. When a controller rebuilds a Pod under the same name (every ModelServing
recovery does), a stage computed for the old Pod can land on the new one: the new Pod deleted at
once, or marked Failed. A kubelet never does that (it deletes with ``Preconditions.UID``, and its
status updates are for the Pod UID it runs), so the controller under test would be blamed for a
second rebuild the cluster caused. CI saw exactly that once: a Pod rebuilt by the reference after
a SIGKILL was deleted again within the same trial.

The guard is a ValidatingAdmissionPolicy matching kwok's user only, installed before kwok starts:
kwok may delete a Pod only once the Pod is terminating (its deletion was asked for: the only stage
that deletes, ``pod-delete``, selects on ``deletionTimestamp``), and may move a Pod to phase Failed
only while the Pod carries the fault annotation asking for it (``kthena-pod-fail``). A stale
request is refused with 403, which kwok does not retry. Everything else kwok does is unchanged.
"""

from __future__ import annotations

from typing import Any

from ..faults import FAULT_ANNOTATION, Fault

KWOK_USER = "kwok-controller"  # the common name of kwok's client certificate (supervisor.py)
POLICY_NAME = "kthena-conformance-kwok-stale-stages"

_DELETES_TERMINATING_ONLY = "request.operation != 'DELETE' || has(oldObject.metadata.deletionTimestamp)"
_FAILS_ANNOTATED_ONLY = (
    "request.operation != 'UPDATE'"
    " || !(has(object.status) && has(object.status.phase) && object.status.phase == 'Failed')"
    " || (has(oldObject.status) && has(oldObject.status.phase) && oldObject.status.phase == 'Failed')"
    " || (has(oldObject.metadata.annotations)"
    f" && oldObject.metadata.annotations[?'{FAULT_ANNOTATION}'].orValue('') == '{Fault.FAIL.value}')"
)


def guard_objects() -> tuple[tuple[str, dict[str, Any]], ...]:
    """The (collection path, object) pairs to create, the policy before its binding."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE", "DELETE"],
                        "resources": ["pods", "pods/status"],
                    }
                ]
            },
            "matchConditions": [{"name": "kwok", "expression": f"request.userInfo.username == '{KWOK_USER}'"}],
            "validations": [
                {
                    "expression": _DELETES_TERMINATING_ONLY,
                    "reason": "Forbidden",
                    "message": "kwok deletes a Pod only once it is terminating (a stale stage for an "
                    "earlier Pod of the same name must not delete this one)",
                },
                {
                    "expression": _FAILS_ANNOTATED_ONLY,
                    "reason": "Forbidden",
                    "message": f"kwok fails a Pod only when its {FAULT_ANNOTATION} annotation asks for it "
                    "(a stale stage for an earlier Pod of the same name must not fail this one)",
                },
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    base = "/apis/admissionregistration.k8s.io/v1"
    return (
        (f"{base}/validatingadmissionpolicies", policy),
        (f"{base}/validatingadmissionpolicybindings", binding),
    )
