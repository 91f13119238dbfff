"""Tensor-subclass inputs and outputs (MONAI's ``MetaTensor``, or any ``__torch_function__``
subclass): eager answers in the subclass, srbench's program in plain tensors. The protocol
compares each output's exact class, copies of a call keep its inputs' classes, and the static
runtime refuses at prepare a model whose answer it would give in plain tensors, naming the output
(:mod:`srbench.graph.output_types`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph import CaptureError
from srbench.inputs import Inputs
from srbench.measure.equivalence import EquivalenceError, check_equivalence, compare, eager_answer
from srbench.runtimes import RuntimeOptions, eager_mode_of, get_runtime
from srbench.static import InputSignatureError, StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Tagged(torch.Tensor):
    """A ``__torch_function__`` subclass as torch's default makes one: every result of an op on
    it is a Tagged, and it carries an attribute of its own."""

    label: str = ""


def tagged(tensor: torch.Tensor, label: str = "scan") -> Tagged:
    made = tensor.as_subclass(Tagged)
    made.label = label
    return made


def test_the_protocol_compares_each_outputs_exact_class():
    """``assert_close`` takes a subclass for its base: a plain tensor where eager answers a Tagged
    passed, its values right and its class and attributes lost."""
    plain = torch.randn(2, 3)
    with pytest.raises(EquivalenceError, match=r"output \[1\] is of another class than eager's: it is a torch.Tensor"):
        compare((plain, plain), (plain, tagged(plain)), rtol=0, atol=0, run="run 1")
    with pytest.raises(EquivalenceError, match=r"Tagged in the runtime's answer, a torch\.Tensor in eager's"):
        compare(tagged(plain), plain, rtol=0, atol=0, run="run 1")
    compare((plain, tagged(plain)), (plain, tagged(plain)), rtol=0, atol=0, run="run 1")


def test_a_copy_of_a_call_keeps_its_tensors_classes_and_attributes():
    """``Inputs.clone`` made a plain tensor of a Tagged (a new tensor over a copied storage), so
    eager and every runtime the protocol compares were called with plain tensors, and eager's
    answer in Tagged was never asked for. The copy keeps the class, a copy of the attributes,
    and the memory sharing of the call."""
    x = tagged(torch.randn(4, 3))
    copied_x, copied_row, plain = Inputs.of(x, x[1], torch.randn(2)).clone().args
    assert type(copied_x) is Tagged and copied_x.label == "scan" and copied_x is not x
    assert type(copied_row) is Tagged and type(plain) is torch.Tensor
    assert copied_x._base is None and torch.equal(copied_x, x)
    assert copied_row.untyped_storage().data_ptr() == copied_x.untyped_storage().data_ptr()
    copied_x.label = "changed"
    assert x.label == "scan"


def test_a_model_answering_in_a_subclass_is_refused_at_prepare_naming_the_output():
    """srbench answered plain tensors (export traces the model on plain tensors; the subclass's
    ``__torch_function__`` is in no program), the values right. No class given afterwards can
    carry what the subclass's own function sets, so the model is refused, with the reason."""
    model = nn.Linear(3, 2).eval()
    with pytest.raises(CaptureError, match=r"eager's output \[0\] is a .*Tagged \(a tensor subclass\)"):
        StaticModule(TwoHeads(model), (tagged(torch.randn(4, 3)),))


class TwoHeads(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), self.linear.weight * 2


class PassesThrough(nn.Module):
    """A subclass input returned as it is (the program returns that very object), and a result
    computed from a plain input only."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, y * 2


def test_a_subclass_input_returned_as_it_is_keeps_its_class(conformance):
    first = Inputs.of(tagged(torch.randn(2, 3)), torch.randn(2, 3))
    second = Inputs.of(tagged(torch.randn(5, 3)), torch.randn(5, 3))
    conformance(PassesThrough(), first, second, StaticOptions())


def test_a_call_passing_a_subclass_where_the_example_passed_a_plain_tensor_is_refused():
    """A tensor's class is part of a call's signature: a module prepared on a plain tensor,
    called with a Tagged, ran the plain program and answered a plain tensor where eager answers
    a Tagged. The call is prepared, and refused naming the difference; plain calls go on."""
    model = nn.Linear(3, 2).eval()
    x = torch.randn(4, 3)
    runtime = StaticModule(model, (x,)).runtime()
    with pytest.raises(
        InputSignatureError, match="input must be a tensor, got a Tagged, and no program could be prepared"
    ):
        runtime(tagged(x))
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("name", "keeps"), [("eager", True), ("torchscript", True), ("static_runtime", False), ("onnxruntime", False)]
)
def test_peer_runtimes_are_held_to_eagers_classes(name, keeps):
    """Eager and TorchScript run the subclass's ``__torch_function__`` and answer in Tagged;
    PyTorch's Static Runtime and ONNX Runtime (through numpy) answer plain tensors, and fail the
    case naming both classes. No runtime is excused: a plain tensor is not eager's answer."""
    if name == "onnxruntime":
        pytest.importorskip("onnxruntime", reason="onnxruntime is an optional package (the onnx extra)")
    model = nn.Linear(3, 2).eval()
    first, second = Inputs.of(tagged(torch.randn(2, 3))), Inputs.of(tagged(torch.randn(5, 3)))
    runtime_class = get_runtime(name)
    mode = eager_mode_of(runtime_class)
    expected = eager_answer(model, first, mode), eager_answer(model, second, mode)
    runtime = runtime_class(model, first.clone(), RuntimeOptions())
    if keeps:
        check_equivalence(runtime, first, second, *expected, rtol=1e-5, atol=1e-6)
    else:
        with pytest.raises(
            EquivalenceError, match=r"it is a torch\.Tensor in the runtime's answer, a .*Tagged in eager's"
        ):
            check_equivalence(runtime, first, second, *expected, rtol=1e-5, atol=1e-6)


def test_a_monai_network_on_a_metatensor_is_refused_naming_the_output():
    """The case found: MONAI's UNet on a MetaTensor answered plain tensors."""
    monai = pytest.importorskip("monai", reason="monai is an optional package (the outside sweep's)")
    net = monai.networks.nets.UNet(
        spatial_dims=2, in_channels=1, out_channels=2, channels=(4, 8), strides=(2,), num_res_units=1
    ).eval()
    image = monai.data.MetaTensor(torch.randn(1, 1, 16, 16), affine=torch.eye(4) * 2)
    with pytest.raises(CaptureError, match=r"eager's output is a monai\.data\.meta_tensor\.MetaTensor"):
        StaticModule(net, (image,))
    plain = image.as_tensor()
    runtime = StaticModule(net, (plain,)).runtime()
    with torch.no_grad():
        torch.testing.assert_close(runtime(plain), net(plain))
