"""Alias and lifetime analysis on hand-made graphs: one test per rule of the foundation issue."""

from __future__ import annotations

import operator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from srbench.graph import capture
from srbench.memory.lifetimes import LifetimeError, analyze_lifetimes, storage_nbytes
from srbench.memory.records import check_records


def analyse(module: torch.nn.Module, *inputs: torch.Tensor, decompose: bool = False, alignment: int = 64):
    graph = capture(module.eval(), inputs, decompose=decompose).graph
    analysis = analyze_lifetimes(graph, alignment=alignment)
    step = {node.name: index for index, node in enumerate(graph.nodes)}
    return graph, analysis, step


def by_id(records):
    return {record.id: record for record in records}


class ViewOfViewOutlivesBase(torch.nn.Module):
    def forward(self, x):
        a = x * 2
        flat = a.view(-1)  # view of a
        tail = flat[1:]  # view of a view
        b = a + 1  # the last direct use of a
        c = b * 3
        return tail.sum() + c.sum()  # the view of a view is read long after


def test_view_of_a_view_extends_its_base_past_the_last_direct_use():
    graph, analysis, step = analyse(ViewOfViewOutlivesBase(), torch.randn(4, 4))
    records = by_id(analysis.records)
    assert "view" not in records and "slice_1" not in records  # views take no memory
    assert analysis.storage_of["view"] == "mul" and analysis.storage_of["slice_1"] == "mul"
    sum_of_tail = next(n for n in graph.nodes if n.op == "call_function" and n.args[0].name == "slice_1")
    assert records["mul"].first == step["mul"]
    assert records["mul"].last == step[sum_of_tail.name] > step["add"]


class OutputViewOfIntermediate(torch.nn.Module):
    def forward(self, x):
        a = x * 2
        b = a + 1
        return a.t(), b.sum()


def test_output_that_is_a_view_of_an_intermediate_lives_to_the_end_reported_apart():
    graph, analysis, _ = analyse(OutputViewOfIntermediate(), torch.randn(3, 5))
    outputs = by_id(analysis.output_records)
    assert "mul" in outputs and "mul" not in by_id(analysis.records)
    assert outputs["mul"].last == analysis.num_steps - 1 == len(graph.nodes) - 1
    assert analysis.storage_of["t"] == "mul"
    assert "sum_1" in outputs  # a plain output too
    assert "add" in by_id(analysis.records)  # an intermediate that no output aliases is planned


class InputsParamsBuffersConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("offset", torch.randn(4))
        self.constant = torch.tensor([1.0, 2.0, 3.0, 4.0])  # lifted by export as a constant

    def forward(self, x):
        y = x @ self.weight + self.offset + self.constant
        return y, x.view(-1), self.weight.t()


def test_inputs_parameters_buffers_and_constants_are_not_planned():
    graph, analysis, _ = analyse(InputsParamsBuffersConstants(), torch.randn(2, 4))
    placeholders = [node.name for node in graph.nodes if node.op == "placeholder"]
    planned = {record.id for record in analysis.all_records}
    assert len(placeholders) >= 4
    assert not planned & set(placeholders)
    assert set(placeholders) <= analysis.unplanned
    # outputs aliasing an input or a parameter own no record either
    assert analysis.storage_of["view"] == "x"
    assert analysis.storage_of["t"] in placeholders


class InPlace(torch.nn.Module):
    def forward(self, x):
        a = x + 1
        a.mul_(2)
        a.relu_()
        b = a * 3
        c = b - 1
        return c


def test_in_place_ops_alias_their_mutated_argument():
    _graph, analysis, step = analyse(InPlace(), torch.randn(4))
    records = by_id(analysis.records)
    assert analysis.storage_of["mul_"] == "add" and analysis.storage_of["relu_"] == "add"
    assert "mul_" not in records and "relu_" not in records
    assert records["add"].last == step["mul"]  # read through the in-place results until b
    assert analysis.outputs_of["mul_"] == (None,)


