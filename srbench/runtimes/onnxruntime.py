"""ONNX Runtime as a peer runtime: the model exported with ``torch.onnx.export(..., dynamo=True)``
and run by an ``onnxruntime.InferenceSession`` on the CPU execution provider.

ONNX Runtime is the other widely used static runtime with a memory planner of its own: with
``enable_mem_pattern`` it records the allocation pattern of the first run and serves later runs
of the same shapes from one block, and at graph optimisation level "all" it folds batch norm into
convolutions, fuses attention and pointwise tails and pre-packs weights, which is what srbench's
runtime is measured against. None of srbench's memory options apply (``honours`` is empty).

Like srbench, it prepares one program per input signature: the session is made for the example
inputs, and inputs of another shape (or dtype) get their own export and session on first sight,
cached by signature, so no ONNX model is ever run with shapes it was not exported for. Calls are
flattened as ``torch.export`` flattens them (keyword arguments in name order): the leaves the
ONNX graph reads are its inputs.

Needs the optional extra ``onnx`` (``onnxruntime``, ``onnx``, ``onnxscript``): without
``onnxruntime`` preparing raises :class:`~srbench.runtimes.RuntimeUnavailable` saying so, and
suites skip its cases with that reason. A
model that ``torch.onnx`` cannot export, or whose exported graph ONNX Runtime refuses, raises it
too, with the first line of the reason.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind, TensorArgument
from torch.utils import _pytree as pytree

from srbench.formatting import error_summary, first_line
from srbench.inputs import Inputs, KeywordOrder
from srbench.runtimes import EagerMode, RuntimeOptions, RuntimeUnavailable, UnsupportedRuntime

# Loggers of the exporter and its ONNX libraries: they report, at INFO and WARNING, every skipped
# optional op library (torchvision) and every constant they do not fold, on every export.
_EXPORT_LOGGERS = ("torch.onnx", "onnxscript", "onnx_ir")
_ORT_ERRORS_ONLY = 3  # onnxruntime's log severity: 0 verbose ... 3 error


def _innermost(error: BaseException) -> str:
    """The first line of the innermost cause: the exporter wraps the reason (``No ONNX function
    found for ...``) in errors whose own first lines only say which step failed. Where the
    innermost is wrapped twice, its wrapper's line follows in parentheses, saying where it
    happened (``'int' object has no attribute 'name'`` alone does not: ``(Error when translating
    node return (add, 3))`` does)."""
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    where = first_line(chain[-2]).split(". See the stack trace")[0] if len(chain) > 2 else ""
    return error_summary(chain[-1]) + (f" ({where})" if where else "")


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _EXPORT_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _signature(inputs: Inputs) -> tuple:
    """What a session is exported for: the call's structure, and per leaf its shape and dtype (a
    tensor) or its value (a scalar, which the export bakes in)."""
    leaves, structure = pytree.tree_flatten((inputs.args, dict(inputs.kwargs)))
    return structure, tuple((x.shape, x.dtype) if isinstance(x, torch.Tensor) else (type(x), x) for x in leaves)


def _placeholder_names(program: Any) -> dict[str, str]:
    """The ONNX graph's input names, each to the exported program's input it stands for. They
    differ where an input is also returned as is: ONNX forbids a graph input as a graph output,
    so the exporter renames the input (``x`` becomes ``x_orig``) and returns an Identity of it
    under the old name; its IR value still records the FX placeholder (``meta["node"]``)."""
    names = {}
    for value in program.model.graph.inputs:
        node = value.meta.get("node") if hasattr(value, "meta") else None
        names[value.name] = node.name if isinstance(node, torch.fx.Node) else value.name
    return names


def _onnx_value(tensor: torch.Tensor) -> Any:
    """A tensor as the exported ONNX graph takes it: a complex one as its real view."""
    if tensor.is_complex():
        return torch.view_as_real(tensor.resolve_conj()).numpy()
    return tensor.numpy()


class _Session:
    """One exported model and its session, for one input signature."""

    def __init__(self, model: torch.nn.Module, inputs: Inputs, options: RuntimeOptions):
        import onnxruntime

        try:
            with _quiet_export(), torch.no_grad():
                program = torch.onnx.export(
                    model, inputs.args, kwargs=dict(inputs.kwargs), dynamo=True, verbose=False, external_data=False
                )
        except Exception as error:  # the exporter raises many types; all mean "cannot export"
            raise UnsupportedRuntime(f"torch.onnx.export cannot export the model: {_innermost(error)}") from error
        if program is None:
            raise UnsupportedRuntime("torch.onnx.export returned no program")
        exported = program.exported_program
        if exported is None:
            raise UnsupportedRuntime("torch.onnx.export kept no exported program (needed for the output structure)")
        written = [
            spec.target
            for spec in exported.graph_signature.output_specs
            if spec.kind in (OutputKind.USER_INPUT_MUTATION, OutputKind.BUFFER_MUTATION)
        ]
        if written:  # the exported ONNX graph returns the user outputs only: the writes would be lost
            raise UnsupportedRuntime(
                f"the model writes {', '.join(map(str, written))} in place, and the ONNX graph that "
                "torch.onnx.export makes drops such writes (it returns the model's outputs only)"
            )
        settings = onnxruntime.SessionOptions()
        settings.intra_op_num_threads = options.threads
        settings.inter_op_num_threads = 1
        settings.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        settings.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        settings.enable_mem_pattern = True  # its own memory planning: one block per input shape
        settings.enable_cpu_mem_arena = True
        settings.log_severity_level = _ORT_ERRORS_ONLY
        try:
            self.session = onnxruntime.InferenceSession(
                program.model_proto.SerializeToString(), settings, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # onnxruntime raises its own exception types for unsupported graphs
            raise UnsupportedRuntime(f"onnxruntime cannot load the exported model: {_innermost(error)}") from error
        user_inputs = [
            spec.arg.name for spec in exported.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT
        ]
        placeholders = _placeholder_names(program)
        taken = {node.name: placeholders.get(node.name, node.name) for node in self.session.get_inputs()}
        # the exporter may drop inputs the graph does not read: feed the ones the session takes
        self.feeds = [(user_inputs.index(name), onnx_name) for onnx_name, name in taken.items() if name in user_inputs]
        if len(self.feeds) != len(taken):
            raise UnsupportedRuntime(
                f"the ONNX model takes inputs {sorted(taken)}, not a subset of the model's {user_inputs}"
            )
        self.out_spec = exported.call_spec.out_spec
        # the ONNX graph returns the tensors only: the model's constant outputs (None, the
        # exporter skips them) are put back from the exported program's output specs
        returned = [spec.arg for spec in exported.graph_signature.output_specs if spec.kind == OutputKind.USER_OUTPUT]
        self.constants = {i: arg.value for i, arg in enumerate(returned) if isinstance(arg, ConstantArgument)}
        outputs, tensors = len(self.session.get_outputs()), len(returned) - len(self.constants)
        # ONNX has no complex tensors: the exporter passes a complex tensor as its real view (a
        # last dimension of 2), in and out; the complex outputs are viewed back as complex
        values = {node.name: node.meta.get("val") for node in exported.graph.nodes}
        self.complex_outputs = {
            i
            for i, arg in enumerate(returned)
            if isinstance(arg, TensorArgument) and isinstance(values.get(arg.name), torch.Tensor)
            and values[arg.name].is_complex()
        }  # fmt: skip
        if self.out_spec is None or self.out_spec.num_leaves != len(returned) or tensors != outputs:
            raise UnsupportedRuntime(
                f"the ONNX model returns {outputs} outputs where the model returns {tensors} tensors "
                f"and {len(self.constants)} constants"
            )

    def __call__(self, inputs: Inputs) -> Any:
        leaves = inputs.leaves()
        feed = {name: _onnx_value(leaves[index]) for index, name in self.feeds}
        outputs = iter(self.session.run(None, feed))
        count = len(self.constants) + len(self.session.get_outputs())
        values = [self.constants[i] if i in self.constants else self._output(i, next(outputs)) for i in range(count)]
        return pytree.tree_unflatten(values, self.out_spec)

    def _output(self, index: int, value: Any) -> torch.Tensor:
        tensor = torch.from_numpy(value)
        return torch.view_as_complex(tensor) if index in self.complex_outputs else tensor


class OnnxRuntime:
    """See the module docstring."""

    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    slow: ClassVar[bool] = False
    eager_mode: ClassVar[EagerMode] = EagerMode.INFERENCE_MODE  # ORT's results never carry history

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        try:
            import onnxruntime  # noqa: F401 - checked here so a missing extra is a reason, not a crash
        except ImportError as error:
            raise RuntimeUnavailable(
                f"onnxruntime is not installed (pip install 'srbench[onnx]'): {_innermost(error)}"
            ) from error
        if options.device != "cpu":
            raise UnsupportedRuntime(f"srbench runs ONNX Runtime on its CPU provider only, not on {options.device!r}")
        self.model = model.eval()
        self.options = options
        self._sessions: dict[tuple, _Session] = {}
        self._last: tuple[tuple, _Session] | None = None
        self._keyword_order = KeywordOrder.of(model)  # a session per order of the keywords the model sees
        self._session(self._keyword_order.arrange(example_inputs))

    def _session(self, inputs: Inputs) -> _Session:
        key = _signature(inputs)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(self.model, inputs, self.options)
        self._last = (key, session)
        return session

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs = self._keyword_order.arrange(Inputs(args, kwargs))  # exported with keyword arguments so
        last = self._last
        session = last[1] if last is not None and last[0] == _signature(inputs) else self._session(inputs)
        return session(inputs)
