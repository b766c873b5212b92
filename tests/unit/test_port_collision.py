"""A cluster start that lost a picked port to another process is tried again on new ports; any
other failure (a fixed --apiserver-port in use included: new ports would not help) is not."""

from __future__ import annotations

import pytest

from conformance.cluster.local.provider import port_collision


@pytest.mark.parametrize(
    ("message", "retried"),
    [
        (
            "coredns exited with code 1 during start; its last output:\n      Listen: listen tcp 127.0.0.1:57514: "
            "bind: address already in use",
            True,
        ),
        ("etcd exited with code 1 during start; its last output:\n      listen tcp: address already in use", True),
        ("port 6443 (apiserver_port) is already in use on 127.0.0.1", False),
        ("the cluster did not become ready within 90s (waiting for healthy kube-apiserver)", False),
        ("kube-apiserver exited with code 1 during start; its last output:\n      (no output)", False),
    ],
)
def test_only_a_lost_port_is_retried(message: str, retried: bool) -> None:
    assert port_collision(message) is retried
