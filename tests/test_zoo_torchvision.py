"""The torchvision provider: listed as unavailable with the reason where torchvision cannot import
(simulated here, and the real state checked), and torchvision's ResNet-50 checked against the builtin."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from srbench.cli import main
from srbench.zoo import ModelUnavailable, build_zoo, load_zoo
from srbench_models import builtin, hf, tv


def torchvision_import_error() -> str | None:
    try:
        importlib.import_module("torchvision")
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


@pytest.fixture
def torchvision_fails(monkeypatch):
    """Make ``import torchvision`` fail, as on a torch with no matching torchvision build."""
    monkeypatch.setitem(sys.modules, "torchvision", None)
    load_zoo.cache_clear()
    yield
    load_zoo.cache_clear()


def test_unimportable_torchvision_disables_only_its_own_cases(torchvision_fails):
    zoo = build_zoo([("builtin", lambda: builtin.provider), ("torchvision", lambda: tv.provider)])
    assert zoo.unavailable["torchvision"].startswith("cannot import torchvision: ModuleNotFoundError")
    assert set(zoo.unavailable_cases) == {case.name for case in tv.CASES}
    assert {case.name for case in zoo.select(providers=["builtin"])} == {
        case.name for case in builtin.provider.catalog()
    }
    with pytest.raises(ModelUnavailable, match="'tv_resnet50' is provided by 'torchvision', which is unavailable here"):
        zoo.get("tv_resnet50")


def test_installed_zoo_reports_the_real_torchvision_state():
    zoo, error = load_zoo(), torchvision_import_error()
    if error is None:
        assert "torchvision" not in zoo.unavailable and "tv_resnet50" in zoo.cases
    else:
        assert zoo.unavailable["torchvision"] == f"cannot import torchvision: {error}"
        assert "tv_resnet50" in zoo.unavailable_cases
    assert "builtin" not in zoo.unavailable


def test_catalog_names_are_known_without_importing_torchvision(torchvision_fails):
    assert {"tv_resnet18", "tv_resnet50", "tv_mobilenet_v2", "tv_efficientnet_b0", "tv_vit_b_16"} <= {
        case.name for case in tv.provider.catalog()
    }
    assert all(case.published_parameters for case in tv.CASES)
    assert not {case.name for case in tv.CASES} & {case.name for case in [*builtin.provider.catalog(), *hf.CASES]}


def test_unimportable_torchvision_shows_the_reason_and_the_published_count(torchvision_fails, capsys):
    assert main(["models", "--provider", "torchvision", "--provider", "builtin"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("tv_resnet50 "))
    assert "25,557,032*" in row
    assert row.endswith(
        "no: cannot import torchvision: ModuleNotFoundError: import of torchvision halted; None in sys.modules"
    )
    assert "* published count; the model cannot be built here" in out
    assert any(line.startswith("resnet50 ") and line.endswith("yes") for line in out.splitlines())


def test_torchvision_resnet50_weights_give_the_builtin_resnet50_identical_outputs():
    torchvision = pytest.importorskip("torchvision", reason="torchvision cannot be imported here")
    from srbench_models.builtin.resnet import resnet50

    torch.manual_seed(0)
    reference = torchvision.models.resnet50(weights=None).eval()
    ours = resnet50().eval()
    ours.load_state_dict(reference.state_dict())  # strict: every name and shape must match
    images = load_zoo().get("resnet50").example_inputs(1)
    with torch.no_grad():
        torch.testing.assert_close(images.call(ours), images.call(reference))
