"""Kthena ModelServing conformance: the cluster harness and the suite that judges implementations.

``conformance.cluster`` provisions clusters (embedded, kind, existing); the suite itself talks
to a cluster only, never to the reference controller's internals, so it judges any implementation
the same way.
"""

__version__ = "0.1.0"
