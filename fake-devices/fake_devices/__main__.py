"""``python -m fake_devices`` is the ``fake-devices`` command."""

from .cli import run

run()
