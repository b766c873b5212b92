"""The body of a core/v1 Event about one object: what the controller, the autoscaler and the converters
each report through (they differ only in what the Event is about and who reports it).

Events are best effort everywhere: the callers log a failed create and go on.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

MESSAGE_LIMIT = 1024  # the API server refuses longer Event messages


def event_body(involved: dict[str, Any], type_: str, reason: str, message: str, component: str) -> dict[str, Any]:
    """An Event on ``involved`` (apiVersion, kind, name, namespace, uid, optionally resourceVersion),
    named ``<name>.<random>``, counted once, from ``component``. Its timestamps are now."""
    now = dt.datetime.now(dt.UTC).isoformat()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{secrets.token_hex(8)}", "namespace": involved["namespace"]},
        "involvedObject": {k: v for k, v in involved.items() if v is not None},
        "type": type_,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
