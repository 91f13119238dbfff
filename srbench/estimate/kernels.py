"""What backend kernels do that no trace on fake tensors shows, as observed; and where each
figure of a node's temporaries comes from.

Two sources of temporaries, named in every estimate:

- ``DECOMPOSITION``: the op's composite kernel, traced on fake tensors
  (:mod:`srbench.estimate.ops`), creates results it throws away (``max_pool2d``'s indices,
  ``layer_norm``'s statistics). Exact for the shapes at hand, on any device, for ops whose
  composite eager runs as traced.
- ``OBSERVED``: memory a backend kernel allocates for itself (oneDNN's reordered copies), and
  result storages larger than the result, which only a real run shows. :data:`RULES` holds those,
  each a formula over the node's fake values with the observation it rests on; they were read off
  ``srbench observe`` on this project's machines (torch 2.13.0 CPU build with oneDNN, 2 cores),
  and ``tests/test_observe_kernels.py`` checks each against the observer.

Known and left out (the observer shows them; no rule here): the CPU flash-attention kernel's
per-thread scratch (``scaled_dot_product_attention``: 49,664 bytes at 2 threads for BERT-mini's
shapes, which grows with the thread count), the CPU ``lstm`` kernel's gate buffers (2.8 MiB for
``lstm_lm``), a few hundred bytes of index arithmetic in ``embedding_bag``, and every CUDA
kernel's workspace (cuDNN, cuBLAS): no GPU was at hand to observe one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.fx

from srbench.estimate.sizes import ZERO, ByteCount
from srbench.memory.lifetimes import storage_nbytes

if TYPE_CHECKING:
    from srbench.estimate.ops import OpFacts


class TemporarySource(enum.Enum):
    NONE = "none"
    DECOMPOSITION = "decomposition"
    OBSERVED = "observed"


def _value(node: torch.fx.Node, index: int) -> object:
    argument = node.args[index] if index < len(node.args) else None
    return argument.meta.get("val") if isinstance(argument, torch.fx.Node) else argument


def _no_extra(node: torch.fx.Node) -> Mapping[int, int]:
    return {}


def _none(node: torch.fx.Node) -> int | None:
    return None


@dataclass(frozen=True)
class KernelRule:
    """What the kernel of ``ops`` on ``device`` does beyond its schema: ``temporary(node)``, the
    most bytes of its own allocations alive at once (None: the rule does not apply to this
    node), and ``extra_result_bytes(node)``, bytes its results' storages hold beyond their
    shapes, by result index. ``evidence`` is what was observed."""

    ops: frozenset[str]
    device: str
    evidence: str
    temporary: Callable[[torch.fx.Node], int | None] = _none
    extra_result_bytes: Callable[[torch.fx.Node], Mapping[int, int]] = field(default=_no_extra)


def _onednn_convolution(node: torch.fx.Node) -> int | None:
    """oneDNN reorders the input (unless it has fewer than 8 channels), the weight and the output
    into blocked layouts, all alive at once; a strided 1x1 convolution also keeps one subsampled
    copy of the input per thread (the input's channels at the output's spatial size, plus 128
    bytes once); then it frees them but the blocked output and allocates the result to reorder
    into. Beyond its result the node so needs the larger of (all those copies less one output) and
    one output. On one thread an unstrided 1x1 convolution runs on the plain layout: nothing.
    The thread count is this process's (``torch.get_num_threads()``): estimate under the one
    the model will run with."""
    x, weight, out = _value(node, 0), _value(node, 1), node.meta.get("val")
    if not all(isinstance(v, torch.Tensor) for v in (x, weight, out)):
        return None
    assert isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor) and isinstance(out, torch.Tensor)
    if x.dim() != 4 or x.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return None
    threads = torch.get_num_threads()
    stride = _value(node, 3)
    strided = isinstance(stride, (list, tuple)) and any(s > 1 for s in stride)
    pointwise = tuple(weight.shape[2:]) == (1, 1)
    if pointwise and not strided and threads == 1:
        return 0
    total = storage_nbytes(weight) + storage_nbytes(out) + (storage_nbytes(x) if x.shape[1] >= 8 else 0)
    if pointwise and strided:
        total += threads * x.shape[1] * out.shape[2] * out.shape[3] * x.element_size() + 128
    result = storage_nbytes(out)
    return int(max(total - result, result))


def _batch_norm_statistics(node: torch.fx.Node) -> int | None:
    """The CPU kernel computes two per-channel float vectors even in eval mode."""
    x = _value(node, 0)
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        return None
    return 2 * int(x.shape[1]) * 4


def _linear_folding_a_copy(node: torch.fx.Node) -> int | None:
    """On a non-contiguous input of 3 or more dimensions, eager's ``matmul`` folds the batch
    dimensions into one matrix product, copying the input contiguous first. (Under a dispatch
    mode, as when traced on fake tensors, ``matmul`` takes its tensor-subclass branch instead,
    a batched product into a temporary the size of the result: the decomposition is wrong here.)"""
    x = _value(node, 0)
    if not isinstance(x, torch.Tensor) or x.dim() < 3 or x.is_contiguous():
        return None
    return int(x.numel() * x.element_size())


def _offset2bag(node: torch.fx.Node) -> Mapping[int, int]:
    """Modes mean and max keep ``offset2bag`` in a storage one index longer than its shape."""
    indices, mode = _value(node, 1), _value(node, 4)
    if not isinstance(indices, torch.Tensor) or mode in (None, 0):
        return {}
    return {1: indices.element_size()}


RULES: tuple[KernelRule, ...] = (
    KernelRule(
        ops=frozenset({"aten.conv2d.default", "aten.convolution.default"}),
        device="cpu",
        temporary=_onednn_convolution,
        evidence="srbench observe --model resnet50 / resnet18 / mobilenet_v2 at 1 and 2 threads: every float32 "
        "conv2d allocates reordered copies of its input, weight and output inside mkldnn_convolution (but "
        "unstrided 1x1 ones on one thread); exact on every convolution of ResNet-18 and ResNet-50 at 1 and 2 "
        "threads; at 2 threads MobileNetV2's 1x1 expansions after a residual add allocated nothing (the rule "
        "over-estimates them)",
    ),
    KernelRule(
        ops=frozenset({"aten.linear.default"}),
        device="cpu",
        temporary=_linear_folding_a_copy,
        evidence="srbench observe --model lstm_lm: the decoder's linear on the LSTM's batch-first (non-contiguous) "
        "output allocates one contiguous copy of its input (131,072 bytes) and nothing else",
    ),
    KernelRule(
        ops=frozenset({"aten.batch_norm.default"}),
        device="cpu",
        temporary=_batch_norm_statistics,
        evidence="srbench observe --model resnet18: every batch_norm allocates two `empty` float32 tensors of "
        "one value per channel and frees them before it returns",
    ),
    KernelRule(
        ops=frozenset(
            {
                "aten.embedding_bag.default",
                "aten.embedding_bag.padding_idx",
                "aten._embedding_bag.default",
                "aten._embedding_bag_forward_only.default",
            }
        ),
        device="cpu",
        extra_result_bytes=_offset2bag,
        evidence="deep_and_wide's embedding_bag (mode mean): offset2bag of shape [n] lives in a storage of n + 1 "
        "indices (the CPU kernel sizes it n + 1, then shrinks its shape); the meta kernel allocates n",
    ),
)


def rule_for(node: torch.fx.Node, device: str) -> KernelRule | None:
    op, kind = str(node.target), device.split(":")[0]
    return next((rule for rule in RULES if op in rule.ops and rule.device == kind), None)


def known_temporary(node: torch.fx.Node, device: str, facts: OpFacts) -> tuple[ByteCount, TemporarySource]:
    """The node's temporaries and their source: an observed rule when one applies (the kernel's own
    allocations include what its decomposition shows), else the decomposition's."""
    rule = rule_for(node, device)
    nbytes = rule.temporary(node) if rule is not None else None
    if nbytes is not None:
        return ByteCount(nbytes), TemporarySource.OBSERVED
    if facts.temporary != ZERO:
        return facts.temporary, TemporarySource.DECOMPOSITION
    return ZERO, TemporarySource.NONE


def extra_result_bytes(node: torch.fx.Node, device: str) -> Mapping[int, int]:
    rule = rule_for(node, device)
    return rule.extra_result_bytes(node) if rule is not None else {}
