"""The arguments of one call of a model, as ``torch.export`` takes them.

A model is called as ``model(*args, **kwargs)`` where each argument is any pytree (tuples, lists,
dicts, ``None``, registered containers) of tensors and Python scalars: transformers models take
``input_ids=..., attention_mask=...``. :class:`Inputs` holds one such call, so that every stage
that prepares or measures a model (zoo cases, runtime plugins, the static runtime, the
equivalence protocol) passes example calls the same way, and every runtime is then called the
way the model is: ``runtime(*args, **kwargs)``.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree


@dataclass(frozen=True, eq=False)
class Inputs:
    """One call's positional ``args`` and keyword ``kwargs`` (any pytrees of tensors and scalars)."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            raise TypeError(f"Inputs.args must be a tuple, got {type(self.args).__name__}")
        if not isinstance(self.kwargs, Mapping) or not all(isinstance(key, str) for key in self.kwargs):
            raise TypeError("Inputs.kwargs must be a mapping from argument names to values")
        object.__setattr__(self, "kwargs", dict(self.kwargs))

    @classmethod
    def of(cls, *args: Any, **kwargs: Any) -> Inputs:
        """The inputs of the call ``model(*args, **kwargs)``."""
        return cls(args, kwargs)

    @classmethod
    def coerce(cls, value: Inputs | tuple) -> Inputs:
        """``value`` as :class:`Inputs`: a tuple is the positional arguments of a call without
        keywords (as ``torch.export.export(model, args)`` takes them)."""
        if isinstance(value, Inputs):
            return value
        if isinstance(value, tuple):
            return cls(value)
        raise TypeError(
            f"example inputs must be srbench.inputs.Inputs or a tuple of positional arguments, "
            f"got {type(value).__name__}"
        )

    def leaves(self) -> list[Any]:
        """Every leaf (tensors and scalars), flattened as ``torch.export`` flattens the call."""
        return pytree.tree_leaves((self.args, dict(self.kwargs)))

    def call(self, function: Callable[..., Any]) -> Any:
        """``function(*args, **kwargs)``."""
        return function(*self.args, **self.kwargs)

    def map_tensors(self, function: Callable[[torch.Tensor], Any]) -> Inputs:
        """The same call with ``function`` applied to every tensor (scalars and structure kept: a
        ``torch.Size`` stays one, where pytree would rebuild it as a plain tuple)."""
        args, kwargs = pytree.tree_map_only(
            torch.Tensor, function, (self.args, dict(self.kwargs)), is_leaf=lambda leaf: isinstance(leaf, torch.Size)
        )
        return Inputs(args, kwargs)

    def clone(self) -> Inputs:
        """A copy whose tensors are new (a call that writes its inputs leaves these alone), with
        the call's memory sharing kept: the same tensor passed twice is one new tensor, views of
        one tensor are views of one new storage, at the same offsets and strides."""
        tensors: dict[int, torch.Tensor] = {}
        storages: dict[int, torch.UntypedStorage] = {}

        def copy(tensor: torch.Tensor) -> torch.Tensor:
            if id(tensor) not in tensors:
                tensors[id(tensor)] = _copy_sharing(tensor, storages)
            return tensors[id(tensor)]

        return self.map_tensors(copy)

    def to(self, device: str | torch.device) -> Inputs:
        return self.map_tensors(lambda tensor: tensor.to(device))

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the call, in pytree order."""
        return [leaf for leaf in pytree.tree_leaves((self.args, dict(self.kwargs))) if isinstance(leaf, torch.Tensor)]

    def cuda_device_indices(self) -> list[int]:
        """The CUDA devices the call's tensors are on, as ``torch.random.fork_rng(devices=...)``
        takes them: forking only those keeps the other devices' generators uninitialised."""
        return sorted({t.device.index or 0 for t in self.tensors() if t.device.type == "cuda"})

    def with_paths(self) -> list[tuple[str, Any]]:
        """Every leaf with its path: ``args[0]``, ``args[1]['mask']``, ``kwargs['scale']``."""
        flat, _ = flatten_with_paths({"args": self.args, "kwargs": dict(self.kwargs)})
        return [(_path(keys), leaf) for keys, leaf in flat]


