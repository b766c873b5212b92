"""Cluster providers: one interface (:class:`Provider`) for the embedded cluster, kind and any
existing kubeconfig, plus fault injection and the binary cache behind the embedded one."""

from .errors import HarnessError, UnsupportedOperation
from .faults import Fault
from .provider import ClusterInfo, Provider
from .spec import ClusterSpec, NodePool, Taint

__all__ = [
    "ClusterInfo",
    "ClusterSpec",
    "Fault",
    "HarnessError",
    "NodePool",
    "Provider",
    "Taint",
    "UnsupportedOperation",
]
