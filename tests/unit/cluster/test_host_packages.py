"""The host-package planner: which Debian packages a feature still needs, from dpkg-query output."""

from __future__ import annotations

import pytest

from conformance.cluster.host_packages import FEATURES, missing

WANTED = ("runc", "containernetworking-plugins", "iptables", "busybox-static")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("", list(WANTED)),
        ("runc install ok installed\n", ["containernetworking-plugins", "iptables", "busybox-static"]),
        (
            "runc install ok installed\ncontainernetworking-plugins install ok installed\n"
            "iptables install ok installed\nbusybox-static install ok installed\n",
            [],
        ),
        # removed but configured, half-installed: not installed
        ("runc deinstall ok config-files\niptables install ok half-configured\n", list(WANTED)),
        # an architecture suffix is the same package
        ("busybox-static:amd64 install ok installed\n", ["runc", "containernetworking-plugins", "iptables"]),
        # a package that is not wanted changes nothing
        ("busybox install ok installed\n", list(WANTED)),
    ],
)
def test_missing(status: str, expected: list[str]) -> None:
    assert missing(WANTED, status) == expected


def test_real_nodes_need_what_the_preflight_checks() -> None:
    assert FEATURES["real-nodes"] == WANTED