def test_in_place_op_on_an_input_plans_nothing():
    class MutateInput(torch.nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    _, analysis, _ = analyse(MutateInput(), torch.randn(3))
    assert analysis.storage_of["add_"] == "x"
    assert {record.id for record in analysis.all_records} == {"mul"}


class MultiOutput(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.topk(x, 2)
        low, high = torch.split(x * 2, 2, dim=1)
        largest, _ = torch.max(x, dim=1)  # the indices are never read
        return values + high, indices, largest + low.sum()


def test_multi_output_ops_allocate_one_storage_per_result():
    graph, analysis, step = analyse(MultiOutput(), torch.randn(3, 4))
    topk = analysis.outputs_of["topk"]
    assert len(topk) == 2 and None not in topk
    all_records = by_id(analysis.all_records)
    assert all_records[topk[1]].size == 64  # 3x2 int64 = 48 bytes, aligned
    assert topk[1] in by_id(analysis.output_records)
    # split returns views of its input: no storage of its own
    assert analysis.outputs_of["split"] == (None, None)
    for getitem in (n for n in graph.nodes if n.target is operator.getitem and n.args[0].name == "split"):
        assert analysis.storage_of[getitem.name] == "mul"
    # an unread result still needs memory while the op writes it
    unread = analysis.outputs_of["max_1"][1]
    assert all_records[unread].first == all_records[unread].last == step["max_1"]


def test_result_without_getitem_node_gets_a_record_of_its_own():
    graph = capture(MultiOutput().eval(), (torch.randn(3, 4),)).graph
    graph.eliminate_dead_code()  # drops the getitem nobody reads
    analysis = analyze_lifetimes(graph)
    step = {node.name: index for index, node in enumerate(graph.nodes)}
    assert analysis.outputs_of["max_1"][1] == "max_1.1"
    unread = by_id(analysis.records)["max_1.1"]
    assert unread.first == unread.last == step["max_1"]
    assert unread.size == 64  # 3 int64 indices


def test_decomposed_layer_norm_has_three_results():
    _, analysis, step = analyse(torch.nn.LayerNorm(8), torch.randn(2, 8), decompose=True)
    results = analysis.outputs_of["native_layer_norm"]
    assert len(results) == 3
    records = by_id(analysis.all_records)
    assert records[results[0]].size == 64  # 2x8 float32
    assert records[results[1]].first == records[results[1]].last == step["native_layer_norm"]


def test_sizes_follow_strides_not_numel():
    class Padded(torch.nn.Module):
        def forward(self, x):
            out = torch.empty_strided((4, 30), (64, 1))
            out.copy_(x)
            return out * 1

    _, analysis, _ = analyse(Padded(), torch.randn(4, 30))
    records = by_id(analysis.all_records)
    # numel says 480 bytes; the strided extent is (3*64 + 29 + 1) floats = 888 bytes -> 896
    assert records["empty_strided"].size == 896
    assert records["mul"].size == 512


def test_sizes_are_aligned_and_dtype_aware():
    class Mixed(torch.nn.Module):
        def forward(self, x):
            return (x > 0).logical_not().sum(), x.double() * 2

    _, analysis, _ = analyse(Mixed(), torch.randn(10))
    records = by_id(analysis.all_records)
    assert records["gt"].size == 64  # 10 bools
    assert records["mul"].size == 128  # 10 float64 = 80 bytes
    _, wide, _ = analyse(Mixed(), torch.randn(10), alignment=256)
    assert all(record.size % 256 == 0 for record in wide.all_records)


def test_storage_nbytes_respects_storage_offset_and_strides():
    base = torch.empty(100)
    assert storage_nbytes(torch.empty(5, 5).t()) == 100
    assert storage_nbytes(base[10:20]) == 400  # the whole storage a view keeps alive
    assert storage_nbytes(torch.empty(0, 3)) == 0


def test_records_are_valid_and_ordered_by_first_step():
    _, analysis, _ = analyse(MultiOutput(), torch.randn(3, 4))
    check_records(analysis.all_records)
    firsts = [record.first for record in analysis.records]
    assert firsts == sorted(firsts)
    assert all(0 <= r.first <= r.last < analysis.num_steps for r in analysis.all_records)


def _hand_made_graph(with_meta: bool = True) -> torch.fx.Graph:
    """x -> a = x*2 -> opaque python op o(a) -> ... c = o * (x+1): a must live as long as o."""

    def opaque(t):
        return t

    graph = torch.fx.Graph()
    mode = FakeTensorMode()
    x = graph.placeholder("x")
    a = graph.call_function(torch.ops.aten.mul.Tensor, (x, 2))
    o = graph.call_function(opaque, (a,))
    b = graph.call_function(torch.ops.aten.add.Tensor, (x, 1))
    c = graph.call_function(torch.ops.aten.mul.Tensor, (o, b))
    graph.output((c,))
    a.name, b.name, c.name = "a", "b", "c"
    if with_meta:
        fake_x = mode.from_tensor(torch.randn(4))
        with mode:
            x.meta["val"] = fake_x
            for node in (a, o, b, c):
                node.meta["val"] = torch.empty(4)
    return graph


def test_opaque_ops_are_not_planned_and_keep_their_inputs_alive():
    graph = _hand_made_graph()
    analysis = analyze_lifetimes(graph)
    step = {node.name: index for index, node in enumerate(graph.nodes)}
    records = by_id(analysis.all_records)
    assert "opaque" not in records and "opaque" in analysis.unplanned
    assert records["a"].last == step["c"] > step["b"]  # extended through the opaque result's use


def test_node_without_metadata_is_named_in_the_error():
    with pytest.raises(LifetimeError, match=r"'a'.*meta"):
        analyze_lifetimes(_hand_made_graph(with_meta=False))


def test_ops_without_results_need_no_metadata():
    """Assertion ops (core-ATen graphs of transformers models carry aten._assert_tensor_metadata)
    return nothing and carry no meta["val"]; they are skipped, not an error."""
    graph = _hand_made_graph()
    a = next(node for node in graph.nodes if node.name == "a")
    with graph.inserting_after(a):
        check = graph.call_function(torch.ops.aten._assert_tensor_metadata.default, (a, None, None, torch.float32))
    assert "val" not in check.meta
    analysis = analyze_lifetimes(graph)
    assert {record.id for record in analysis.all_records} >= {"a", "b"}
