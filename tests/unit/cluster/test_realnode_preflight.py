"""Real-node preflight: each missing piece of a made-up host maps to its requirement and its fix
(the Debian package, the modprobe, the cgroup mount), the summary line, the host parsers (mountinfo
cgroups, modules, filesystems, static ELF), and subnet conflicts in ``ip -4 route`` output."""

from __future__ import annotations

import dataclasses
import os
import socket
import struct
import sys
from typing import Any

import pytest

from conformance.cluster.errors import HarnessError
from conformance.cluster.realnode.preflight import (
    APT_PACKAGES,
    HostFacts,
    Requirement,
    elf_is_static,
    evaluate,
    gather_facts,
    parse_cgroup_v1_controllers,
    parse_filesystems,
    parse_proc_modules,
    port_free,
    subnet_conflicts,
    summary,
    usable,
)

GOOD = HostFacts(
    euid=0,
    cgroup_v2=False,
    cgroup_v1_controllers=frozenset({"cpu", "cpuacct", "memory", "pids", "devices", "blkio", "rw"}),
    modules=frozenset({"bridge", "overlay", "nf_conntrack"}),
    filesystems=frozenset({"ext4", "overlay", "cgroup"}),
    bridge_nf_sysctl=True,
    executables={
        "runc": "/usr/sbin/runc",
        "iptables": "/usr/sbin/iptables",
        "/usr/lib/cni/bridge": "/usr/lib/cni/bridge",
        "/usr/lib/cni/host-local": "/usr/lib/cni/host-local",
        "/usr/lib/cni/loopback": "/usr/lib/cni/loopback",
        "/usr/lib/cni/portmap": "/usr/lib/cni/portmap",
    },
    busybox_static=True,
)


def _host(**changes: Any) -> HostFacts:
    return dataclasses.replace(GOOD, **changes)


def _without(name: str) -> dict[str, str]:
    return {k: v for k, v in GOOD.executables.items() if k != name}


def test_a_good_host_meets_every_requirement() -> None:
    reqs = evaluate(GOOD)
    assert [r.name for r in reqs] == [
        "root",
        "cgroups",
        "bridge",
        "br_netfilter",
        "overlay",
        "runc",
        "iptables",
        "CNI plugins",
        "busybox-static",
    ]
    assert all(r.ok and not r.fix for r in reqs), [r for r in reqs if not r.ok]
    assert usable(reqs) and summary(reqs) == "real nodes available"
    assert next(r for r in reqs if r.name == "runc").detail == "runc at /usr/sbin/runc"
    assert next(r for r in reqs if r.name == "cgroups").detail == "cgroup v1 (cpu, memory, pids, devices mounted)"


@pytest.mark.parametrize(
    ("facts", "name", "detail", "fix"),
    [
        (_host(euid=1000), "root", "not running as root (euid 1000)", "run as root (sudo -E)"),
        (_host(executables=_without("runc")), "runc", "runc missing", "apt-get install -y runc"),
        (_host(executables=_without("iptables")), "iptables", "iptables missing", "apt-get install -y iptables"),
        (
            _host(executables=_without("/usr/lib/cni/portmap")),
            "CNI plugins",
            "CNI plugins missing in /usr/lib/cni: portmap",
            "apt-get install -y containernetworking-plugins",
        ),
        (
            _host(executables={"runc": "/usr/sbin/runc", "iptables": "/usr/sbin/iptables"}),
            "CNI plugins",
            "CNI plugins missing in /usr/lib/cni: bridge, host-local, loopback, portmap",
            "apt-get install -y containernetworking-plugins",
        ),
        (_host(busybox_static=None), "busybox-static", "/bin/busybox missing", "apt-get install -y busybox-static"),
        (
            _host(busybox_static=False),
            "busybox-static",
            "/bin/busybox is dynamically linked",
            "apt-get install -y busybox-static",
        ),
        (_host(modules=frozenset({"overlay"})), "bridge", "bridge module not loaded", "modprobe bridge"),
        (
            _host(bridge_nf_sysctl=False),
            "br_netfilter",
            "br_netfilter module not loaded",
            "modprobe br_netfilter",
        ),
        (
            _host(modules=frozenset({"bridge"}), filesystems=frozenset({"ext4"})),
            "overlay",
            "overlay filesystem not available",
            "modprobe overlay",
        ),
        (
            _host(cgroup_v1_controllers=frozenset({"cpu", "memory", "name=systemd"})),
            "cgroups",
            "cgroup v1 hierarchies not mounted: pids, devices",
            "mkdir -p /sys/fs/cgroup/pids && mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids && "
            "mkdir -p /sys/fs/cgroup/devices && mount -t cgroup -o devices cgroup /sys/fs/cgroup/devices",
        ),
        (
            _host(cgroup_v1_controllers=frozenset()),
            "cgroups",
            "no cgroup hierarchy mounted",
            "mount -t cgroup2 none /sys/fs/cgroup",
        ),
        (
            _host(cgroup_v2=True, cgroup_v2_controllers=frozenset({"cpuset", "cpu", "io"})),
            "cgroups",
            "cgroup v2 lacks the memory, pids controller(s)",
            "systemd.unified_cgroup_hierarchy=1",
        ),
    ],
)
def test_each_missing_piece_fails_one_requirement_with_its_fix(
    facts: HostFacts, name: str, detail: str, fix: str
) -> None:
    reqs = evaluate(facts)
    failed = [r for r in reqs if not r.ok]
    assert [r.name for r in failed] == [name]
    assert failed[0].detail.startswith(detail) and fix in failed[0].fix
    assert not usable(reqs)
    assert summary(reqs) == f"real nodes unavailable: {failed[0].detail} ({failed[0].fix})"


