"""What eager PyTorch answers at inference that ``torch.export`` does not trace, put in the graph.

``nn.TransformerEncoder`` in eval mode, given a ``src_key_padding_mask`` whose padding is at the
end of each sequence, runs its layers on a nested tensor of the unpadded tokens and pads the
result with zeros (``to_padded_tensor(0.0)``, then its ``norm``): padded positions come out as
``norm(0)``. ``torch.export`` traces the padded path instead (its mask check cannot run under
tracing), where padded positions hold whatever attention made of them. Unpadded positions agree
(padded keys are masked either way), so a graph that computes the padded path and then sets the
padded positions as eager does gives eager's answer. :func:`eager_inference_paths` adds those ops
while the model is exported, through a forward hook on each such encoder; it follows eager's own
conditions (``TransformerEncoder.forward``), including the check, made on the data at every call
where eager makes it, that the padding is at the end of every sequence.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def _takes_nested_path(encoder: nn.TransformerEncoder, src: torch.Tensor, mask: Any) -> bool:
    """Whether eager's ``TransformerEncoder.forward`` converts a call with a padding mask to a
    nested tensor, except for its check of the padding's alignment (made on the data, in the graph)."""
    first = encoder.layers[0]
    tensors = (src, *(p for p in first.parameters()))
    return (
        torch.backends.mha.get_fastpath_enabled()
        and bool(getattr(encoder, "use_nested_tensor", False))
        and not first.training
        and src.dim() == 3
        and mask is None
        and not torch.is_autocast_enabled()
        and src.device.type in ("cpu", "cuda", "xpu")
        and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
    )


def _padded_like_eager(
    encoder: nn.TransformerEncoder, args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor
) -> torch.Tensor | None:
    bound = inspect.signature(encoder.forward).bind(*args, **kwargs).arguments
    src, mask, padding = bound.get("src"), bound.get("mask"), bound.get("src_key_padding_mask")
    if not isinstance(src, torch.Tensor) or not isinstance(padding, torch.Tensor):
        return None
    if not _takes_nested_path(encoder, src, mask):
        return None
    valid = padding.logical_not()  # as eager: a float mask's zeros are the tokens kept
    padded = valid.logical_not()
    if getattr(encoder, "mask_check", True):  # eager nests only if padding ends every sequence
        kept = valid.to(torch.int64)
        padded = padded & (kept.cummin(dim=1).values == kept).all()
    if not encoder.layers[0].self_attn.batch_first:
        padded = padded.transpose(0, 1)
    padded = padded.unsqueeze(-1)
    if encoder.norm is None:
        return output.masked_fill(padded, 0.0)
    return torch.where(padded, encoder.norm(output.new_zeros(1, 1, output.shape[-1])), output)


def _is_stock_encoder(module: nn.Module) -> bool:
    return isinstance(module, nn.TransformerEncoder) and type(module).forward is nn.TransformerEncoder.forward


@contextmanager
def eager_inference_paths(model: nn.Module) -> Iterator[None]:
    """While the body runs (a ``torch.export`` of ``model``), each stock ``nn.TransformerEncoder``
    of ``model`` sets padded positions as its eager nested-tensor path does (module docstring)."""

    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
        assert isinstance(module, nn.TransformerEncoder)
        return _padded_like_eager(module, args, kwargs, output) if isinstance(output, torch.Tensor) else None

    handles = [
        module.register_forward_hook(hook, with_kwargs=True) for module in model.modules() if _is_stock_encoder(module)
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
