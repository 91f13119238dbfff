"""The observer (``srbench.observe``): every allocation of a run attributed to the node that made it,
on hand-made graphs with known allocations and on srbench's static runtime, and ``srbench observe``."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from srbench.cli import main
from srbench.graph import capture
from srbench.observe import observe_eager
from srbench.observe.cuda import with_history
from srbench.observe.observation import observe_run
from srbench.observe.picture import live_bytes_figure
from srbench.observe.record import Allocation, NodeSpan, RecordedRun
from srbench.observe.report import workspaces
from srbench.observe.sidebyside import side_by_side
from srbench.observe.static import observe_static
from srbench.static import AmbientAutocastError, StaticModule, StaticOptions
from srbench.static.choose import RunAs
from srbench.zoo import load_zoo

WORKSPACE_FLOATS = 1000


@torch.library.custom_op("srbench_test::doubled_with_workspace", mutates_args=())
def doubled_with_workspace(x: torch.Tensor) -> torch.Tensor:
    """Twice ``x``; the kernel allocates a scratch buffer of 1000 floats for itself and frees it."""
    scratch = torch.empty(WORKSPACE_FLOATS)
    scratch.fill_(2.0)
    return x * scratch[0]


@doubled_with_workspace.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Known(nn.Module):
    """Every allocation is known: 256 floats at ``mul``, 512 at ``ones``, a scalar at each sum,
    and the custom op's result plus its 4,000-byte scratch buffer. (``x + 1`` would also allocate
    the Python scalar as a tensor, 8 bytes, and its float copy, 4 bytes: eager does.)"""

    def forward(self, x):
        a = x * x
        b = torch.ones(512)
        c = doubled_with_workspace(a)
        return a.sum() + b.sum() + c.sum()


@pytest.fixture(scope="module")
def known():
    inputs = (torch.randn(256),)
    return observe_eager(capture(Known(), inputs, name="known"), inputs)


def test_a_known_allocation_is_attributed_to_its_node(known):
    mul = known.node("mul")
    assert (mul.allocations, mul.output_bytes, mul.temporary_bytes) == (1, 256 * 4, 0)
    ones = known.node("ones")
    assert (ones.allocations, ones.output_bytes) == (1, 512 * 4)
    assert known.node("sum_1").output_bytes == 4
    assert known.between_nodes == 0  # everything the run allocated happened inside a node


def test_an_op_with_an_internal_temporary_shows_it_as_such(known):
    custom = known.node("doubled_with_workspace")
    assert custom.output_bytes == 256 * 4  # its result outlives it
    assert custom.temporary_bytes == WORKSPACE_FLOATS * 4  # the scratch buffer, made and freed inside it
    (workspace,) = custom.workspaces
    assert workspace.nbytes == WORKSPACE_FLOATS * 4 and workspace.op == "empty"
    if torch.__version__ < "2.14":  # torch 2.14's profiler records no range for a Python custom op
        assert workspace.ops[0] == "srbench_test::doubled_with_workspace"
    assert ("empty", 1, 4000, 4000) in workspaces(known)


def test_the_peak_counts_what_is_alive_at_once(known):
    # x * x (1 KiB) and ones (2 KiB) are alive when the custom op holds its result and scratch
    assert known.peak_bytes == 256 * 4 + 512 * 4 + 256 * 4 + WORKSPACE_FLOATS * 4
    assert known.node("doubled_with_workspace").live_bytes == known.peak_bytes


def test_max_pool2d_drops_its_indices_inside_the_node():
    model = nn.MaxPool2d(2)
    inputs = (torch.randn(1, 4, 8, 8),)
    observed = observe_eager(capture(model, inputs, name="pool"), inputs)
    pool = observed.node("max_pool2d")
    assert pool.output_bytes == 4 * 4 * 4 * 4
    assert pool.temporary_bytes == 4 * 4 * 4 * 8  # the int64 indices
    assert [w.op for w in pool.workspaces] == ["max_pool2d_with_indices"]


@pytest.mark.parametrize("name", ["mlp", "resnet18", "bert_encoder"])
@pytest.mark.parametrize("cleanup", [False, True], ids=["keep", "cleanup"])
def test_managed_tensors_cost_no_allocation_in_steady_state(name, cleanup):
    case = load_zoo().get(name)
    inputs = case.example_inputs(0)
    options = StaticOptions(cleanup_activations=cleanup, manage_output_tensors=not cleanup)
    module = StaticModule(case.model(), inputs, options, name=name)
    observed = observe_static(module, inputs)
    into_slab = [plan.node.name for plan in module.prepared.plans if plan.how is RunAs.OUT]
    assert into_slab, "some nodes run as out variants"
    # an output hosting intermediates is the run's allocation (the caller's tensor), made at the
    # first node that writes into it (srbench.memory.hosting)
    steps = [node.name for node in module.prepared.captured.graph.nodes]
    hosting = module.prepared.hosting.plans if module.prepared.hosting else ()
    allocating = {steps[plan.allocate]: plan.host.capacity for plan in hosting}
    seen = {node.node: node for node in observed.nodes}
    for name_ in into_slab:
        expected = allocating.get(name_, 0)
        assert seen[name_].output_bytes == expected, (
            f"{name_} allocated {seen[name_].output_bytes} bytes, not {expected}"
        )
    if cleanup:  # the slab is the runtime's own allocation, made outside every node
        assert observed.between_nodes_bytes == module.prepared.slab_bytes
    else:
        assert observed.between_nodes == 0


def test_the_mlp_allocates_nothing_at_all_with_managed_outputs_and_a_kept_slab():
    case = load_zoo().get("mlp")
    inputs = case.example_inputs(0)
    options = StaticOptions(cleanup_activations=False, manage_output_tensors=True)
    observed = observe_static(StaticModule(case.model(), inputs, options, name="mlp"), inputs)
    assert observed.allocations == 0 and observed.peak_bytes == 0


def test_hidden_workspaces_of_resnet18_are_onednn_reorders():
    case = load_zoo().get("resnet18")
    inputs = case.example_inputs(0)
    observed = observe_eager(capture(case.model(), inputs, name="resnet18"), inputs)
    listed = {op: (count, largest) for op, count, largest, _ in workspaces(observed)}
    convolutions = [node for node in observed.nodes if node.node.startswith("conv2d")]
    assert len(convolutions) == 20
    assert all(node.workspaces and node.workspaces[0].op == "mkldnn_convolution" for node in convolutions)
    assert listed["mkldnn_convolution"][1] == 512 * 512 * 3 * 3 * 4  # the largest: a 3x3 512-channel weight
    assert listed["max_pool2d_with_indices"] == (1, 64 * 56 * 56 * 8)


@pytest.mark.parametrize("name", ["mlp", "resnet18", "bert_encoder"])
def test_estimated_planned_and_observed_bytes_side_by_side(name):
    sbs = side_by_side(load_zoo().get(name))
    assert sbs.rows
    for row in sbs.rows:
        assert row.eager is not None, row.node
        assert row.estimated_output == row.eager.output_bytes, row.node
        if row.planned_bytes:  # what srbench's slab holds for the node, the node does not allocate
            # (an out variant writes it; a fallback's result served from the slab is not allocated)
            assert row.srbench_how in ("out", "served"), row.node
            assert row.srbench is not None and row.srbench.output_bytes == 0, row.node
            assert row.planned_bytes >= row.estimated_output, row.node
    assert sbs.estimate.eager.peak_requested == sbs.eager.peak_bytes
    # the bound covers every intermediate srbench plans: the slab's and those hosted in outputs
    assert sbs.slab_bytes + sbs.hosted_bytes >= sbs.lower_bound


def test_the_picture_draws_both_runtimes_observed_the_estimate_the_plan_and_the_lower_bound():
    sbs = side_by_side(load_zoo().get("mlp"))
    (axes,) = live_bytes_figure(sbs).axes
    lines = {line.get_label(): [value * 1024 * 1024 for value in line.get_ydata()] for line in axes.get_lines()}
    assert set(lines) == {
        "eager observed",
        "srbench observed",
        "eager estimated (fake tensors)",
        "planned intermediates alive",
        "srbench plan (slab)",
        "lower bound",
    }
    assert sbs.eager is not None and sbs.srbench is not None
    assert max(lines["eager observed"]) == pytest.approx(max(node.live_bytes for node in sbs.eager.nodes))
    assert max(lines["srbench observed"]) == pytest.approx(max(node.live_bytes for node in sbs.srbench.nodes))
    assert max(lines["eager estimated (fake tensors)"]) == pytest.approx(sbs.estimate.eager.peak_allocated)
    assert lines["srbench plan (slab)"][0] == pytest.approx(sbs.slab_bytes)
    assert lines["lower bound"][0] == pytest.approx(sbs.lower_bound)
    assert max(lines["planned intermediates alive"]) == pytest.approx(sbs.lower_bound)


def test_on_the_cpu_every_allocation_is_what_was_requested_and_nothing_is_reserved(known):
    assert all(a.requested_bytes is None and a.reserved_change == 0 for a in known.run.allocations)
    assert all(n.requested_bytes == n.allocated_bytes and n.reserved_bytes == 0 for n in known.nodes)
    assert known.reserved_bytes == 0


def test_the_cuda_allocators_history_gives_each_profiled_block_its_request_and_segments():
    """The profiler reports CUDA blocks (rounded to 512 bytes); the allocator's history, recorded
    over the same run, says what each asked for and which opened a segment. Matched by address
    in order, also when an address is reused. (A hand-written trace in the snapshot's format: the
    real allocator needs a GPU, tests/test_observe_cuda.py.)"""
    mib = 1024 * 1024

    def block(index, nbytes, address, node, start, end=None, freed_in=None):
        return Allocation(index, nbytes, address, node, (), None, end is not None, freed_in, None, start, end)

    run = RecordedRun(
        "cuda",
        (NodeSpan("mul", 0, 10), NodeSpan("ones", 10, 20), NodeSpan("add", 20, 30)),
        (
            block(0, 4096, 0xA000, "mul", 1, end=21, freed_in="add"),
            block(1, 1536, 0xB000, "ones", 11),
            block(2, 4096, 0xA000, "add", 22),  # the block mul's result had, cached and reused
        ),
    )
    trace = [
        {"action": "segment_alloc", "addr": 0xA000, "size": 2 * mib},
        {"action": "alloc", "addr": 0xA000, "size": 4000},
        {"action": "alloc", "addr": 0xB000, "size": 1200},
        {"action": "free_requested", "addr": 0xA000, "size": 4000},
        {"action": "free_completed", "addr": 0xA000, "size": 4000},
        {"action": "alloc", "addr": 0xA000, "size": 3900},
    ]
    observed = observe_run(with_history(run, trace), runtime="eager", model="hand")
    mul, ones, add = (observed.node(name) for name in ("mul", "ones", "add"))
    assert (mul.allocated_bytes, mul.requested_bytes, mul.reserved_bytes) == (4096, 4000, 2 * mib)
    assert (ones.allocated_bytes, ones.requested_bytes, ones.reserved_bytes) == (1536, 1200, 0)
    assert (add.allocated_bytes, add.requested_bytes, add.reserved_bytes) == (4096, 3900, 0)
    assert observed.reserved_bytes == 2 * mib
    # an allocation the history missed keeps the block as its only figure
    unmatched = with_history(run, trace[:2]).allocations
    assert [a.requested_bytes for a in unmatched] == [4000, None, None] and unmatched[2].requested == 4096


def test_cli_prints_the_table_and_writes_the_picture(tmp_path, capsys):
    picture = tmp_path / "mlp.png"
    assert main(["observe", "--model", "mlp", "--picture", str(picture), "--no-cleanup-activations"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["STEP", "NODE", "OP", "EST"]
    assert "eager peak, observed" in out and "srbench peak, observed" in out
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_cli_json_for_one_runtime(tmp_path, capsys):
    picture = tmp_path / "mlp.png"
    assert main(["observe", "--model", "mlp", "--runtime", "eager", "--json", "--picture", str(picture)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["srbench"] is None and data["eager"]["allocations"] > 0
    assert [node["node"] for node in data["nodes"]][:2] == ["linear", "relu"]
    assert data["nodes"][0]["eager"]["output_bytes"] == data["nodes"][0]["estimated_output"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: observe --device cuda runs there")
def test_cli_observing_on_cuda_without_a_gpu_is_one_line(capsys):
    assert main(["observe", "--model", "mlp", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "no CUDA device here" in err and len(err.strip().splitlines()) == 1


def test_cli_unknown_model_is_one_line(capsys):
    assert main(["observe", "--model", "no_such_model"]) == 2
    err = capsys.readouterr().err
    assert "no_such_model" in err and len(err.strip().splitlines()) == 1


def test_cli_a_batch_its_inputs_cannot_be_made_at_is_one_line(tmp_path, capsys):
    """torch's overflow making the inputs ended in a traceback; nothing is written."""
    picture = tmp_path / "never.png"
    assert main(["observe", "--model", "mlp", "--batch", str(10**20), "--picture", str(picture)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("srbench observe: model 'mlp': cannot make its example inputs at batch 100,000,")
    assert not picture.exists()


def test_cli_a_picture_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    """``--picture /tmp`` ended in IsADirectoryError's traceback from the atomic rename."""
    assert main(["observe", "--model", "mlp", "--runtime", "eager", "--picture", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"srbench observe: {tmp_path}: Is a directory"]


def test_compare_report_shows_the_live_bytes_picture_of_observed_models(tmp_path, capsys):
    argv = ["compare", "--models", "mlp", "--planners", "greedy_by_size", "--out", str(tmp_path)]
    assert main([*argv, "--observe", "mlp"]) == 0
    assert (tmp_path / "compare-figures" / "observed-mlp.png").read_bytes().startswith(b"\x89PNG")
    page = (tmp_path / "compare.html").read_text()
    assert "mlp: live bytes, estimated, planned and observed" in page and "data:image/png;base64," in page
    assert json.loads((tmp_path / "compare.json").read_text())["failures"] == []


def test_compare_refuses_an_unknown_observed_model_before_comparing(tmp_path, capsys):
    """A misspelt ``--observe`` name was found only after the whole comparison ran, and exited 1."""
    argv = ["compare", "--models", "mlp", "--planners", "greedy_by_size", "--out", str(tmp_path)]
    assert main([*argv, "--observe", "mpl"]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("srbench compare: unknown model 'mpl'; did you mean 'mlp'?")
    assert captured.out == "" and list(tmp_path.iterdir()) == []


def test_asv_tracks_the_estimated_peak_beside_the_observed_one():
    from pathlib import Path

    from srbench.asv_tracking.tracked_metrics import TRACKED_METRICS, measure
    from srbench.estimate import estimate_case
    from srbench.suites import load_suite

    quick = load_suite(Path(__file__).resolve().parents[1] / "suites" / "quick.yaml")
    spec = next(case for case in quick.cases if case.model == "mlp" and case.runtime == "srbench")
    record = measure(spec).record
    tracked = {metric.key for metric in TRACKED_METRICS}
    assert {"estimated_peak_bytes", "peak_bytes", "planned_bytes"} <= tracked
    expected = estimate_case(load_zoo().get("mlp"), batch=spec.batch).eager.peak_requested
    assert record["estimated_peak_bytes"] == expected > 0
    assert record["peak_bytes"] > 0 and record["planned_bytes"] > 0


def test_frees_the_profiler_missed_are_taken_from_the_cuda_allocators_history():
    """On an H200 (torch 2.11) the profiler reported each CUDA allocation and no free: the blocks
    looked alive to the end of the run, and the peak was every block's sum. The history orders
    each free among the allocations; the free is placed just before the next allocation (or at
    the end of the run), so the bytes alive at every allocation are exact. (Hand-written trace, as
    above, of the sequence seen there: ``mul``'s block freed after ``sum_1`` and reused by
    ``sum_2``.)"""

    def block(index, nbytes, address, node, start):
        return Allocation(index, nbytes, address, node, (), None, False, None, None, start, None)

    spans = ("mul", 0, 9), ("ones", 10, 19), ("sum_1", 20, 29), ("sum_2", 30, 39), ("add", 40, 49)
    run = RecordedRun(
        "cuda",
        tuple(NodeSpan(*span) for span in spans),
        (
            block(0, 4096, 0xA000, "mul", 1),
            block(1, 1536, 0xB000, "ones", 11),
            block(2, 512, 0xB600, "sum_1", 21),
            block(3, 512, 0xA000, "sum_2", 31),  # mul's block, freed after sum_1 and reused
            block(4, 512, 0xA200, "add", 41),
        ),
    )
    trace = [
        {"action": "alloc", "addr": 0xA000, "size": 4000},
        {"action": "alloc", "addr": 0xB000, "size": 1200},
        {"action": "alloc", "addr": 0xB600, "size": 4},
        {"action": "free_requested", "addr": 0xA000, "size": 4000},
        {"action": "free_completed", "addr": 0xA000, "size": 4000},
        {"action": "alloc", "addr": 0xA000, "size": 4},
        {"action": "free_completed", "addr": 0xB000, "size": 1200},
        {"action": "alloc", "addr": 0xA200, "size": 4},
        {"action": "free_completed", "addr": 0xB600, "size": 4},
    ]
    assert observe_run(run, runtime="eager", model="hand").peak_bytes == 4096 + 1536 + 512 * 3  # no frees seen
    allocations = with_history(run, trace).allocations
    # each free at the end of the node that allocated last before it
    assert [(a.freed, a.freed_in, a.end_ns) for a in allocations] == [
        (True, "sum_1", 29),
        (True, "sum_2", 39),
        (True, "add", 49),
        (False, None, None),
        (False, None, None),
    ]
    observed = observe_run(with_history(run, trace), runtime="eager", model="hand")
    assert observed.peak_bytes == 4096 + 1536 + 512  # at sum_1, as the estimate has it
    assert observed.node("sum_2").live_bytes == 1536 + 512 + 512


@pytest.mark.parametrize("warmup", [0, 1])
def test_observing_under_the_callers_autocast_is_refused_as_a_run_is(warmup):
    """The observed run calls the bound program past ``run``'s check: with no warm-up run before
    it, a call under the caller's autocast ran uncast (float32 where eager gives bfloat16)."""
    case = load_zoo().get("mlp")
    inputs = case.example_inputs(0)
    module = StaticModule(case.model(), inputs, StaticOptions(), name="mlp")
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(AmbientAutocastError, match="bfloat16"):
        observe_static(module, inputs, warmup=warmup)
    assert not torch.is_autocast_enabled("cpu")
    assert len(observe_static(module, inputs, warmup=warmup).nodes) > 0
