"""``srbench.estimate`` on hand-made models: outputs, temporaries and their source, FLOPs, eager's
peak, planners, a device that is not here, data-dependent sizes, and ``srbench estimate``."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from srbench.cli import main
from srbench.estimate import Bound, NodeKind, TemporarySource, estimate_model
from srbench.estimate.allocators import round_size


class PoolNormDrop(nn.Module):
    """max_pool2d drops its int64 indices; layer_norm its statistics; eval dropout returns its input."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.5)
        self.linear = nn.Linear(8, 16)

    def forward(self, x):
        pooled = nn.functional.max_pool2d(x, 2)  # [2, 4, 8, 8] -> [2, 4, 4, 4]
        flat = pooled.reshape(2, 8, 8)
        return self.linear(self.drop(self.norm(flat)))


def inputs():
    return (torch.randn(2, 4, 8, 8),)


@pytest.fixture(scope="module")
def estimate():
    return estimate_model(PoolNormDrop, inputs, name="pool", planners=["greedy_by_size", "naive"])


def test_outputs_are_the_bytes_of_new_storages(estimate):
    pool = estimate.node("max_pool2d")
    assert pool.kind is NodeKind.ALLOCATES and pool.shape == "f32[2, 4, 4, 4]"
    assert pool.output.nbytes == 2 * 4 * 4 * 4 * 4 and pool.output.bound is Bound.EXACT
    assert estimate.node("reshape").kind is NodeKind.VIEW and estimate.node("reshape").output.nbytes == 0


def test_temporaries_come_from_the_decomposition(estimate):
    pool = estimate.node("max_pool2d")
    assert pool.runs_as == ("aten.max_pool2d_with_indices.default",)
    assert pool.temporary.nbytes == 2 * 4 * 4 * 4 * 8  # the int64 indices it throws away
    assert pool.temporary_source is TemporarySource.DECOMPOSITION
    norm = estimate.node("layer_norm")
    assert norm.temporary.nbytes == 2 * (2 * 8 * 4)  # mean and rstd, [2, 8, 1] each
    assert estimate.node("linear").temporary_source is TemporarySource.NONE


def test_dropout_in_eval_mode_returns_its_input(estimate):
    dropout = estimate.node("dropout")
    assert dropout.kind is NodeKind.RETURNS_INPUT and dropout.output.nbytes == 0


def test_flops_of_a_linear_layer(estimate):
    assert estimate.node("linear").flops == 2 * (2 * 8) * 8 * 16
    assert estimate.flops == estimate.node("linear").flops  # nothing else has a FLOP formula


def test_eager_peak_replays_allocations_and_frees(estimate):
    pool = estimate.node("max_pool2d")
    input_bytes = 2 * 4 * 8 * 8 * 4
    assert estimate.input_bytes == input_bytes
    assert pool.live_bytes == pool.output.nbytes + pool.temporary.nbytes  # the input is the caller's
    norm, linear = estimate.node("layer_norm"), estimate.node("linear")
    assert norm.live_bytes == pool.output.nbytes + norm.output.nbytes + norm.temporary.nbytes
    assert linear.live_bytes == norm.output.nbytes + linear.output.nbytes  # the pool's result died at layer_norm
    assert estimate.eager.peak_requested == max(n.live_bytes for n in estimate.nodes)
    assert estimate.output_bytes == linear.output.nbytes
    assert estimate.parameter_bytes == 4 * (8 + 8 + 8 * 16 + 16)


def test_planners_come_through_plan_memory(estimate):
    plans = {plan.planner: plan for plan in estimate.plans}
    assert plans["greedy_by_size"].slab_bytes == estimate.lower_bound  # the intermediates, aligned to 64
    assert plans["naive"].slab_bytes >= plans["greedy_by_size"].slab_bytes
    assert plans["greedy_by_size"].ratio_to_lower_bound == 1.0


def test_cuda_estimate_without_a_gpu_uses_the_caching_allocator():
    estimate = estimate_model(PoolNormDrop, inputs, name="pool", device="cuda")
    assert estimate.device == "cuda" and estimate.traced_on == "cuda"
    pool = estimate.node("max_pool2d")
    assert pool.output.nbytes == 512 and pool.block_bytes == round_size(512)
    linear = estimate.node("linear")
    assert linear.output.nbytes == 1024 and linear.block_bytes == 1024
    assert estimate.eager.peak_reserved == 2 * 1024 * 1024  # one small-pool segment
    assert estimate.eager.peak_requested <= estimate.eager.peak_allocated <= estimate.eager.peak_reserved


class Indexing(nn.Module):
    """Python indexing of a fake CUDA tensor needs the CUDA device guard, which a CPU-only build
    of torch lacks (a CUDA build has it, GPU or not)."""

    def forward(self, x):
        return x[:, 0] * 2