@pytest.mark.parametrize(
    ("facts", "detail"),
    [
        (
            _host(cgroup_v2=True, cgroup_v2_controllers=frozenset({"cpuset", "cpu", "io", "memory", "pids"})),
            "cgroup v2",
        ),
        # br_netfilter built into the kernel: no module, but its sysctls exist.
        (_host(modules=frozenset({"bridge", "overlay"}), bridge_nf_sysctl=True), "cgroup v1"),
        (_host(modules=frozenset({"bridge", "br_netfilter", "overlay"}), bridge_nf_sysctl=False), "cgroup v1"),
        # overlay as a module without the filesystem registered yet, and built in (filesystem only).
        (_host(filesystems=frozenset()), "cgroup v1"),
        (_host(modules=frozenset({"bridge"})), "cgroup v1"),
    ],
)
def test_equivalent_hosts_are_usable(facts: HostFacts, detail: str) -> None:
    reqs = evaluate(facts)
    assert usable(reqs), summary(reqs)
    assert next(r for r in reqs if r.name == "cgroups").detail.startswith(detail)


def test_every_package_fix_names_a_debian_package_of_the_list() -> None:
    bare = HostFacts(euid=0, cgroup_v2=True, cgroup_v2_controllers=frozenset({"cpu", "memory", "pids"}))
    reqs = evaluate(bare)
    installs = [r.fix.removeprefix("apt-get install -y ") for r in reqs if r.fix.startswith("apt-get")]
    assert sorted(installs) == sorted(APT_PACKAGES)
    line = summary(reqs)
    assert line.startswith("real nodes unavailable: bridge module not loaded (modprobe bridge); ")
    assert "runc missing (apt-get install -y runc); iptables missing (apt-get install -y iptables)" in line
    assert "\n" not in line
    assert summary([Requirement("x", False, "x broken")]) == "real nodes unavailable: x broken"


