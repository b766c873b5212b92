"""Names and labels of everything the controller creates, as upstream Kthena spells them (pure).

ServingGroup ``<ms>-<ordinal>``; role instance ``<role>-<index>``; Pod
``<ms>-<ordinal>-<role>-<index>-<k>`` with k = 0 for the entry Pod and 1..workerReplicas for the
workers; ControllerRevision ``<ms>-<hash>``; PodGroup ``<ms>-<ordinal>``.

Why this module exists: the planner, the plugins, admission and the CRD generation all spell these
names and labels, and the planner reads a Pod's place back from its labels (:func:`parse_pod_labels`);
one module keeps every spelling identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "modelserving.volcano.sh"
LABEL_NAME = f"{PREFIX}/name"
LABEL_GROUP = f"{PREFIX}/group-name"
LABEL_ROLE = f"{PREFIX}/role"
LABEL_ROLE_ID = f"{PREFIX}/role-id"
LABEL_REVISION = f"{PREFIX}/revision"
LABEL_ROLE_TEMPLATE_HASH = f"{PREFIX}/role-template-hash"
LABEL_ENTRY = f"{PREFIX}/entry"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_PODGROUP = "scheduling.k8s.io/group-name"
ANNOTATION_TASK_SPEC = "volcano.sh/task-spec"
ANNOTATION_QUEUE = "scheduling.volcano.sh/queue-name"

CANONICAL_INT = re.compile(r"^(0|[1-9][0-9]*)$", re.ASCII)
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL_MAX = 63


def group_name(ms: str, ordinal: int) -> str:
    return f"{ms}-{ordinal}"


def role_id(role: str, index: int) -> str:
    return f"{role}-{index}"


def pod_name(ms: str, ordinal: int, role: str, index: int, k: int) -> str:
    return f"{ms}-{ordinal}-{role}-{index}-{k}"


def revision_name(ms: str, revision: str) -> str:
    return f"{ms}-{revision}"


@dataclass(frozen=True, order=True)
class PodId:
    """Where a Pod sits: group ordinal, role name, role instance index, member k (0 = entry)."""

    ordinal: int
    role: str
    index: int
    k: int

    @property
    def role_id(self) -> str:
        return role_id(self.role, self.index)

    @property
    def is_entry(self) -> bool:
        return self.k == 0


def parse_pod_labels(labels: dict[str, str], ms: str, pod: str) -> PodId | None:
    """The :class:`PodId` of a Pod this controller made for ``ms``, from its labels and name.

    None when the Pod does not carry our labels or its name does not match them (never adopt
    something we did not make).
    """
    if labels.get(LABEL_NAME) != ms:
        return None
    group, role, rid = labels.get(LABEL_GROUP, ""), labels.get(LABEL_ROLE, ""), labels.get(LABEL_ROLE_ID, "")
    prefix = f"{ms}-"
    if not group.startswith(prefix) or not rid.startswith(f"{role}-"):
        return None
    parts = (group[len(prefix) :], rid[len(role) + 1 :], pod.rsplit("-", 1)[-1])
    if not all(CANONICAL_INT.match(p) for p in parts):
        return None  # "00", "+0", "1_0" parse as integers but are not the names we write
    ordinal, index, k = (int(p) for p in parts)
    if pod != pod_name(ms, ordinal, role, index, k) or ordinal < 0 or index < 0 or k < 0:
        return None
    return PodId(ordinal, role, index, k)


def generated_name_problem(ms: str, replicas: int, role: str, role_replicas: int, worker_replicas: int) -> str | None:
    """Why the longest generated name would be invalid, if it would (upstream's webhook check).

    Upstream checks ``<ms>-<replicas>-<role>-<roleReplicas>-<workerReplicas>`` as a DNS-1035 label:
    the longest Pod name has that shape.
    """
    longest = f"{ms}-{replicas}-{role}-{role_replicas}-{worker_replicas}"
    if len(longest) > DNS1123_LABEL_MAX:
        return f"generated names such as {longest!r} would exceed {DNS1123_LABEL_MAX} characters"
    if not DNS1035.match(longest):
        return (
            f"generated names such as {longest!r} would not be valid DNS-1035 labels (lowercase letters, digits, '-')"
        )
    return None
