"""The runner address: parsing ``--runner-address``, where a server listens for it, the kind
network's gateway from ``docker network inspect``, and which address a run uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cluster.runner_address import (
    LOOPBACK,
    RunnerAddressError,
    choose,
    docker_network_gateway,
    listen_host,
    local_host,
    parse,
    url_host,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("172.18.0.1", "172.18.0.1"),
        (" 10.0.0.7 ", "10.0.0.7"),
        ("fc00:f853:ccd:e793::1", "fc00:f853:ccd:e793::1"),
        ("[fc00::1]", "fc00::1"),
        ("host.docker.internal", "host.docker.internal"),
        ("Runner.Example.COM", "runner.example.com"),
        ("runner", "runner"),
    ],
)
def test_parse_accepts_a_host(text: str, expected: str) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("http://172.18.0.1", "is a URL"),
        ("172.18.0.1/24", "is a URL"),
        ("runner:9090", "has a port"),
        ("172.18.0.1:9090", "has a port"),
        ("under_score.example", "neither an IP address nor a valid host name"),
        ("-leading.example", "neither an IP address nor a valid host name"),
        ("a" * 64 + ".example", "neither an IP address nor a valid host name"),
    ],
)
def test_parse_refuses_what_is_not_a_host_and_names_the_option(text: str, reason: str) -> None:
    with pytest.raises(RunnerAddressError) as info:
        parse(text)
    assert str(info.value).startswith("--runner-address: ") and reason in str(info.value)


@pytest.mark.parametrize(
    ("address", "listen", "local", "in_url"),
    [
        (LOOPBACK, "127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("172.18.0.1", "172.18.0.1", "172.18.0.1", "172.18.0.1"),
        ("fc00::1", "fc00::1", "fc00::1", "[fc00::1]"),
        ("host.docker.internal", "0.0.0.0", "127.0.0.1", "host.docker.internal"),
    ],
)
def test_where_a_server_listens_and_is_reached(address: str, listen: str, local: str, in_url: str) -> None:
    assert (listen_host(address), local_host(address), url_host(address)) == (listen, local, in_url)


def _network(*gateways: str) -> dict[str, object]:
    return {"Name": "kind", "IPAM": {"Driver": "default", "Config": [{"Subnet": "x", "Gateway": g} for g in gateways]}}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (json.dumps([_network("172.18.0.1")]), "172.18.0.1"),
        (json.dumps([_network("fc00:f853:ccd:e793::1", "172.18.0.1")]), "172.18.0.1"),  # IPv4 first
        (json.dumps([_network("fc00:f853:ccd:e793::1")]), "fc00:f853:ccd:e793::1"),
        (json.dumps(_network("172.19.0.1")), "172.19.0.1"),  # one object, not a list
        (json.dumps([_network("")]), None),
        (json.dumps([_network("not-an-ip", "172.18.0.1")]), "172.18.0.1"),
        (json.dumps([{"Name": "kind", "IPAM": {"Config": None}}]), None),
        (json.dumps([]), None),
        ("[]\n", None),
        ("Error: No such network: kind", None),
        (json.dumps(["nonsense", 3]), None),
    ],
)
def test_docker_network_gateway(output: str, expected: str | None) -> None:
    assert docker_network_gateway(output) == expected


@pytest.mark.parametrize(
    ("option", "details", "expected"),
    [
        (None, {}, (LOOPBACK, "the default (a controller on this machine)")),
        (None, {"runnerAddress": "172.18.0.1"}, ("172.18.0.1", "the cluster's provider")),
        ("10.1.2.3", {"runnerAddress": "172.18.0.1"}, ("10.1.2.3", "--runner-address")),
        ("", {"runnerAddress": ""}, (LOOPBACK, "the default (a controller on this machine)")),
    ],
)
def test_choose(option: str | None, details: dict[str, str], expected: tuple[str, str]) -> None:
    assert choose(option, details) == expected


def test_kind_info_declares_its_network_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.cluster.kind import KindProvider

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kind").write_text('#!/bin/sh\nif [ "$1" = get ]; then echo "apiVersion: v1"; fi\n')
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        '[ "$1 $2 $3" = "network inspect kind" ] || exit 1\n'
        f"echo '{json.dumps([_network('fc00::1', '172.18.0.1')])}'\n"
    )
    for tool in ("kind", "docker"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path / "cache"))  # neither the harness's kind nor its engine
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr("conformance.cluster.kind._KIND", [])
    info = KindProvider(runs=tmp_path / "runs").info("demo")
    assert info.details["runnerAddress"] == "172.18.0.1"
    assert info.as_report()["runnerAddress"] == "172.18.0.1"
    (bin_dir / "docker").write_text("#!/bin/sh\necho 'Error: No such network: kind' >&2\nexit 1\n")
    assert "runnerAddress" not in KindProvider(runs=tmp_path / "runs").info("demo").details
