"""A reference controller that fails at start says why in the error itself: its log may be in a
temporary directory nobody reads (a self-validation variant's), and a taken webhook port is told
apart so the start is tried again on another."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.cluster.errors import HarnessError
from conformance.implementations import reference


def test_an_early_exit_quotes_the_controllers_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "kthena-ref.log"
    log.write_text("an earlier start's line\n")
    script = "import sys; print('starting'); print('error: the webhook cannot listen on 127.0.0.1:1: Address already in use'); sys.exit(1)"
    proc = reference._spawn((sys.executable, "-c", script), log)
    with pytest.raises(HarnessError) as info:
        reference._synced(proc, log, offset=len("an earlier start's line\n"))
    message = info.value.message
    assert "exited with code 1 at start" in message
    assert "Address already in use" in message and "starting" in message
    assert "an earlier start" not in message  # only this start's lines
    assert reference.port_taken(info.value)


@pytest.mark.parametrize(
    ("message", "taken"),
    [
        (
            "the reference controller exited with code 1 at start; its last output:\n      error: the webhook cannot "
            "listen on 127.0.0.1:20001: Address already in use",
            True,
        ),
        ("the reference controller exited with code 1 at start; its last output:\n      error: no cluster", False),
        ("the reference controller did not sync its caches within 30s; its last output:\n      (no output)", False),
    ],
)
def test_port_taken(message: str, taken: bool) -> None:
    assert reference.port_taken(HarnessError(message)) is taken