@dataclass(frozen=True)
class KeywordOrder:
    """Which keyword arguments' order a model sees. Python binds a keyword argument to a named
    parameter by name, so those may be written in any order: they are taken in name order, and
    one program serves every order. Those a ``**kwargs`` parameter collects keep the call's order,
    which ``forward`` may iterate (``torch.cat(list(parts.values()))``): their order is part of the
    call, and a program traced through one order answers wrongly for another (it did: srbench
    took every keyword in name order, and ``model(x, b=b, a=a)`` ran the program of
    ``model(x, a=a, b=b)``). A ``forward`` behind a ``functools.wraps`` decorator is called as the
    wrapper (``*args, **kwargs``), which sees the call's order whatever the wrapped function
    names. A hook registered ``with_kwargs`` is given the whole keyword dict, as
    is a module's own ``__call__``: then every keyword's order is seen, as where the signature
    cannot be read. ``torch.export`` flattens keyword arguments in the order given; the runtimes
    that flatten calls (the static runtime, the TorchScript and ONNX Runtime peers) flatten them in
    this arrangement."""

    collects: bool = False  # whether a ``**kwargs`` parameter (or a hook) sees keywords in call order
    named: frozenset[str] = frozenset()  # the parameters a keyword binds to by name

    @classmethod
    def of(cls, model: Callable[..., Any]) -> KeywordOrder:
        """The keyword order ``model`` (a module: its ``forward``, its hooks, its own ``__call__``)
        sees."""
        hooks = [
            getattr(model, table, None) for table in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs")
        ]
        own_call = isinstance(model, torch.nn.Module) and type(model).__call__ is not torch.nn.Module.__call__
        if any(hooks) or own_call:  # given the keyword dict as the call wrote it
            return cls(collects=True)
        try:
            # the parameters of the function called: a ``functools.wraps`` wrapper's own, not the
            # wrapped ``forward``'s that ``inspect.signature`` shows by default (a wrapper taking
            # ``**kwargs`` sees their order whatever ``forward`` names)
            forward = getattr(model, "forward", model)
            parameters = inspect.signature(forward, follow_wrapped=False).parameters.values()
        except (TypeError, ValueError):
            return cls(collects=True)
        by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return cls(
            collects=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters),
            named=frozenset(p.name for p in parameters if p.kind in by_name),
        )

    @property
    def sees_every_order(self) -> bool:
        """Whether the order of every keyword is seen (a hook or an own ``__call__`` given them, a
        ``forward`` taking ``**kwargs`` alone)."""
        return self.collects and not self.named

    def seen(self, keys: Iterable[str]) -> tuple[str, ...]:
        """Those of ``keys`` (a call's keywords, in its order) whose order the model sees."""
        return tuple(key for key in keys if key not in self.named) if self.collects else ()

    def arrange(self, inputs: Inputs) -> Inputs:
        """``inputs`` with the keywords bound by name first, in name order, then those whose order
        the model sees, in the call's: the order a program of theirs is captured and flattened in."""
        seen = self.seen(inputs.kwargs)
        by_name = sorted(key for key in inputs.kwargs if key not in seen)
        return Inputs(inputs.args, {key: inputs.kwargs[key] for key in (*by_name, *seen)})


# the arrangement for a callee that sees no keyword's order: every keyword in name order
KEYWORDS_BY_NAME = KeywordOrder()


def flatten_with_paths(tree: Any) -> tuple[list[tuple[pytree.KeyPath, Any]], pytree.TreeSpec]:
    """``torch.utils._pytree.tree_flatten_with_path``, also for node types registered without
    key functions, which ``register_pytree_node`` leaves optional: diffusers registers every
    model's output class (``BaseOutput``: ``UNet2DOutput``, ``DecoderOutput``...) so, and torch's
    version raised ``ValueError`` on them, so the signature taken at prepare, the equivalence,
    aliasing and layout checks all failed on a diffusers model's output or on such an input.
    Such a node's children are named by the keys its flatten function gives as context (a list of
    names, as ``_dict_flatten`` gives), else by position."""
    _, structure = pytree.tree_flatten(tree)
    return list(_key_paths((), tree)), structure


