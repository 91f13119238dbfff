"""The transformers provider: configs built in code, random weights, nothing fetched from the hub."""

from __future__ import annotations

import socket

import pytest
import torch

pytest.importorskip("transformers", reason="the transformers extra is not installed")

from srbench.inputs import Inputs
from srbench.zoo import load_zoo
from srbench_models.hf import provider

REQUIRED = {"hf_bert", "hf_gpt2", "hf_vit", "hf_resnet18"}


def test_transformers_provider_is_available_with_the_required_architectures():
    zoo = load_zoo()
    assert "transformers" not in zoo.unavailable
    names = {case.name for case in zoo.select(providers=["transformers"])}
    assert names >= REQUIRED and len(names) >= len(REQUIRED) + 2


def test_building_every_case_touches_no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for case in provider.cases():
        with torch.device("meta"):
            model = case.build()
        assert sum(p.numel() for p in model.parameters()) > 0, case.name


def test_transformers_resnet18_layout_has_resnet18_size():
    """Same architecture, same parameter count as the builtin (and torchvision's) ResNet-18."""
    zoo = load_zoo()
    assert zoo.get("hf_resnet18").parameter_count() == zoo.get("resnet18").parameter_count() == 11_689_512


def test_outputs_are_plain_tensors():
    case = load_zoo().get("hf_gpt2")
    with torch.no_grad():
        logits = case.example_inputs(1).call(case.model())
    assert type(logits) is torch.Tensor and logits.shape == (1, 64, 50257)


@pytest.mark.parametrize("name", ["hf_bert", "hf_gpt2", "hf_distilbert", "hf_t5_encoder"])
def test_language_models_are_called_with_keyword_arguments_and_a_padding_mask(name):
    """As transformers models are called: ``input_ids=..., attention_mask=...``; the mask pads the
    last sequence, so it changes the answer."""
    case = load_zoo().get(name)
    inputs = case.example_inputs(0)
    assert not inputs.args and set(inputs.kwargs) == {"input_ids", "attention_mask"}
    mask = inputs.kwargs["attention_mask"]
    assert mask.shape == inputs.kwargs["input_ids"].shape and 0 < int((mask == 0).sum()) < mask.numel()
    model = case.model()
    unmasked = Inputs.of(input_ids=inputs.kwargs["input_ids"], attention_mask=torch.ones_like(mask))
    with torch.no_grad():
        assert not torch.allclose(inputs.call(model), unmasked.call(model))
