"""The harness-run Prometheus without Go: its configuration and targets as data, the settable metrics
endpoint over real loopback HTTP, and the server's lifecycle (ready, failed starts, stop, leftovers)
with a small Python stand-in for the ``prometheus`` binary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conformance.cluster.errors import HarnessError
from conformance.cluster.local import prometheus as harness
from conformance.cluster.local.processes import pid_alive, spawn
from conformance.cluster.local.prometheus import (
    DIR_PREFIX,
    OWNER_FILE,
    MetricsEndpoint,
    Prometheus,
    ScrapeTarget,
    prometheus_config,
    prometheus_with_endpoint,
    sweep_stale_dirs,
    target_groups,
)

# -- configuration (pure) -------------------------------------------------------------------------


def test_config_scrapes_the_targets_file_every_second() -> None:
    config = prometheus_config(Path("/run/p/targets.json"))
    assert config["global"] == {
        "scrape_interval": "1000ms",
        "scrape_timeout": "1000ms",
        "evaluation_interval": "1000ms",
    }
    (job,) = config["scrape_configs"]
    assert job == {
        "job_name": "kthena",
        "metrics_path": "/metrics",
        "file_sd_configs": [{"files": ["/run/p/targets.json"], "refresh_interval": "1000ms"}],
    }


def test_config_options() -> None:
    config = prometheus_config(
        Path("/t.json"), job="pods", metrics_path="/m", scrape_interval=0.5, evaluation_interval=2
    )
    assert config["global"]["scrape_interval"] == "500ms"
    assert config["global"]["evaluation_interval"] == "2000ms"
    assert config["scrape_configs"][0]["job_name"] == "pods"
    assert config["scrape_configs"][0]["metrics_path"] == "/m"


def test_config_rejects_a_zero_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        prometheus_config(Path("/t.json"), scrape_interval=0)


def test_target_groups() -> None:
    groups = target_groups(["127.0.0.1:1", ScrapeTarget("127.0.0.1:2", {"pod": "web-0"})])
    assert groups == [
        {"targets": ["127.0.0.1:1"], "labels": {}},
        {"targets": ["127.0.0.1:2"], "labels": {"pod": "web-0"}},
    ]


@pytest.mark.parametrize("label", ["0pod", "a-b", "__name__", ""])
def test_target_groups_reject_invalid_label_names(label: str) -> None:
    with pytest.raises(ValueError, match="not a valid label name"):
        target_groups([ScrapeTarget("127.0.0.1:2", {label: "x"})])


# -- the metrics endpoint -------------------------------------------------------------------------


def _scrape(endpoint: MetricsEndpoint) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(endpoint.url, timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_endpoint_serves_what_the_test_sets() -> None:
    with MetricsEndpoint() as endpoint:
        assert endpoint.address == f"127.0.0.1:{endpoint.port}"
        assert _scrape(endpoint) == {}
        endpoint.set("load", 42)
        endpoint.set("queue_depth", 3, {"pod": "a"})
        endpoint.set("queue_depth", 5.5, {"pod": "b"})
        assert _scrape(endpoint) == {
            ("load", ()): 42.0,
            ("queue_depth", (("pod", "a"),)): 3.0,
            ("queue_depth", (("pod", "b"),)): 5.5,
        }
        endpoint.set("load", 7)
        endpoint.remove("queue_depth", {"pod": "a"})
        assert endpoint.get("load") == 7.0
        assert endpoint.get("queue_depth", {"pod": "a"}) is None
        assert _scrape(endpoint) == {("load", ()): 7.0, ("queue_depth", (("pod", "b"),)): 5.5}
        endpoint.clear()
        assert _scrape(endpoint) == {}
        assert endpoint.scrapes == 4
        port = endpoint.port
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_endpoint_serves_the_gauge_type() -> None:
    with MetricsEndpoint() as endpoint:
        endpoint.set("load", 1)
        with urllib.request.urlopen(endpoint.url, timeout=5) as resp:
            assert "# TYPE load gauge" in resp.read().decode()


@pytest.mark.parametrize("name", ["1load", "lo-ad", ""])
def test_endpoint_rejects_invalid_metric_names(name: str) -> None:
    endpoint = MetricsEndpoint()
    with pytest.raises(ValueError, match="not a valid metric name"):
        endpoint.set(name, 1)


def test_endpoint_address_before_start() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = MetricsEndpoint().address


# -- the server's lifecycle, with a stand-in binary ------------------------------------------------

FAKE = """#!{python}
# A stand-in for prometheus: records its arguments, then behaves as FAKE_PROMETHEUS says.
import http.server, json, os, sys, time, urllib.parse
flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
with open(os.environ["FAKE_PROMETHEUS_RECORD"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
mode = os.environ.get("FAKE_PROMETHEUS", "serve")
if mode == "exit":
    print("level=ERROR msg=boom: the configuration is broken", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(60)
marker = os.environ.get("FAKE_PROMETHEUS_BUSY_ONCE")
if marker and not os.path.exists(marker):
    open(marker, "w").close()
    print("listen tcp 127.0.0.1:1: bind: address already in use", flush=True)
    sys.exit(1)
host, port = flags["web.listen-address"].rsplit(":", 1)

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        if url.path == "/-/ready":
            self.reply(200, {{}})
        elif url.path == "/api/v1/query" and query == "bad(":
            self.reply(400, {{"status": "error", "errorType": "bad_data", "error": "parse error"}})
        elif url.path == "/api/v1/query" and query == "scalar(1)":
            self.reply(200, {{"status": "success", "data": {{"resultType": "scalar", "result": [0, "1"]}}}})
        elif url.path == "/api/v1/query":
            n = {{"empty": 0, "many": 2}}.get(query, 1)
            result = [{{"metric": {{"i": str(i)}}, "value": [0, "42"]}} for i in range(n)]
            self.reply(200, {{"status": "success", "data": {{"resultType": "vector", "result": result}}}})
        else:
            self.reply(404, {{"status": "error", "error": "not found"}})

print("level=INFO msg=ready", flush=True)
http.server.HTTPServer((host, int(port)), Handler).serve_forever()
"""


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "prometheus"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("FAKE_PROMETHEUS_RECORD", str(tmp_path / "argv.jsonl"))
    return path


def _argvs(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]


def test_start_query_and_stop(tmp_path: Path, fake_binary: Path) -> None:
    runs = tmp_path / "runs"
    prometheus = Prometheus(fake_binary, ["127.0.0.1:9", ScrapeTarget("127.0.0.1:10", {"pod": "p"})], parent_dir=runs)
    with prometheus:
        directory, pid = prometheus.directory, prometheus.pid
        assert directory is not None and directory.parent == runs and directory.name.startswith(DIR_PREFIX)
        assert pid is not None and prometheus.running()
        assert prometheus.url == f"http://127.0.0.1:{prometheus.port}"
        assert prometheus.ready_seconds is not None
        (argv,) = _argvs(tmp_path)
        assert f"--storage.tsdb.path={directory / 'data'}" in argv
        assert f"--web.listen-address=127.0.0.1:{prometheus.port}" in argv
        config = yaml.safe_load((directory / "prometheus.yml").read_text())
        assert f"--config.file={directory / 'prometheus.yml'}" in argv
        assert config == prometheus_config(directory / "targets.json")
        assert json.loads((directory / "targets.json").read_text()) == [
            {"targets": ["127.0.0.1:9"], "labels": {}},
            {"targets": ["127.0.0.1:10"], "labels": {"pod": "p"}},
        ]
        assert (directory / OWNER_FILE).read_text().strip() == str(os.getpid())
        prometheus.set_targets(["127.0.0.1:11"])
        assert json.loads((directory / "targets.json").read_text()) == [{"targets": ["127.0.0.1:11"], "labels": {}}]
        assert prometheus.targets == ["127.0.0.1:11"]
        assert prometheus.query_value("load") == 42.0
        assert prometheus.query_value("empty") is None
        assert prometheus.query("many") == [
            {"metric": {"i": "0"}, "value": [0, "42"]},
            {"metric": {"i": "1"}, "value": [0, "42"]},
        ]
        with pytest.raises(HarnessError, match="has 2 series"):
            prometheus.query_value("many")
        with pytest.raises(HarnessError, match="parse error"):
            prometheus.query("bad(")
        with pytest.raises(HarnessError, match="not an instant vector query"):
            prometheus.query("scalar(1)")
    assert not pid_alive(pid)
    assert not directory.exists()
    assert not prometheus.running()


def test_a_server_that_exits_during_start_is_reported_and_cleaned_up(
    tmp_path: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROMETHEUS", "exit")
    prometheus = Prometheus(fake_binary, parent_dir=tmp_path / "runs")
    with pytest.raises(HarnessError) as info:
        prometheus.start()
    assert "Prometheus exited with code 3 during start" in info.value.message
    assert "boom: the configuration is broken" in info.value.message
    assert prometheus.process is None
    assert prometheus.directory is not None and not prometheus.directory.exists()


def test_a_server_never_ready_is_killed_and_cleaned_up(
    tmp_path: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROMETHEUS", "hang")
    prometheus = Prometheus(fake_binary, ready_timeout=1.0, parent_dir=tmp_path / "runs")
    started: list[int] = []

    def recording_spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        proc = spawn(argv, log)
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness, "spawn", recording_spawn)
    with pytest.raises(HarnessError, match="not ready within 1s"):
        prometheus.start()
    (pid,) = started
    assert not pid_alive(pid)
    assert prometheus.directory is not None and not prometheus.directory.exists()


def test_a_port_taken_meanwhile_is_picked_again(
    tmp_path: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROMETHEUS_BUSY_ONCE", str(tmp_path / "busy"))
    log = tmp_path / "prometheus.log"
    with Prometheus(fake_binary, log_path=log, parent_dir=tmp_path / "runs") as prometheus:
        assert prometheus.query_value("load") == 42.0
    assert len(_argvs(tmp_path)) == 2
    assert "address already in use" in log.read_text()  # a log_path outside the directory is kept


def test_prometheus_with_endpoint(tmp_path: Path, fake_binary: Path) -> None:
    with prometheus_with_endpoint(fake_binary, parent_dir=tmp_path / "runs") as (prometheus, endpoint):
        assert prometheus.targets == [endpoint.address]
        assert prometheus.running()
    assert not prometheus.running()


def test_start_twice_is_refused(tmp_path: Path, fake_binary: Path) -> None:
    with Prometheus(fake_binary, parent_dir=tmp_path / "runs") as prometheus, pytest.raises(RuntimeError):
        prometheus.start()


def test_stale_directories_of_dead_owners_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, mine, foreign = (tmp_path / f"{DIR_PREFIX}{n}" for n in ("stale", "mine", "foreign"))
    for directory, owner in ((stale, dead.pid), (mine, os.getpid())):
        (directory / "data").mkdir(parents=True)
        (directory / OWNER_FILE).write_text(f"{owner}\n")
    foreign.mkdir()  # no owner file: not touched
    assert sweep_stale_dirs(tmp_path) == [stale]
    assert not stale.exists() and mine.exists() and foreign.exists()


@pytest.mark.parametrize(
    ("advertise", "listen", "local"),
    [("localhost", "0.0.0.0", "127.0.0.1"), ("127.0.0.1", "127.0.0.1", "127.0.0.1")],
)
def test_an_advertised_address_names_the_url_and_decides_where_it_listens(
    tmp_path: Path, fake_binary: Path, advertise: str, listen: str, local: str
) -> None:
    with Prometheus(fake_binary, parent_dir=tmp_path / "runs", advertise=advertise) as prometheus:
        (argv,) = _argvs(tmp_path)
        assert f"--web.listen-address={listen}:{prometheus.port}" in argv
        assert prometheus.url == f"http://{advertise}:{prometheus.port}"
        assert prometheus.local_url == f"http://{local}:{prometheus.port}"
        assert prometheus.query_value("load") == 42.0  # the runner's own queries go to local_url