def _key_paths(path: pytree.KeyPath, tree: Any) -> Iterator[tuple[pytree.KeyPath, Any]]:
    handler = pytree.SUPPORTED_NODES.get(pytree._get_node_type(tree))
    if handler is None:
        yield path, tree
        return
    if handler.flatten_with_keys_fn is not None:
        keyed = handler.flatten_with_keys_fn(tree)[0]
    else:
        children, context = handler.flatten_fn(tree)
        named = isinstance(context, (list, tuple)) and len(context) == len(children)
        named = named and all(isinstance(name, str) for name in context)
        keyed = [
            (pytree.MappingKey(context[index]) if named else pytree.SequenceKey(index), child)
            for index, child in enumerate(children)
        ]
    for key, child in keyed:
        yield from _key_paths((*path, key), child)


def _path(keys: tuple[Any, ...]) -> str:
    """``args[1]['a']`` from pytree keys (the first is the dict key ``args``/``kwargs``)."""
    first, rest = keys[0], keys[1:]
    return str(getattr(first, "key", first)) + pytree.keystr(rest)


def _copy_sharing(tensor: torch.Tensor, storages: dict[int, torch.UntypedStorage]) -> torch.Tensor:
    """A copy of ``tensor`` into a copy of its storage, made once per storage (``storages``).
    A lazily conjugated or negated view (``z.conj()``, its ``imag``) is copied as such: its
    storage holds the values before the lazy operation, so a plain tensor over the copied
    storage held the conjugate (or the negation) of what was passed, and every run took it. A
    tensor subclass is copied as one (:func:`_of_subclass`)."""
    copied = copy_with_layout(tensor, storages)
    if copied is None:
        return tensor.detach().clone()
    copied = _of_subclass(tensor, copied)
    if tensor.is_leaf:
        copied.requires_grad_(tensor.requires_grad)
    if tensor.is_conj():
        copied = copied.conj()
    if tensor.is_neg():
        copied = torch._neg_view(copied)
    return copied


def copy_with_layout(tensor: torch.Tensor, storages: dict[int, torch.UntypedStorage]) -> torch.Tensor | None:
    """A plain tensor over a copy of ``tensor``'s storage (made once per storage, kept in
    ``storages``) at its storage offset, shape and strides, so views of one storage stay views of
    one copy and a sliced or transposed tensor keeps its layout (``clone()`` makes those
    contiguous); ``None`` where ``tensor`` has no such storage to copy (not strided, quantized,
    empty)."""
    if tensor.layout != torch.strided or tensor.is_quantized or not tensor.untyped_storage().nbytes():
        return None
    storage = tensor.untyped_storage()
    if storage.data_ptr() not in storages:
        storages[storage.data_ptr()] = storage.clone()
    copied = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return copied.set_(storages[storage.data_ptr()], tensor.storage_offset(), tensor.shape, tensor.stride())


def _of_subclass(tensor: torch.Tensor, copied: torch.Tensor) -> torch.Tensor:
    """``copied`` (a plain tensor over the copied storage) as an instance of ``tensor``'s class,
    with a deep copy of its attributes, where that class is a ``__torch_function__`` subclass
    (MONAI's ``MetaTensor``, ``nn.Parameter``): the copy was a plain tensor, so eager and every
    runtime the protocol compares were given a plain tensor where the caller passed a MetaTensor,
    and eager's answer (a MetaTensor, its ``affine`` the input's) was never asked for. A subclass
    with a ``__torch_dispatch__`` of its own (a wrapper: its data is not its storage) is left as
    ``copied``; ``torch.Tensor._make_subclass`` makes no view (``_base`` stays ``None``)."""
    kind = type(tensor)
    if kind is torch.Tensor or kind.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        return copied
    made = torch.Tensor._make_subclass(kind, copied)
    made.__dict__.update(copy.deepcopy(tensor.__dict__))
    return made
