"""The input signature of a prepared program: the structure of a call, and what each leaf is.

``torch.export`` takes a call's positional and keyword arguments as pytrees of tensors and Python
scalars, flattens them, and gives the graph one placeholder per leaf, in flattening order: a
tensor placeholder, or a constant for a scalar (the value is baked into the graph). An
:class:`InputSignature` records the same flattening for one call: the structure (the pytree spec
of ``(args, kwargs)``, keyword arguments in name order, so their order at a call does not
matter, except those a ``**kwargs`` parameter collects: :class:`~srbench.inputs.KeywordOrder`),
one :class:`TensorLeaf` or :class:`ScalarLeaf` per leaf, a readable path for each
(``pair['a'][0]``, ``attention_mask``), and which tensors share memory.

Two calls with equal :attr:`~InputSignature.key` run the same program; a call of another key
gets a program of its own, whatever differs: shapes, strides, scalar values, memory sharing
(:func:`sharing_of`) with each other and with the model's parameters and buffers
(:func:`state_sharing_of`), and also structure, a leaf's kind (tensor or scalar type) or dtype, as
``torch.compile`` compiles anew where a guard fails. A tensor on another device than the
example's is refused (:meth:`~InputSignature.device_difference`): a runtime's memory lives on one
device. :meth:`~InputSignature.difference` names how a call differs from the example where the
model cannot take it.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.nn.parameter import is_lazy
from torch.utils import _pytree as pytree

from srbench.inputs import KEYWORDS_BY_NAME, Inputs, KeywordOrder, flatten_with_paths
from srbench.static.errors import InputSignatureError
from srbench.static.placement import program_device
from srbench.static.value_keys import contexts_key, value_key


@dataclass(frozen=True)
class TensorLeaf:
    """A tensor argument: the generated code checks its shape, strides, dtype and device, its
    lazy conjugation and negation bits (:attr:`lazy_bits`), and its exact class (``cls``: a
    tensor subclass, MONAI's ``MetaTensor``, makes eager's results of its class, which a program
    prepared for plain tensors does not; a call passing one is prepared, and refused where its
    outputs would be of a subclass: :mod:`srbench.graph.output_types`)."""

    shape: torch.Size
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    conjugated: bool = False  # ``is_conj()``: a lazily conjugated complex view (``z.conj()``)
    negated: bool = False  # ``is_neg()``: a lazily negated view (the imaginary part of one)
    cls: type = torch.Tensor

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorLeaf:
        return cls(
            tensor.shape, tensor.stride(), tensor.dtype, tensor.device, tensor.is_conj(), tensor.is_neg(), type(tensor)
        )

    @property
    def lazy_bits(self) -> bool:
        """Whether the dtype can carry the bits: a program traced on a tensor without them takes
        their absence for granted (``z.real`` decomposes to ``view_as_real(z)``, which refuses a
        conjugated view), so a call passing ``z.conj()`` gets a program of its own. Complex and
        floating dtypes only (a real tensor is negated lazily as a conjugated one's ``imag``)."""
        return self.dtype.is_complex or self.dtype.is_floating_point

    @property
    def key(self) -> tuple:
        return (self.shape, self.stride, self.dtype, self.device, self.conjugated, self.negated, self.cls)

    def kind(self) -> str:
        return "a tensor" if self.cls is torch.Tensor else _article(self.cls.__name__)

    def describe(self) -> str:
        kind = "" if self.cls is torch.Tensor else f"{self.cls.__name__} "
        return f"{kind}{str(self.dtype).removeprefix('torch.')}{list(self.shape)} on {self.device}"


@dataclass(frozen=True)
class ScalarLeaf:
    """A Python scalar (``int``, ``float``, ``bool``, ``str``, ``None``...): ``torch.export``
    specialises the graph to its value, so another value gets a program of its own."""

    value: Any

    @property
    def is_nan(self) -> bool:
        return isinstance(self.value, float) and math.isnan(self.value)

    @property
    def key(self) -> Hashable:
        """Equal for values that behave alike (:func:`~srbench.static.value_keys.value_key`): two
        NaNs (a NaN is unequal to itself, and every call passing ``float("nan")`` was prepared
        anew, a program more per call, never freed); not zeros of two signs, nor ``1`` and
        ``True``."""
        return value_key(self.value)

    def kind(self) -> str:
        return "None" if self.value is None else _article(type(self.value).__name__)

    def describe(self) -> str:
        return repr(self.value)


Leaf = TensorLeaf | ScalarLeaf


def _article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _leaf(value: Any) -> Leaf:
    return TensorLeaf.of(value) if isinstance(value, torch.Tensor) else ScalarLeaf(value)


def positional_names(function: Callable[..., Any], count: int) -> list[str]:
    """Names of the first ``count`` positional parameters of ``function`` (``args[i]`` where it
    has none: ``*args``, or a signature Python cannot read)."""
    names = []
    with contextlib.suppress(TypeError, ValueError):
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                names.append(parameter.name)
    return [names[i] if i < len(names) else f"args[{i}]" for i in range(count)]


def _storage_start(leaf: Any) -> int | None:
    """Where the storage of a tensor leaf starts; ``None`` for a scalar, an empty storage and a
    tensor with no storage of its own to share: a FakeTensor (its data_ptr warns: the module
    refuses it), a sparse or oneDNN tensor (torch raises on their storage), a lazy module's
    parameter not yet made (capture refuses it, naming it)."""
    if (
        not isinstance(leaf, torch.Tensor)
        or isinstance(leaf, FakeTensor)
        or is_lazy(leaf)
        or leaf.layout != torch.strided
        or leaf.is_mkldnn
    ):
        return None
    storage = leaf.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else None


def sharing_of(*leaves: Any) -> tuple[tuple[int, int], ...]:
    """How the tensors among ``leaves`` share memory: per leaf, the index of the first leaf whose
    storage it shares (its own index if none, and for scalars) and its storage offset relative
    to that leaf's. With shapes and strides, this says exactly which bytes two inputs share: the
    same tensor twice is ``(i, 0)``, a view one row further ``(i, row)``."""
    first: dict[int, tuple[int, int]] = {}
    result = []
    for index, leaf in enumerate(leaves):
        start = _storage_start(leaf)
        if start is None:
            result.append((index, 0))
            continue
        owner, offset = first.setdefault(start, (index, leaf.storage_offset()))
        result.append((owner, leaf.storage_offset() - offset))
    return tuple(result)


def state_storages(model: torch.nn.Module) -> dict[int, int]:
    """Where the storage of each of ``model``'s parameters and buffers starts, mapped to its
    position among them: what :func:`state_sharing_of` looks a call's tensors up in."""
    starts: dict[int, int] = {}
    for index, tensor in enumerate((*model.parameters(), *model.buffers())):
        start = _storage_start(tensor)
        if start is not None:
            starts.setdefault(start, index)
    return starts


def state_sharing_of(leaves: Sequence[Any], state: Mapping[int, int]) -> tuple[int, ...]:
    """Per leaf, the position of the model's parameter or buffer whose storage it shares
    (``state``: :func:`state_storages`), -1 if none (and for scalars): a caller passing the
    model's own buffer as an argument (or a view of it). The graph names the argument and the
    buffer apart, where one's write changes what the other reads."""
    return tuple(-1 if (start := _storage_start(leaf)) is None else state.get(start, -1) for leaf in leaves)


@dataclass(frozen=True)
class InputSignature:
    """One call's structure and leaves; see the module docstring."""

    structure: pytree.TreeSpec
    leaves: tuple[Leaf, ...]
    paths: tuple[str, ...]
    sharing: tuple[tuple[int, int], ...]
    argument_names: tuple[str, ...] = ()  # the model's positional parameters, for messages
    # the keywords whose order the model sees, in the call's order (the guard checks it)
    ordered_keywords: tuple[str, ...] = ()
    state_sharing: tuple[int, ...] = ()  # per leaf, the model's tensor it shares memory with
    # torch's default dtype at the call: what forward's factory calls (``torch.zeros(4)``,
    # ``torch.tensor([1.5])``) make, which the program was traced with
    default_dtype: torch.dtype = torch.float32

    @classmethod
    def of(
        cls,
        inputs: Inputs,
        names: Sequence[str] = (),
        keyword_order: KeywordOrder = KEYWORDS_BY_NAME,
        state: Mapping[int, int] | None = None,
    ) -> InputSignature:
        """The signature of ``inputs``; ``names`` are the model's positional parameter names
        (for readable paths); ``keyword_order``: which keywords' order the model sees; ``state``:
        the model's parameters and buffers by storage (:func:`state_storages`)."""
        arranged = keyword_order.arrange(inputs)
        flat, structure = flatten_with_paths((arranged.args, dict(arranged.kwargs)))
        leaves = [leaf for _, leaf in flat]
        paths = tuple(_readable(keys, names) for keys, _ in flat)
        for path, leaf in zip(paths, leaves):
            if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
                raise InputSignatureError(
                    f"input {path} is a {str(leaf.layout).removeprefix('torch.')} tensor: the static runtime "
                    "takes strided (dense) tensors as inputs (sparse results of ops inside the model are supported)"
                )
        return cls(
            structure,
            tuple(_leaf(leaf) for leaf in leaves),
            paths,
            sharing_of(*leaves),
            tuple(names),
            keyword_order.seen(arranged.kwargs),
            state_sharing_of(leaves, state or {}),
            torch.get_default_dtype(),
        )

    @property
    def key(self) -> tuple:
        """Equal for calls one program serves: the structure is compared by ``==``, and the values
        baked into it from its contexts (a ``pytree.register_constant`` constant) by
        :func:`~srbench.static.value_keys.contexts_key` too, which tells apart what ``==`` does
        not (``Config(0.0)`` and ``Config(-0.0)``)."""
        leaves = tuple(leaf.key for leaf in self.leaves)
        return (
            self.structure,
            contexts_key(self.structure),
            leaves,
            self.sharing,
            self.state_sharing,
            self.default_dtype,
        )

    @property
    def shares_memory(self) -> bool:
        """Whether two tensor arguments share memory (the same tensor twice, or views of one)."""
        return any(owner != index for index, (owner, _) in enumerate(self.sharing))

    @property
    def shares_state(self) -> bool:
        """Whether a tensor argument shares memory with the model's parameters or buffers."""
        return any(position >= 0 for position in self.state_sharing)

    @property
    def tensor_leaves(self) -> tuple[TensorLeaf, ...]:
        return tuple(leaf for leaf in self.leaves if isinstance(leaf, TensorLeaf))

    def describe(self) -> str:
        """``(x: float32[2, 3] on cpu, n: 2, *, mask: float32[2, 3] on cpu)``."""
        parts = [f"{path}: {leaf.describe()}" for path, leaf in zip(self.paths, self.leaves)]
        return "(" + ", ".join(parts) + ")"

    def difference(self, given: InputSignature) -> str | None:
        """The first way ``given`` differs from this signature in structure, a leaf's kind (a
        tensor's class among them), dtype or device, or ``None`` (shapes, strides, scalar values
        and memory sharing are not counted): what a call the model cannot take is told, beside
        the model's own error."""
        shape = _structure_difference(given.structure, self.structure, "", self.argument_names)
        if shape is not None:
            return shape
        for path, want, got in zip(self.paths, self.leaves, given.leaves):
            if isinstance(want, TensorLeaf) and isinstance(got, TensorLeaf):
                if got.cls is not want.cls:
                    return f"{path} must be {want.kind()}, got {got.kind()}"
                if got.dtype != want.dtype:
                    return f"{path} must have dtype {want.dtype}, got {got.dtype}"
                if got.device != want.device:
                    return f"{path} must be on {want.device}, got {got.device}"
            elif want.kind() != got.kind() and not (
                isinstance(want, ScalarLeaf) and isinstance(got, ScalarLeaf) and None in (want.value, got.value)
            ):
                return f"{path} must be {want.kind()}, got {got.kind()}"
        return None

    def device_difference(
        self, given: InputSignature, device: torch.device, weights: torch.device | None
    ) -> str | None:
        """Why no program can serve ``given`` on the runtime's ``device`` (its memory's: where the
        example's program runs, :mod:`srbench.static.placement`), with the model's weights on
        ``weights`` (their first accelerator), or ``None``. Two checks, before anything runs:

        - each tensor must be on the device of the example's tensor at its path, and on ``device``
          at a path the example lacks: a program binds each input where it was prepared;
        - a program for the call must run on ``device``. This only fires for an example that mixes
          devices, called in another structure that leaves out every tensor of the example's on
          ``device`` (the call's tensors all on the CPU, an example's on CUDA): the program
          prepared for that call would run elsewhere, and the runtime's memory is on ``device``.
        """
        devices = {path: leaf.device for path, leaf in zip(self.paths, self.leaves) if isinstance(leaf, TensorLeaf)}
        tensors = [(path, leaf) for path, leaf in zip(given.paths, given.leaves) if isinstance(leaf, TensorLeaf)]
        for path, leaf in tensors:
            want = devices.get(path, device)
            if leaf.device != want:
                return f"{path} must be on {want}, got {leaf.device}"
        runs_on = program_device((leaf.device for _, leaf in tensors), weights)
        if runs_on != device:
            return (
                f"a program for this call would run on {runs_on} (its tensors' and the weights' device), "
                f"and the runtime's memory is on {device} (where the example's program runs)"
            )
        return None


def _readable(keys: tuple[Any, ...], names: Sequence[str]) -> str:
    """``pair['a'][0]`` for the pytree keys of a leaf of ``(args, kwargs)``."""
    top, first, rest = keys[0].idx, keys[1], keys[2:]
    if top == 0:
        index = first.idx
        root = names[index] if index < len(names) else f"args[{index}]"
    else:
        root = str(first.key)
    return root + pytree.keystr(rest)


def _kind(spec: pytree.TreeSpec) -> str:
    if spec.is_leaf():
        return "a value"
    kind = spec.context if isinstance(spec.context, type) else spec.type
    return _article(str(getattr(kind, "__name__", kind)))


def _structure_difference(
    got: pytree.TreeSpec, want: pytree.TreeSpec, path: str, names: Sequence[str] = ()
) -> str | None:
    """Where ``got`` is shaped unlike ``want``, with the path (``""`` at the root ``(args, kwargs)``,
    whose positional arguments are called ``names``)."""
    if not path:  # the root: positional arguments, then keyword arguments
        args_got, kwargs_got = got.children()
        args_want, kwargs_want = want.children()
        if args_got.num_children != args_want.num_children:
            return f"expected {args_want.num_children} positional arguments, got {args_got.num_children}"
        if kwargs_got.context != kwargs_want.context:
            missing = sorted(set(kwargs_want.context) - set(kwargs_got.context))
            extra = sorted(set(kwargs_got.context) - set(kwargs_want.context))
            return "keyword arguments differ: " + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unexpected {', '.join(extra)}" if extra else "",
                    ""
                    if missing or extra
                    else f"given in the order {', '.join(kwargs_got.context)}, which the model "
                    f"sees (its **kwargs), prepared in {', '.join(kwargs_want.context)}",
                )
                if part
            )
        pairs = [
            (a, b, names[i] if i < len(names) else f"args[{i}]")
            for i, (a, b) in enumerate(zip(args_got.children(), args_want.children()))
        ]
        pairs += [(a, b, str(k)) for k, a, b in zip(kwargs_want.context, kwargs_got.children(), kwargs_want.children())]
        return next((d for a, b, p in pairs if (d := _structure_difference(a, b, p)) is not None), None)
    if want.is_leaf() and got.is_leaf():
        return None
    if got.is_leaf() or want.is_leaf() or got.type is not want.type or got.context != want.context:
        if not got.is_leaf() and got.type is dict and want.type is dict:
            return f"{path} must be a dict with keys {want.context}, got keys {got.context}"
        return f"{path} must be {_kind(want)}, got {_kind(got)}"
    if got.num_children != want.num_children:
        return f"{path} must have {want.num_children} elements, got {got.num_children}"
    for key, a, b in zip(_child_keys(want), got.children(), want.children()):
        found = _structure_difference(a, b, path + key)
        if found is not None:
            return found
    return None


def _child_keys(spec: pytree.TreeSpec) -> list[str]:
    """The path of each child of ``spec``'s node, as :func:`_readable` writes it (``['a']``,
    ``[0]``, ``.tokens`` for a named tuple's or a dataclass' field): the node rebuilt with
    placeholder leaves (0: a dataclass leaves a field of None out) and flattened one level with
    its keys; ``[i]`` where its type has none, or its own unflatten refuses the placeholders (the
    message must not fail where the call did)."""
    node = pytree.SUPPORTED_NODES.get(spec.type)
    if node is not None and node.flatten_with_keys_fn is not None:
        with contextlib.suppress(Exception):
            rebuilt = pytree.tree_unflatten([0] * spec.num_leaves, spec)
            return [pytree.keystr((key,)) for key, _ in node.flatten_with_keys_fn(rebuilt)[0]]
    return [f"[{index}]" for index in range(spec.num_children)]
