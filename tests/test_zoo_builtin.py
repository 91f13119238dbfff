"""The builtin provider: always available, the published sizes of the paper architectures."""

from __future__ import annotations

import pytest
import torch

from srbench.zoo import load_zoo
from srbench_models.builtin import provider
from srbench_models.builtin.blocks import mlp_stack
from srbench_models.calibration import calibrate_batch_norm

BUILTIN = {
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "bert_encoder",
    "gpt_decoder",
    "lstm_lm",
    "dlrm",
    "deep_and_wide",
    "mlp",
    "small_cnn",
    "transformer_encoder",
}


def test_builtin_provider_is_available_with_every_architecture():
    zoo = load_zoo()
    assert "builtin" not in zoo.unavailable
    assert {case.name for case in zoo.select(providers=["builtin"])} == BUILTIN
    assert {case.name for case in provider.catalog()} == BUILTIN


@pytest.mark.parametrize(
    ("name", "parameters"), [("resnet18", 11_689_512), ("resnet50", 25_557_032), ("mobilenet_v2", 3_504_872)]
)
def test_published_parameter_counts(name, parameters):
    """Counted on the meta device; test_zoo_cases checks that equals the count of a real build."""
    assert load_zoo().get(name).parameter_count() == parameters


def test_gpt_decoder_is_causal():
    """Changing a later token must not change the logits of earlier positions."""
    case = load_zoo().get("gpt_decoder")
    model, (ids,) = case.model(), case.example_inputs(1).args
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 8192
    with torch.no_grad():
        before, after = model(ids), model(changed)
    torch.testing.assert_close(before[:, :-1], after[:, :-1])
    assert not torch.allclose(before[:, -1], after[:, -1])


def test_bert_encoder_is_bidirectional():
    case = load_zoo().get("bert_encoder")
    model, (ids,) = case.model(), case.example_inputs(1).args
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 30522
    with torch.no_grad():
        assert not torch.allclose(model(ids)[:, 0], model(changed)[:, 0])


def test_transformer_encoder_takes_the_fused_path_in_eager():
    """The zoo case exists to show what a runtime does with eager's fused inference kernel: each of
    its four layers must run as ``aten::_transformer_encoder_layer_fwd`` under inference mode."""
    case = load_zoo().get("transformer_encoder")
    model, inputs = case.model(), case.example_inputs(0)
    with torch.inference_mode(), torch.profiler.profile() as profiler:
        inputs.call(model)
    names = [event.name for event in profiler.events()]
    assert names.count("aten::_transformer_encoder_layer_fwd") == 4


def test_small_cnn_is_a_three_stage_resnet():
    model = load_zoo().get("small_cnn").model()
    assert model.layer4 is None
    widths = [stage[-1].conv2.out_channels for stage in (model.layer1, model.layer2, model.layer3)]
    assert widths == [32, 64, 128] and [len(stage) for stage in (model.layer1, model.layer2, model.layer3)] == [2, 2, 2]


def test_dlrm_interaction_uses_every_pair_once():
    model = load_zoo().get("dlrm").model()
    pairs = set(zip(model.pair_rows.tolist(), model.pair_cols.tolist()))
    assert len(pairs) == 9 * 8 // 2 and all(row > col for row, col in pairs)


def test_calibrated_batch_norm_keeps_activations_at_unit_scale():
    case = load_zoo().get("mobilenet_v2")
    with torch.no_grad():
        logits = case.example_inputs(0).call(case.model())
    assert 0.1 < logits.std().item() < 10


def test_calibration_restores_momentum_and_eval_mode():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    calibrate_batch_norm(model, torch.randn(2, 3, 8, 8) * 5 + 3)
    assert not model.training and model[1].momentum == 0.1
    assert model[1].running_mean.abs().sum() > 0


def test_mlp_stack_rejects_a_single_width():
    with pytest.raises(ValueError, match="input and an output width"):
        mlp_stack([512])


def test_batch_override_must_be_positive():
    with pytest.raises(ValueError, match="positive int"):
        load_zoo().get("mlp").example_inputs(0, batch=0)


def test_resnet50_uses_torchvision_parameter_names():
    """So torchvision's state_dict loads as it is (test_zoo_torchvision checks it where torchvision imports)."""
    from srbench_models.builtin.resnet import resnet50

    with torch.device("meta"):
        keys = set(resnet50().state_dict())
    assert {
        "conv1.weight",
        "bn1.running_var",
        "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.bias",
        "layer2.0.conv2.weight",
        "layer4.2.bn3.num_batches_tracked",
        "fc.weight",
        "fc.bias",
    } <= keys
    assert len(keys) == 320  # torchvision resnet50: 161 parameters + 159 batch-norm buffers
