"""A deliberately incomplete implementation for tests: the reference controller without its
headless-service plugin, admitting ModelServings that name it (``unknown-plugin-logged-only``) and
then failing every reconcile of them with a log line, as a controller that lacks a feature it
accepts in its API would. Started by tests/integration/test_incomplete_implementation.py through
``run --implementation-command``; takes ``kthena-ref``'s arguments."""

from __future__ import annotations

import os

from kthena_ref.cli import main
from kthena_ref.plugins.builtin import HEADLESS, REGISTRY

if __name__ == "__main__":
    del REGISTRY.factories[HEADLESS]
    os.environ["KTHENA_REF_FAULTS"] = "unknown-plugin-logged-only"
    main()
