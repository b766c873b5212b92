"""The exit codes of ``kthena-conformance run`` (and of ``report merge``, which gives the code one
unsharded run would have exited with), in one place: the runner, the merge and the HTML page
read them from here."""

from __future__ import annotations

from typing import Final

EXIT_OK, EXIT_NONCONFORMANT, EXIT_USAGE, EXIT_CLUSTER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: What each code means, for people (``--help``, the HTML report).
MEANINGS: Final = {
    EXIT_OK: "every selected profile succeeded",
    EXIT_NONCONFORMANT: "a profile is failure, partial or not-run",
    EXIT_USAGE: "bad input",
    EXIT_CLUSTER: "the cluster or its preflight failed",
    EXIT_INTERRUPTED: "interrupted",
}
