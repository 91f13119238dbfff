"""``srbench models``: the aligned table, the JSON document, bad filters (unavailable providers:
test_zoo_torchvision)."""

from __future__ import annotations

import json

import pytest
import torch

import srbench.zoo
from srbench.cli import main
from srbench.zoo import CatalogProvider, ModelCase, build_zoo, load_zoo

BUILTIN_COUNTS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872}


def test_table_lists_every_case_aligned(capsys):
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], [line for line in lines[1:] if not line.startswith(("*", "provider "))]
    assert header.split() == ["NAME", "PROVIDER", "FAMILY", "PARAMETERS", "AVAILABLE"]
    zoo = load_zoo()
    assert {row.split()[0] for row in rows} == {entry.case.name for entry in zoo.entries()}
    column = header.index("PROVIDER")
    assert all(row[column - 2 : column] == "  " and row[column] != " " for row in rows)
    for name, count in BUILTIN_COUNTS.items():
        row = next(row for row in rows if row.split()[0] == name)
        assert row.split()[1:4] == ["builtin", "vision", f"{count:,}"] and row.rstrip().endswith("yes")


def test_json_document(capsys):
    assert main(["models", "--json", "--provider", "builtin"]) == 0
    document = json.loads(capsys.readouterr().out)
    models = {model["name"]: model for model in document["models"]}
    assert set(models) == {case.name for case in load_zoo().select(providers=["builtin"])}
    for name, count in BUILTIN_COUNTS.items():
        assert models[name]["parameters"] == count and models[name]["parameters_source"] == "counted"
    assert all(model["available"] and model["reason"] is None for model in models.values())


def test_unknown_filter_names_the_nearest(capsys):
    assert main(["models", "--family", "visoin"]) == 2
    assert "unknown model family 'visoin'; did you mean 'vision'?" in capsys.readouterr().err
    assert main(["models", "--provider", "torchvison"]) == 2
    assert "did you mean 'torchvision'?" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["models"], ["plan", "--model", "same"], ["estimate", "--model", "same"]])
def test_two_providers_naming_one_model_is_one_line_and_status_2(monkeypatch, capsys, command):
    """A third-party provider that names a model as another does (copying the built-in ``mlp``)
    made every command end in a ValueError traceback."""

    def provider(name):
        case = ModelCase("same", name, "mlp", lambda: torch.nn.Linear(2, 2), lambda shape, batch: (torch.ones(1, 2),))
        return CatalogProvider(name, entries=(case,))

    monkeypatch.setattr(
        srbench.zoo, "load_zoo", lambda: build_zoo([("a", lambda: provider("a")), ("b", lambda: provider("b"))])
    )
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"srbench {command[0]}: model name 'same' is provided by both 'a' and 'b'; "
        "expected each model name once in the zoo (rename the model in one provider)"
    ]
    assert "Traceback" not in captured.out


@pytest.mark.parametrize("filters", [["--provider", "builtin"], ["--family", "language"]])
def test_a_filter_does_not_say_an_unavailable_provider_lists_no_cases(capsys, filters):
    """``srbench models --provider builtin`` ended in "provider 'torchvision' is unavailable and
    lists no cases" (torchvision, unavailable here, lists seven): its cases were only filtered out."""
    assert main(["models", *filters]) == 0
    output = capsys.readouterr().out
    catalogued = {case.provider for case in load_zoo().unavailable_cases.values()}
    for provider in catalogued:
        assert f"provider {provider!r} is unavailable and lists no cases" not in output


def test_an_unavailable_provider_without_a_catalog_is_named_once(monkeypatch, capsys):
    class Refusing:
        name = "refusing"

        def cases(self):
            raise srbench.zoo.ProviderUnavailable("needs a GPU")

    working = CatalogProvider(
        "working",
        entries=(ModelCase("tiny", "working", "mlp", lambda: torch.nn.Linear(2, 2), lambda s, b: (torch.ones(1, 2),)),),
    )
    monkeypatch.setattr(
        srbench.zoo, "load_zoo", lambda: build_zoo([("refusing", Refusing), ("working", lambda: working)])
    )
    assert main(["models"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1] == "provider 'refusing' is unavailable and lists no cases: needs a GPU"
    )
