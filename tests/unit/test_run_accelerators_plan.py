"""Which capability files a run certifies and whether Accelerators stays in: the decision table
(provider x capability files given x profiles asked -> files used, profiles, notes), pure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.framework.capabilities import CapabilityFileError
from conformance.framework.features import PROFILES
from conformance.run.accelerators import AcceleratorPlan, plan_accelerators

SHIPPED = (Path("/pkg/capabilities/gpu.yaml"), Path("/pkg/capabilities/npu.yaml"))
VENDOR = Path("/vendor/caps.yaml")
ALL = tuple(PROFILES)
BUT_ACCELERATORS = tuple(p for p in ALL if p != "Accelerators")


def plan(
    provider: str = "local",
    given: tuple[Path, ...] = (),
    fake: bool | None = None,
    profiles: tuple[str, ...] = (),
    narrowed: bool | None = None,
    selected: bool = True,
    shipped: tuple[Path, ...] = SHIPPED,
) -> AcceleratorPlan:
    return plan_accelerators(
        provider=provider,
        given=list(given),
        fake_devices=fake,
        profiles=list(profiles),
        narrowed=bool(profiles) if narrowed is None else narrowed,
        selected=selected,
        shipped=list(shipped),
        all_profiles=list(ALL),
    )


# (case, inputs, files used, profiles run with, by default, words the notes carry, left out)
CASES: list[tuple[str, dict[str, Any], tuple[Path, ...], tuple[str, ...], bool, list[str], bool]] = [
    ("local, nothing asked: the fake drivers by default", {}, SHIPPED, (), True, ["chosen by default", "gpu.yaml"], False),
    ("local, --profile Accelerators: the fake drivers by default", {"profiles": ("Accelerators",)}, SHIPPED,
     ("Accelerators",), True, ["chosen by default"], False),
    ("local, --id accelerators/*: the fake drivers by default", {"narrowed": True}, SHIPPED, (), True,
     ["chosen by default"], False),
    ("local, --capabilities: the given file only", {"given": (VENDOR,)}, (VENDOR,), (), False, [], False),
    ("local, --capabilities and --fake-devices: both", {"given": (VENDOR,), "fake": True}, (VENDOR, *SHIPPED), (),
     False, [], False),
    ("local, --fake-devices", {"fake": True}, SHIPPED, (), False, [], False),
    ("local, --no-fake-devices: left out with the reason", {"fake": False}, (), BUT_ACCELERATORS, False,
     ["left out", "--no-fake-devices"], True),
    ("local, fake files missing: left out with the reason", {"shipped": ()}, (), BUT_ACCELERATORS, False,
     ["left out", "fake drivers' files"], True),
    ("local, --profile Core: nothing to certify", {"profiles": ("Core",), "selected": False}, (), ("Core",), False,
     [], False),
    ("local, --id core/*: left out, none selected", {"narrowed": True, "selected": False}, (), BUT_ACCELERATORS, False,
     ["left out", "none of its behaviours"], True),
    ("kind, nothing asked: left out with the reason", {"provider": "kind"}, (), BUT_ACCELERATORS, False,
     ["left out", "kind provider runs no fake drivers", "--capabilities FILE"], True),
    ("existing, nothing asked: left out with the reason", {"provider": "existing"}, (), BUT_ACCELERATORS, False,
     ["left out", "existing provider"], True),
    ("kind, --capabilities", {"provider": "kind", "given": (VENDOR,)}, (VENDOR,), (), False, [], False),
    ("kind, --fake-devices", {"provider": "kind", "fake": True}, SHIPPED, (), False, [], False),
    ("kind, --profile Core: nothing to certify", {"provider": "kind", "profiles": ("Core",), "selected": False}, (),
     ("Core",), False, [], False),
    ("existing, --capabilities with --profile Accelerators",
     {"provider": "existing", "given": (VENDOR,), "profiles": ("Accelerators",)}, (VENDOR,), ("Accelerators",), False,
     [], False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "files", "profiles", "by_default", "words", "left_out"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_the_accelerators_plan(
    inputs: dict[str, Any],
    files: tuple[Path, ...],
    profiles: tuple[str, ...],
    by_default: bool,
    words: list[str],
    left_out: bool,
) -> None:
    got = plan(**inputs)
    assert got.files == files
    assert got.profiles == profiles
    assert got.by_default is by_default
    text = " ".join(got.notes)
    for word in words:
        assert word in text, (word, got.notes)
    if not words:
        assert got.notes == ()
    assert bool(got.left_out) is left_out
    if left_out:  # the reason printed on the terminal is the one in the report's note
        assert any(got.left_out in note for note in got.notes)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        pytest.param({"provider": "kind", "profiles": ("Accelerators",)}, "kind provider runs no fake drivers",
                     id="kind, --profile Accelerators, no file"),
        pytest.param({"provider": "existing", "narrowed": True}, "existing provider", id="existing, --id accel*"),
        pytest.param({"fake": False, "profiles": ("Accelerators",)}, "--no-fake-devices was given",
                     id="local, --no-fake-devices with --profile Accelerators"),
        pytest.param({"fake": True, "shipped": ()}, "--fake-devices: the fake drivers' capability files",
                     id="--fake-devices without the shipped files"),
    ],
)  # fmt: skip
def test_asking_for_accelerators_without_a_driver_is_refused_with_the_reason(
    inputs: dict[str, Any], message: str
) -> None:
    with pytest.raises(CapabilityFileError) as caught:
        plan(**inputs)
    assert message in str(caught.value)
    if "fake drivers' capability files" not in message:
        assert "the Accelerators profile certifies a DRA driver" in str(caught.value)
        assert "--capabilities FILE" in str(caught.value)


def test_a_given_file_that_is_also_shipped_is_used_once() -> None:
    assert plan(given=(SHIPPED[0],), fake=True).files == SHIPPED
