"""The ModelBooster suite's cleanup: the test's boosters are deleted before its namespace is cleaned
up, so garbage collection removes their children and the children's Pods (see
:func:`.children.delete_all`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.framework.modelserving import ModelServings

from . import BOOSTER
from .children import delete_all


@pytest.fixture(autouse=True)
def _delete_boosters(ms: ModelServings) -> Iterator[None]:
    yield
    delete_all(ms, BOOSTER)
