"""A cluster's declared capabilities (conformance.cluster.declared) and the webhook configuration
an implementer registers (conformance.run.webhooks): pure, table-driven, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.cluster.declared import Declared, RealNodes, parse, record
from conformance.cluster.faults import Fault
from conformance.run.webhooks import PLACEHOLDER_CA_BUNDLE, WebhookInputError, check_url, configuration


@pytest.mark.parametrize(
    "declared",
    [
        Declared(frozenset(Fault), "127.0.0.1:5353", "local provider, cluster 'a'"),
        Declared(frozenset({Fault.RESTART}), None, "someone"),
        Declared(frozenset(), None, "someone"),
        Declared(frozenset(), None, "x", RealNodes({"node-kind": "real", "zone": "a"}, {"v1": "w:v1", "v2": "w:v2"})),
        Declared(frozenset(), None, "kind: every node", RealNodes({}, {"v1": "busybox:1.36"})),
        Declared(
            frozenset(),
            None,
            "tainted",
            RealNodes({"k": "v"}, {"v1": "i"}, ({"key": "real", "operator": "Exists", "effect": "NoSchedule"},)),
        ),
    ],
)
def test_a_declaration_reads_back_as_written(declared: Declared) -> None:
    assert parse(record(declared)["data"]) == declared


@pytest.mark.parametrize(
    ("data", "faults", "dns"),
    [
        (None, None, None),  # no ConfigMap data: nothing declared
        ({}, None, None),
        ({"faults": "restart,levitate", "madeBy": "x"}, {Fault.RESTART}, None),  # unknown kinds are ignored
        ({"faults": "", "dns": "10.0.0.10:53"}, set(), "10.0.0.10:53"),
    ],
)
def test_a_declaration_is_parsed_leniently(
    data: dict[str, str] | None, faults: set[Fault] | None, dns: str | None
) -> None:
    found = parse(data)
    if faults is None:
        assert found is None
    else:
        assert found is not None and found.faults == faults and found.dns == dns


def test_the_webhook_configuration_validates_modelservings_and_optionally_evictions() -> None:
    only = configuration("mine", "https://127.0.0.1:9443/validate", "Q0E=")
    assert [w["rules"][0]["resources"] for w in only["webhooks"]] == [["modelservings"]]
    assert only["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9443/validate", "caBundle": "Q0E="}
    both = configuration("mine", "https://h/v", "Q0E=", eviction_url="https://h/e")
    assert [w["rules"][0]["resources"] for w in both["webhooks"]] == [["modelservings"], ["pods/eviction"]]
    assert all(w["failurePolicy"] == "Fail" for w in both["webhooks"])


@pytest.mark.parametrize("url", ["http://127.0.0.1:9443/v", "127.0.0.1:9443", "https://"])
def test_a_webhook_url_the_api_server_cannot_call_is_refused_by_name(url: str) -> None:
    with pytest.raises(WebhookInputError, match=r"--url: .*https://"):
        check_url("--url", url)


def test_register_without_a_ca_refuses_to_apply() -> None:
    result = CliRunner().invoke(main, ["webhook", "register", "--url", "https://127.0.0.1:1/v"])
    assert result.exit_code == 2 and "--ca-file: needed" in result.output and "Traceback" not in result.output


def test_register_print_with_an_autoscaling_url_adds_the_autoscalingpolicy_webhook() -> None:
    result = CliRunner().invoke(
        main,
        ["webhook", "register", "--print", "--webhook-name", "mine", "--url", "https://127.0.0.1:1/v",
         "--autoscaling-url", "https://127.0.0.1:1/a", "--eviction-url", "https://127.0.0.1:1/e"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.output)
    assert body == configuration(
        "mine", "https://127.0.0.1:1/v", PLACEHOLDER_CA_BUNDLE, "https://127.0.0.1:1/e",
        autoscaling_url="https://127.0.0.1:1/a",
    )  # fmt: skip
    hooks = {w["rules"][0]["resources"][0]: w for w in body["webhooks"]}
    assert sorted(hooks) == ["autoscalingpolicies", "modelservings", "pods/eviction"]
    assert hooks["autoscalingpolicies"]["clientConfig"]["url"] == "https://127.0.0.1:1/a"
    assert hooks["autoscalingpolicies"]["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    without = CliRunner().invoke(main, ["webhook", "register", "--print", "--url", "https://127.0.0.1:1/v"])
    assert without.exit_code == 0, without.output
    assert "autoscalingpolicies" not in without.output


def test_register_refuses_an_autoscaling_url_the_api_server_cannot_call_by_name() -> None:
    result = CliRunner().invoke(
        main,
        ["webhook", "register", "--print", "--url", "https://127.0.0.1:1/v",
         "--autoscaling-url", "http://127.0.0.1:1/a"],
    )  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--autoscaling-url: 'http://127.0.0.1:1/a' is not an https:// URL" in result.output


def test_serve_cert_writes_a_ca_and_a_serving_pair_and_no_ca_key(tmp_path: Path) -> None:

    where = tmp_path / "certs"
    result = CliRunner().invoke(main, ["webhook", "serve-cert", "--dir", str(where)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in where.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    again = CliRunner().invoke(main, ["webhook", "serve-cert", "--dir", str(where)])
    assert again.exit_code == 2 and "already holds" in again.output


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({"realNodes": "yes"}, None, id="not-a-mapping"),
        pytest.param({"realNodes": {"selector": {"a": "b"}, "images": {}}}, None, id="no-image"),
        pytest.param({"realNodes": {"selector": ["a"], "images": {"v1": "i"}}}, None, id="bad-selector"),
        pytest.param({"realNodes": {"images": {"v1": "i"}}}, RealNodes({}, {"v1": "i"}), id="every-node"),
        pytest.param(
            {"realNodes": RealNodes({"k": "v"}, {"v1": "i", "v2": "j"}).as_details()},
            RealNodes({"k": "v"}, {"v1": "i", "v2": "j"}),
            id="round-trip",
        ),
    ],
)
def test_real_nodes_are_read_from_cluster_details(details: dict[str, object], expected: RealNodes | None) -> None:
    assert RealNodes.from_details(details) == expected


def test_real_nodes_without_a_v1_image_are_not_declared() -> None:
    found = parse({"faults": "", "realNodes.selector": "a=b", "realNodes.images": "v2=x"})
    assert found is not None and found.real_nodes is None


def test_register_print_adds_modelbooster_and_a_mutating_configuration() -> None:
    """Issue 31: ModelBooster validation and a mutating webhook where the implementation declares one."""
    result = CliRunner().invoke(
        main,
        ["webhook", "register", "--print", "--webhook-name", "mine", "--url", "https://127.0.0.1:1/v",
         "--modelbooster-url", "https://127.0.0.1:1/mb", "--mutating-url", "https://127.0.0.1:1/m",
         "--mutating-modelbooster-url", "https://127.0.0.1:1/mbm"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    validating, mutating = yaml.safe_load_all(result.output)
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    assert {w["rules"][0]["resources"][0]: w["clientConfig"]["url"] for w in validating["webhooks"]} == {
        "modelservings": "https://127.0.0.1:1/v",
        "modelboosters": "https://127.0.0.1:1/mb",
    }
    assert mutating["kind"] == "MutatingWebhookConfiguration" and mutating["metadata"]["name"] == "mine"
    assert {w["rules"][0]["resources"][0]: w["clientConfig"]["url"] for w in mutating["webhooks"]} == {
        "modelservings": "https://127.0.0.1:1/m",
        "modelboosters": "https://127.0.0.1:1/mbm",
    }
    assert all(w["failurePolicy"] == "Fail" for w in mutating["webhooks"])
    bad = CliRunner().invoke(main, ["webhook", "register", "--print", "--url", "https://h/v", "--mutating-url", "h"])
    assert bad.exit_code == 2 and "--mutating-url: 'h' is not an https:// URL" in bad.output
