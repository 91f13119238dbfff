"""Seeded example inputs shared by every provider.

Shape 0 is a case's default shape; shape 1 is a second one for dynamic-shape runs: another
sequence length or image size where the model has one, otherwise twice the batch. Each shape
draws from its own fixed seed, so the same call always returns the same tensors.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from srbench.inputs import Inputs

MakeInputs = Callable[[int, "int | None"], "Inputs | tuple[torch.Tensor, ...]"]


def generator(shape: int) -> torch.Generator:
    """The random stream of one example shape (fixed seeds, independent of the global one)."""
    return torch.Generator().manual_seed(1234 + shape)


def batch_for(shape: int, batch: int | None, default: int, *, doubled: bool) -> int:
    """The batch of ``shape``: the override or the default, doubled for shape 1 when ``doubled``."""
    base = default if batch is None else batch
    if not isinstance(base, int) or base < 1:
        raise ValueError(f"batch size must be a positive int, got {base!r}")
    return 2 * base if shape == 1 and doubled else base


def images(batch_size: int, sizes: tuple[int, int] = (224, 160), channels: int = 3) -> MakeInputs:
    """One NCHW image batch; shape 1 has the second size (twice the batch when both sizes are equal)."""

    def make(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
        size = sizes[shape]
        count = batch_for(shape, batch, batch_size, doubled=sizes[0] == sizes[1])
        return (torch.randn(count, channels, size, size, generator=generator(shape)),)

    return make


def tokens(vocab_size: int, batch_size: int, lengths: tuple[int, int] = (128, 64)) -> MakeInputs:
    """One ``[batch, length]`` int64 batch of token ids; shape 1 has the second length."""

    def make(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
        count = batch_for(shape, batch, batch_size, doubled=lengths[0] == lengths[1])
        return (torch.randint(0, vocab_size, (count, lengths[shape]), generator=generator(shape)),)

    return make


def features(width: int, batch_size: int) -> MakeInputs:
    """One ``[batch, width]`` float batch; shape 1 doubles the batch."""

    def make(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
        count = batch_for(shape, batch, batch_size, doubled=True)
        return (torch.randn(count, width, generator=generator(shape)),)

    return make


def sequences(width: int, batch_size: int, lengths: tuple[int, int] = (128, 64)) -> MakeInputs:
    """One ``[batch, length, width]`` float batch (embedded tokens); shape 1 has the second length."""

    def make(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
        count = batch_for(shape, batch, batch_size, doubled=lengths[0] == lengths[1])
        return (torch.randn(count, lengths[shape], width, generator=generator(shape)),)

    return make


def masked_tokens(
    vocab_size: int, batch_size: int, lengths: tuple[int, int] = (128, 64), padding: int = 8
) -> MakeInputs:
    """A transformers call: ``input_ids=[batch, length]`` int64 token ids and ``attention_mask``
    of the same shape, as keyword arguments, the way transformers models are called. The last
    sequence of the batch is right-padded (its last ``padding`` positions masked out, as the
    shorter sequences of a batch are), so the mask changes the answer; shape 1 has the second
    length."""

    def make(shape: int, batch: int | None) -> Inputs:
        count = batch_for(shape, batch, batch_size, doubled=lengths[0] == lengths[1])
        length = lengths[shape]
        ids = torch.randint(0, vocab_size, (count, length), generator=generator(shape))
        mask = torch.ones(count, length, dtype=torch.int64)
        mask[-1, length - min(padding, length - 1) :] = 0
        return Inputs.of(input_ids=ids, attention_mask=mask)

    return make