def test_a_model_that_cannot_be_traced_on_fake_cuda_is_propagated_from_the_cpu():
    estimate = estimate_model(Indexing, lambda: (torch.randn(4, 3),), name="indexing", device="cuda")
    if torch.version.cuda is not None:  # a CUDA build (seen with torch 2.14.1's, no GPU): traced directly
        assert estimate.traced_on == "cuda" and not estimate.notes
    else:
        assert estimate.traced_on == "cpu" and "propagated to cuda" in estimate.notes[0]
    assert estimate.node("mul").output.nbytes == 16 and estimate.node("mul").block_bytes == 512


class Masked(nn.Module):
    def forward(self, x):
        y = x * 2
        kept = y[y > 0]  # as many elements as are positive: [0, 40]
        return kept * 3, y.mean()


def test_data_dependent_sizes_are_upper_bounds_naming_the_node():
    estimate = estimate_model(Masked, lambda: (torch.randn(10, 4),), name="masked", planners=["greedy_by_size"])
    assert estimate.complete and estimate.bound is Bound.UPPER
    index = estimate.node("index")
    assert index.output.bound is Bound.UPPER and index.output.nbytes == 40 * 4
    assert "u0 in [0, 40]" in index.problem
    assert {problem.node for problem in estimate.problems} == {"index", "mul_1"}
    assert estimate.node("mul").output.bound is Bound.EXACT  # the rest is exact
    assert estimate.plans[0].slab_bytes is not None


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x) * 2
        if y.sum() > 0:  # a branch on a value: torch.export cannot capture it
            return y + 1
        return y - 1


def test_an_untraceable_model_is_estimated_up_to_the_node_where_tracing_stops():
    estimate = estimate_model(Branches, lambda: (torch.randn(10, 4),), name="branches")
    assert not estimate.complete
    (problem,) = estimate.problems
    assert problem.op == "aten._local_scalar_dense.default"  # the .item() the branch needs
    assert (
        "test_estimate.py" in problem.reason
        and "`if y.sum() > 0:" in problem.reason
        and "GuardOnDataDependentSymNode" in problem.reason
    )
    assert "torch.export cannot capture it" in estimate.notes[0]
    mul = next(node for node in estimate.nodes if node.op == "aten.mul.Tensor")
    assert mul.output.nbytes == 10 * 4 * 4  # the part before the branch is estimated
    assert estimate.node("addmm_default").flops == 2 * 10 * 4 * 4


def test_cli_prints_the_estimate_up_to_the_node_where_tracing_stops_and_names_it(monkeypatch, capsys):
    from srbench.zoo import ModelCase, Zoo

    case = ModelCase("branches", "test", "mlp", build=Branches, make_inputs=lambda shape, batch: (torch.randn(10, 4),))
    monkeypatch.setattr("srbench.zoo.load_zoo", lambda: Zoo({"branches": case}, {}))
    assert main(["estimate", "--model", "branches", "--planners", "greedy_by_size"]) == 1
    captured = capsys.readouterr()
    assert "branches on cpu: " in captured.out and "(partial: see below)" in captured.out
    assert "addmm_default" in captured.out and "greedy_by_size" in captured.out  # the rest, estimated
    (line,) = captured.err.strip().splitlines()  # which node, and why
    assert line.startswith("srbench estimate: branches: node _local_scalar_dense_default: tracing stopped at ")
    assert "test_estimate.py" in line and "`if y.sum() > 0:" in line and "what follows is not estimated" in line


def test_cli_prints_a_table_and_totals(capsys):
    assert main(["estimate", "--model", "mlp", "--batch", "3", "--planners", "greedy_by_size"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert header.split()[:4] == ["STEP", "NODE", "OP", "KIND"]
    assert "mlp on cpu: " in out and "eager peak, requested" in out and "greedy_by_size" in out


def test_cli_json_for_cuda(capsys):
    assert main(["estimate", "--model", "mlp", "--device", "cuda", "--planners", "naive", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "cuda" and data["eager"]["allocator"] == "cuda-caching"
    assert data["plans"][0]["planner"] == "naive"
    linear = next(node for node in data["nodes"] if node["op"] == "aten.linear.default")
    assert linear["kind"] == "allocates" and linear["block_bytes"] % 512 == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "no_such_model"], "no_such_model"),
        (["--model", "mlp", "--device", "tpu"], "--device must be cpu or cuda"),
        (["--model", "mlp", "--device", "cuda:abc"], "--device must be cpu or cuda (cuda:N for one of several)"),
        (["--model", "mlp", "--device", "cuda:-1"], "got 'cuda:-1'"),
        (["--model", "mlp", "--planners", "gredy"], "unknown planner 'gredy'"),
        # Fake tensors hold any batch, but not one whose bytes pass int64: torch's error was a traceback.
        (
            ["--model", "mlp", "--batch", str(2**62)],
            "model 'mlp': cannot make its example inputs at batch 4,611,686,018,427,387,904: RuntimeError: "
            "Storage size calculation overflowed",
        ),
        (["--model", "mlp", "--batch", str(10**20)], "cannot make its example inputs at batch 100,000,"),
    ],
)
def test_cli_bad_input_is_one_line(capsys, argv, message):
    assert main(["estimate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
