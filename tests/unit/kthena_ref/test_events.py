"""The Event body every part of the reference reports through (kthena_ref.events)."""

from __future__ import annotations

import pytest

from kthena_ref.events import MESSAGE_LIMIT, event_body

INVOLVED = {"apiVersion": "g/v1", "kind": "K", "name": "obj", "namespace": "ns", "uid": "u"}


@pytest.mark.parametrize(
    ("involved", "expected_involved"),
    [
        (INVOLVED, INVOLVED),
        ({**INVOLVED, "resourceVersion": "7"}, {**INVOLVED, "resourceVersion": "7"}),
        ({**INVOLVED, "resourceVersion": None}, INVOLVED),  # unknown fields are left out, never null
    ],
)
def test_an_event_names_its_object_and_reporter(involved: dict[str, str], expected_involved: dict[str, str]) -> None:
    body = event_body(involved, "Warning", "Reason", "what happened", "me")
    assert body["involvedObject"] == expected_involved
    assert body["metadata"]["namespace"] == "ns" and body["metadata"]["name"].startswith("obj.")
    assert (body["type"], body["reason"], body["message"], body["count"]) == ("Warning", "Reason", "what happened", 1)
    assert body["source"] == {"component": "me"} and body["reportingComponent"] == body["reportingInstance"] == "me"
    assert body["firstTimestamp"] == body["lastTimestamp"]


def test_events_get_distinct_names_and_bounded_messages() -> None:
    first, second = (event_body(INVOLVED, "Normal", "R", "x" * 5000, "me") for _ in range(2))
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert len(first["message"]) == MESSAGE_LIMIT
