"""The command line: device classes, argument validation, and SIGTERM stopping a server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fake_devices.cli import main, parser
from fake_devices.drivers import GPU, NPU


def test_device_classes_prints_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["device-classes"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == [GPU.device_class(), NPU.device_class()]
    assert main(["device-classes", "--driver", "npu"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == [NPU.device_class()]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["publish"], id="publish-needs-driver"),
        pytest.param(["publish", "--driver", "tpu"], id="unknown-driver"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(argv)
    assert exc.value.code == 2


def test_kubelet_plugin_without_a_node_name_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["kubelet-plugin", "--driver", "gpu", "--kubeconfig", "/nonexistent"]) == 2


def test_publish_stops_on_sigterm_even_when_the_api_is_unreachable(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_devices", "publish", "--driver", "gpu", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("reconcile failed" in line for line in seen):
            line = proc.stderr.readline()  # failed rounds keep logging, so this never blocks for long
            if not line:
                break
            seen.append(line)
        assert proc.poll() is None, "".join(seen)  # still running after failed rounds
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
        err = "".join(seen) + err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "reconcile failed" in err and "received SIGTERM" in err
