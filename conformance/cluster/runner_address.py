"""The address at which the cluster's workloads reach the machine running the suite.

Why this module exists: some tests serve something from the runner that the implementation must
reach: the Autoscaling tests' Prometheus server is queried by the implementation's autoscaler.
On the embedded cluster the reference runs on this machine, so 127.0.0.1 works; an autoscaler in a
kind node's container or in an existing cluster's Pod cannot reach the runner's loopback. Each
provider therefore says which address of the runner its workloads reach
(``ClusterInfo.details["runnerAddress"]``): the embedded cluster 127.0.0.1, kind its Docker
network's gateway (``docker network inspect kind``). ``--runner-address`` overrides it (an existing
cluster has no default: its route back to the runner is the user's to know).

A server bound for that address listens on it when it is an IP literal (a Docker bridge gateway is
an address of this host) and on every address when it is a name. Everything here is pure.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

LOOPBACK = "127.0.0.1"
DETAILS_KEY = "runnerAddress"
KIND_NETWORK = "kind"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


class RunnerAddressError(ValueError):
    """A ``--runner-address`` that is not a host (the message names the option and the reason)."""


def parse(text: str) -> str:
    """A host (an IPv4 or IPv6 literal, or a DNS name) from ``--runner-address``; no scheme, port or path."""
    value = text.strip()
    if not value:
        raise RunnerAddressError("--runner-address: empty; give an IP address or a host name the cluster resolves")
    if "://" in value or "/" in value:
        raise RunnerAddressError(f"--runner-address: {text!r} is a URL; give only the host (e.g. 172.18.0.1)")
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if ":" in value:
        raise RunnerAddressError(
            f"--runner-address: {text!r} has a port; give only the host (each server picks its own port)"
        )
    if not _HOSTNAME.match(value):
        raise RunnerAddressError(f"--runner-address: {text!r} is neither an IP address nor a valid host name")
    return value.lower()


def listen_host(address: str) -> str:
    """Where a server advertised at ``address`` listens: the address itself when it is an IP literal,
    every IPv4 address (0.0.0.0) when it is a name (which this host may know under any address)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return "0.0.0.0"


def local_host(address: str) -> str:
    """Where the runner itself reaches a server listening on ``listen_host(address)``."""
    host = listen_host(address)
    return LOOPBACK if host == "0.0.0.0" else host


def url_host(address: str) -> str:
    """``address`` as the host part of a URL (an IPv6 literal in brackets)."""
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


def docker_network_gateway(inspect_output: str) -> str | None:
    """The IPv4 gateway (else the first gateway) of a Docker network from ``docker network inspect``'s
    JSON; None when the output names none or is not that JSON."""
    try:
        data: Any = json.loads(inspect_output)
    except ValueError:
        return None
    networks = data if isinstance(data, list) else [data]
    gateways: list[str] = []
    for network in networks:
        configs = ((network or {}).get("IPAM") or {}).get("Config") or [] if isinstance(network, dict) else []
        for config in configs:
            gateway = config.get("Gateway") if isinstance(config, dict) else None
            if isinstance(gateway, str) and gateway:
                try:
                    gateways.append(str(ipaddress.ip_address(gateway)))
                except ValueError:
                    continue
    ipv4 = [g for g in gateways if ipaddress.ip_address(g).version == 4]
    chosen = ipv4 or gateways
    return chosen[0] if chosen else None


def choose(option: str | None, details: Mapping[str, Any]) -> tuple[str, str]:
    """The runner address and where it came from: ``--runner-address`` when given, else the cluster's
    own (``details["runnerAddress"]``), else the loopback address (a controller on this machine)."""
    if option:
        return parse(option), "--runner-address"
    declared = details.get(DETAILS_KEY)
    if isinstance(declared, str) and declared:
        return parse(declared), "the cluster's provider"
    return LOOPBACK, "the default (a controller on this machine)"
