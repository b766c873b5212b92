"""The "test my own controller" recipe of docs/testing-your-implementation.md, followed literally.

The block between the ``recipe`` markers is run as written by ``bash -e`` in an empty directory
whose ``.venv`` is this checkout's (the recipe's paths are relative to the repository root): the
reference's CRD, a webhook configuration from ``webhook register --print``, a support file from
``support init``, and ``run --profile Core --implementation-command ...`` on the local provider. The
run must succeed, say so on the terminal, and leave its report where the recipe says.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing-your-implementation.md"
DEADLINE = 1200  # seconds: the recipe says "about two minutes"; a hang must not stall make test


def recipe() -> str:
    """The shell block between the recipe markers of the doc."""
    text = DOC.read_text()
    match = re.search(r"<!-- recipe: tested by [^>]*-->\n```sh\n(.*?)```\n<!-- recipe: end -->", text, re.S)
    assert match, f"{DOC}: no recipe block between the markers"
    return match.group(1)


def test_the_recipe_block_is_found() -> None:
    block = recipe()
    assert "--implementation-command" in block and block.count("\n") >= 5


def test_the_docs_recipe_works_as_written(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    proc = subprocess.Popen(["bash", "-e", "-c", recipe()], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:  # Ctrl-C for the whole recipe: the harness tears its cluster down
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    shown = f"exit {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-6000:]}"
    assert proc.returncode == 0, shown
    assert "verdict: success" in err, shown
    assert re.search(r"profile Core\s+success", err), shown
    data = json.loads((tmp_path / "my-reports" / "conformance-report.json").read_text())
    assert (
        data["implementation"]["deployedBy"] == "harness-command" and data["implementation"]["name"] == "my-controller"
    )
    assert (tmp_path / "my-reports" / "implementation.log").is_file()