# This host's /proc/self/mountinfo (cgroup v1 hybrid) and a cgroup v2 one.
MOUNTINFO_V1 = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime shared:5 - cgroup cgroup rw,devices
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
"""
MOUNTINFO_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"


def test_read_only_cgroup_hierarchies_fail_preflight_with_the_fix() -> None:
    reqs = evaluate(_host(cgroup_read_only=("/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids")))
    cgroups = next(r for r in reqs if r.name == "cgroups")
    assert not cgroups.ok and not usable(reqs)
    assert cgroups.detail == "cgroup hierarchies mounted read-only: /sys/fs/cgroup/memory, /sys/fs/cgroup/pids"
    assert cgroups.fix.startswith(
        "mount -o remount,rw /sys/fs/cgroup/memory && mount -o remount,rw /sys/fs/cgroup/pids"
    )


def test_host_parsers() -> None:
    v1 = parse_cgroup_v1_controllers(MOUNTINFO_V1)
    assert {"cpu", "cpuacct", "memory", "devices", "pids"} <= v1
    assert "nsdelegate" not in v1 and "name=systemd" not in v1
    assert parse_cgroup_v1_controllers(MOUNTINFO_V2) == frozenset()
    # A directory named like a hierarchy is not one: only mounts count.
    stray = "31 23 0:28 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n"
    assert parse_cgroup_v1_controllers(stray) == frozenset()
    modules = "br_netfilter 32768 0 - Live 0x0000000000000000\nbridge 311296 1 br_netfilter, Live 0x0\n\n"
    assert parse_proc_modules(modules) == {"br_netfilter", "bridge"}
    assert parse_filesystems("nodev\tsysfs\nnodev\toverlay\n\text4\n") == {"sysfs", "overlay", "ext4"}


def _elf(bits: int, little: bool, program_types: list[int]) -> bytes:
    order = "<" if little else ">"
    if bits == 64:
        header = bytearray(64)
        phoff, phentsize = 64, 56
        struct.pack_into(order + "Q", header, 0x20, phoff)
        struct.pack_into(order + "HH", header, 0x36, phentsize, len(program_types))
    else:
        header = bytearray(52)
        phoff, phentsize = 52, 32
        struct.pack_into(order + "I", header, 0x1C, phoff)
        struct.pack_into(order + "HH", header, 0x2A, phentsize, len(program_types))
    header[:6] = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1 if little else 2])
    for p_type in program_types:
        entry = bytearray(phentsize)
        struct.pack_into(order + "I", entry, 0, p_type)
        header += entry
    return bytes(header)


PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3


@pytest.mark.parametrize(
    ("data", "static"),
    [
        (_elf(64, True, [6, PT_INTERP, PT_LOAD, PT_LOAD, PT_DYNAMIC]), False),
        (_elf(64, True, [PT_LOAD, PT_LOAD]), True),
        (_elf(64, True, [PT_LOAD, PT_DYNAMIC]), True),  # static-pie: no interpreter
        (_elf(32, True, [PT_LOAD]), True),
        (_elf(32, False, [PT_INTERP, PT_LOAD]), False),
        (_elf(64, False, [PT_LOAD]), True),
        (_elf(64, True, [PT_LOAD, PT_INTERP])[:100], False),  # truncated program headers
        (_elf(64, True, []), False),
        (b"#!/bin/sh\necho busybox\n" + bytes(100), False),
        (b"", False),
    ],
)
def test_elf_is_static(data: bytes, static: bool) -> None:
    assert elf_is_static(data) is static


def test_this_python_is_a_dynamic_elf() -> None:
    with open(os.path.realpath(sys.executable), "rb") as f:
        header = f.read(65536)
    assert header[:4] == b"\x7fELF" and not elf_is_static(header), "CPython links the C library dynamically"


ROUTES = """default via 192.0.2.1 dev eth0
10.88.0.0/24 dev kthena0 proto kernel scope link src 10.88.0.1 linkdown
172.17.0.0/16 dev docker0 proto kernel scope link src 172.17.0.1
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
blackhole 10.244.0.0/16 proto bird
unreachable 10.99.0.0/16
198.51.100.7 via 192.0.2.1 dev eth0
"""


@pytest.mark.parametrize(
    ("cidr", "overlapping"),
    [
        ("10.77.0.0/24", []),
        ("10.88.0.0/24", ["10.88.0.0/24"]),
        ("10.88.0.128/25", ["10.88.0.0/24"]),
        ("10.0.0.0/8", ["10.88.0.0/24", "10.244.0.0/16", "10.99.0.0/16"]),
        ("10.244.3.0/24", ["10.244.0.0/16"]),
        ("172.17.5.0/24", ["172.17.0.0/16"]),
        ("198.51.100.0/24", ["198.51.100.7/32"]),
        ("10.88.0.5/24", ["10.88.0.0/24"]),  # host bits allowed: it is the subnet of a gateway address
    ],
)
def test_subnet_conflicts_in_ip_route_output(cidr: str, overlapping: list[str]) -> None:
    found = subnet_conflicts(cidr, ROUTES)
    assert [line.split()[2] for line in found] == overlapping
    assert all(line.startswith(f"{cidr} overlaps ") and "(route: " in line for line in found)
    assert subnet_conflicts(cidr, "") == []


def test_subnet_conflict_line_and_bad_cidr() -> None:
    assert subnet_conflicts("172.17.0.0/24", ROUTES) == [
        "172.17.0.0/24 overlaps 172.17.0.0/16 (route: 172.17.0.0/16 dev docker0 proto kernel scope link src 172.17.0.1)"
    ]
    for bad in ("10.88.0.0/33", "cni0", "fd00::/64"):
        with pytest.raises(HarnessError, match="not an IPv4 CIDR"):
            subnet_conflicts(bad, ROUTES)


def test_port_free_sees_a_listener() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not port_free(port)
        assert not port_free(port, "127.0.0.1")
    assert port_free(port)


def test_gather_facts_reads_this_host() -> None:
    facts = gather_facts()
    assert facts.euid == os.geteuid()
    assert facts.cgroup_v2 or facts.cgroup_v1_controllers
    assert facts.filesystems, "/proc/filesystems is always there"
    reqs = evaluate(facts)
    assert len(reqs) == 9 and summary(reqs).startswith("real nodes ")
