"""Listening ports are picked below the kernel's ephemeral range, where no outgoing connection
takes them between the pick and the bind."""

from __future__ import annotations

import socket

import pytest

from conformance.cluster.local import processes
from conformance.cluster.local.processes import LISTEN_FLOOR, free_ports, listen_port_range


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32768\t60999\n", range(LISTEN_FLOOR, 32768)),
        ("49152 65535", range(LISTEN_FLOOR, 49152)),
        (f"{LISTEN_FLOOR + 1000}\t60999", range(LISTEN_FLOOR, LISTEN_FLOOR + 1000)),
        (f"{LISTEN_FLOOR + 999}\t60999", None),  # too little room: the kernel picks
        ("1024 65535", None),
        ("", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_listen_port_range(text: str | None, expected: range | None) -> None:
    assert listen_port_range(text) == expected


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
    pool = listen_port_range(processes._ephemeral_text())
    for port in ports:
        if pool is not None:
            assert port in pool
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))


def test_free_ports_fall_back_to_the_kernel_without_a_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "_ephemeral_text", lambda: None)
    assert len(set(free_ports(3))) == 3
