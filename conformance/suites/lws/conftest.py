"""The LWSConversion suite's cleanup: the test's LeaderWorkerSets are deleted before its namespace
is cleaned up, so garbage collection removes their children and the children's Pods (see
:func:`conformance.suites.modelbooster.children.delete_all`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.framework.modelserving import ModelServings
from conformance.suites.modelbooster.children import delete_all

from . import LWS


@pytest.fixture(autouse=True)
def _delete_leader_worker_sets(ms: ModelServings) -> Iterator[None]:
    yield
    delete_all(ms, LWS)
