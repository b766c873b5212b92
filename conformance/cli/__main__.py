"""``python -m conformance.cli``: the ``kthena-conformance`` command."""

from __future__ import annotations

from . import run

if __name__ == "__main__":
    run()
