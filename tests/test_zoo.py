"""The zoo's interface: lookups, listing, and providers that cannot work here."""

from __future__ import annotations

import sys

import pytest
import torch

from srbench.registry import UnknownPluginError
from srbench.zoo import CatalogProvider, ModelCase, ModelUnavailable, ProviderUnavailable, build_zoo, load_zoo


def tiny_case(name: str, provider: str, build=lambda: torch.nn.Linear(4, 2)) -> ModelCase:
    return ModelCase(
        name=name,
        provider=provider,
        family="mlp",
        build=build,
        make_inputs=lambda shape, batch: (torch.ones(batch or 1 + shape, 4),),
        description="tiny",
    )


def broken_import():
    raise ImportError("libfoo.so: cannot open shared object file")


def test_unknown_model_name_lists_the_nearest_names():
    with pytest.raises(UnknownPluginError) as error:
        load_zoo().get("resnet5")
    message = str(error.value)
    assert "unknown model 'resnet5'" in message and "did you mean" in message and "'resnet50'" in message


def test_a_provider_that_fails_disables_only_its_own_cases():
    missing = CatalogProvider("missing", entries=(tiny_case("ghost", "missing"),), requires=("no_such_module_srbench",))
    working = CatalogProvider("working", entries=(tiny_case("tiny", "working"),))
    zoo = build_zoo([("missing", lambda: missing), ("broken", broken_import), ("working", lambda: working)])
    assert list(zoo.cases) == ["tiny"]
    assert (
        "ModuleNotFoundError" in zoo.unavailable["missing"] and "no_such_module_srbench" in zoo.unavailable["missing"]
    )
    assert zoo.unavailable["broken"] == "ImportError: libfoo.so: cannot open shared object file"
    assert list(zoo.unavailable_cases) == ["ghost"]
    assert [(entry.case.name, entry.available) for entry in zoo.entries()] == [("ghost", False), ("tiny", True)]
    with pytest.raises(
        ModelUnavailable, match="'ghost' is provided by 'missing', which is unavailable here: cannot import"
    ):
        zoo.get("ghost")


def test_any_exception_while_importing_a_requirement_makes_the_provider_unavailable(monkeypatch):
    """A torchvision built for another torch fails with RuntimeError or OSError, not ImportError."""
    monkeypatch.setitem(sys.modules, "srbench_fake_lib", None)  # import of it raises ImportError
    with pytest.raises(ProviderUnavailable, match="cannot import srbench_fake_lib"):
        CatalogProvider("p", entries=(), requires=("srbench_fake_lib",)).check()


def test_any_error_from_cases_disables_only_that_provider():
    class Crashing(CatalogProvider):
        def cases(self):
            raise OSError("undefined symbol: _ZN3c10")

    crashing = Crashing("crashing", entries=(tiny_case("crash", "crashing"),))
    zoo = build_zoo(
        [
            ("crashing", lambda: crashing),
            ("working", lambda: CatalogProvider("working", (tiny_case("tiny", "working"),))),
        ]
    )
    assert zoo.unavailable == {"crashing": "OSError: undefined symbol: _ZN3c10"}
    assert list(zoo.unavailable_cases) == ["crash"] and list(zoo.cases) == ["tiny"]


def test_a_provider_raising_unavailable_without_a_catalog_lists_nothing():
    class Refusing:
        name = "refusing"

        def cases(self):
            raise ProviderUnavailable("needs a GPU")

    zoo = build_zoo([("refusing", Refusing)])
    assert zoo.unavailable == {"refusing": "needs a GPU"} and not zoo.cases and not zoo.unavailable_cases


def test_duplicate_case_names_across_providers_are_an_error():
    first = CatalogProvider("a", entries=(tiny_case("same", "a"),))
    second = CatalogProvider("b", entries=(tiny_case("same", "b"),), requires=("no_such_module_srbench",))
    with pytest.raises(ValueError, match="'same' is provided by both 'a' and 'b'"):
        build_zoo([("a", lambda: first), ("b", lambda: second)])


def test_unknown_family_is_rejected():
    with pytest.raises(ValueError, match="family 'speech' is not one of"):
        ModelCase(name="x", provider="p", family="speech", build=torch.nn.Identity, make_inputs=lambda s, b: ())


def test_example_shape_must_be_zero_or_one():
    with pytest.raises(ValueError, match="shape must be 0 or 1, got 2"):
        tiny_case("tiny", "p").example_inputs(2)


def test_select_filters_by_provider_and_family():
    zoo = load_zoo()
    vision = zoo.select(providers=["builtin"], families=["vision"])
    assert {case.name for case in vision} == {"resnet18", "resnet50", "mobilenet_v2", "small_cnn"}
    assert zoo.select(providers=["nobody"]) == []


def test_missing_transformers_lists_its_cases_as_unavailable(monkeypatch):
    from srbench_models import builtin, hf

    monkeypatch.setitem(sys.modules, "transformers", None)
    zoo = build_zoo([("builtin", lambda: builtin.provider), ("transformers", lambda: hf.provider)])
    assert zoo.unavailable == {
        "transformers": (
            "cannot import transformers: ModuleNotFoundError: import of transformers halted; None in sys.modules"
        )
    }
    assert {"hf_bert", "hf_gpt2", "hf_vit", "hf_resnet18"} <= set(zoo.unavailable_cases)
    assert "resnet50" in zoo.cases
