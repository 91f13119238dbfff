"""The options of a case, defined once.

Every option is one dataclass field below, with its default, its help text and what the rest of
srbench needs to know of it (:class:`OptionInfo`, in the field's metadata). Everything else is
derived from these fields: the static runtime takes :class:`StaticOptions` as they are, runtime
plugins get :class:`RuntimeOptions`, the suite axes, the suite schema, the parts of a case id and
the command-line flags are read off the fields. Adding an option is adding one field here.

:class:`StaticOptions` are the options only a runtime that plans its own memory reads (srbench's
static runtime lists them in its ``honours``); :class:`RuntimeOptions` adds those every runtime
runs under (intra-op threads, device). This module imports neither torch nor the plugins, so the
pytest plugin can read it at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from srbench.planners import DEFAULT_PLANNER, PLANNERS
from srbench.registry import Registry, UnknownPluginError, unknown_name_message
from srbench.schedulers import DEFAULT_SCHEDULER, SCHEDULERS

_METADATA_KEY = "srbench"


@dataclass(frozen=True)
class OptionInfo:
    """What srbench needs to know of one option besides its name, type and default.

    ``axis``: the key of the suite file's ``axes`` that sweeps it. ``schema``: the JSON schema of
    one value. ``plugins``: for options that name a plugin (a planner), its
    registry, so suites check names against what is installed. ``id_part``: the text it adds to a
    case id for a value (``None``: nothing, for a default not worth repeating in every id).
    """

    axis: str
    help: str
    schema: Mapping[str, Any]
    id_part: Callable[[Any], str | None]
    plugins: Registry | None = None


def _option(default: Any, info: OptionInfo) -> Any:
    return dataclasses.field(default=default, metadata={_METADATA_KEY: info})


def _flag(on: str, off: str | None = None) -> Callable[[bool], str | None]:
    """A boolean's id part: ``on`` when true, ``off`` (or nothing) when false."""
    return lambda value: on if value else off


_BOOLEAN = {"type": "boolean"}
MAX_THREADS = 2**31 - 1  # the most intra-op threads torch.set_num_threads takes (a C int)
# A schema format: a number that is not NaN or infinite (either would switch a tolerance's check off).
FINITE = "finite"


@dataclass(frozen=True)
class StaticOptions:
    """How srbench's static runtime prepares and runs a model (names as in PyTorch's Static Runtime).

    ``planner``: a name registered under ``srbench.planners``. ``cleanup_activations``: give the
    slab's memory back after each run and take it again at the next (one ``resize_`` each way; the
    tensor views into it stay valid). ``enable_out_variant``: run ops through their out variants
    into the planned slab (off: every op that allocates runs as is, nothing is managed).
    ``manage_output_tensors``: graph outputs are written into an arena owned by the runtime instead
    of fresh tensors; they stay valid until the next run of the same runtime, which overwrites them.
    ``serve_fallbacks``: ops without an out kernel that writes a given buffer have their results
    served from the slab by an allocator hook while they run (:mod:`srbench.static.serving`; on
    CPU, where the hook builds; with ``enable_out_variant``).
    ``decompose``: capture lowered to core ATen, where every op has an out variant but fused ops are
    split into pieces. ``rewrite``: prepare-time rewrites of the captured graph (self-attention as a
    lean program, or eager's fused transformer layers restored; convolutions with batch norm folded
    in and activations and residual adds fused, as oneDNN calls on pre-packed weights), each kept
    only where it gives the rewritten region's result on the example inputs within
    ``rewrite_rtol``/``rewrite_atol``. ``streams``: how many streams (CPU threads, or CUDA streams)
    independent ops may run on at once; ``scheduler``: a
    name registered under ``srbench.schedulers``, which spreads the ops over at most that many
    streams (and may keep them on one where concurrency does not pay). ``measure_choices``: the
    prepare-time choices whose speed depends on the model and the machine (the rewrites, a
    tentative multistream program) are timed on the example inputs against the program without them,
    and kept only where they are not clearly slower (:mod:`srbench.static.rewrite_choice`,
    :mod:`srbench.static.stream_choice`); off, they are kept as proposed, so a program does not
    depend on the timing (tests of the rewrites themselves, or memory before speed).
    ``max_signatures``: how many input signatures (shapes, strides, scalar values, memory sharing)
    keep a prepared program, the example's always among them; a new one past that evicts the
    least recently used other, whose memory each runtime gives back at its next switch of program
    (a server called with ever new sequence lengths grew without bound). At least 2 (the
    example's and the one called); 8 as torch.compile's ``recompile_limit``.
    """

    planner: str = _option(
        DEFAULT_PLANNER,
        OptionInfo(
            axis="planners",
            help="memory planner",
            schema={"type": "string", "minLength": 1},
            id_part=str,
            plugins=PLANNERS,
        ),
    )
    cleanup_activations: bool = _option(
        True,
        OptionInfo(
            axis="cleanup_activations",
            help="give the slab's memory back between runs",
            schema=_BOOLEAN,
            id_part=_flag("cleanup", "nocleanup"),
        ),
    )
    enable_out_variant: bool = _option(
        True,
        OptionInfo(
            axis="enable_out_variant",
            help="run ops as out variants into the planned slab (off: every op allocates its result)",
            schema=_BOOLEAN,
            id_part=_flag("out", "noout"),
        ),
    )
    serve_fallbacks: bool = _option(
        True,
        OptionInfo(
            axis="serve_fallbacks",
            help="serve the results of ops without an out kernel from the slab (CPU allocator hook)",
            schema=_BOOLEAN,
            id_part=lambda value: None if value else "noserve",
        ),
    )
    manage_output_tensors: bool = _option(
        False,
        OptionInfo(
            axis="manage_output_tensors",
            help="write outputs into an arena the runtime owns (valid until its next run)",
            schema=_BOOLEAN,
            id_part=_flag("managed"),
        ),
    )
    decompose: bool = _option(
        False,
        OptionInfo(
            axis="decompose",
            help="capture lowered to core ATen (export's run_decompositions())",
            schema=_BOOLEAN,
            id_part=_flag("decomposed"),
        ),
    )
    rewrite: bool = _option(
        True,
        OptionInfo(
            axis="rewrite",
            help="prepare-time rewrites: fused transformer layers, folded and fused convolutions",
            schema=_BOOLEAN,
            id_part=lambda value: None if value else "norewrite",
        ),
    )
    rewrite_rtol: float = _option(
        1e-4,
        OptionInfo(
            axis="rewrite_rtol",
            help="relative tolerance a rewrite must keep on the example inputs",
            schema={"type": "number", "exclusiveMinimum": 0, "format": FINITE},
            id_part=lambda value: None if value == 1e-4 else f"rrtol{value:g}",
        ),
    )
    rewrite_atol: float = _option(
        1e-4,
        OptionInfo(
            axis="rewrite_atol",
            help="absolute tolerance a rewrite must keep on the example inputs",
            schema={"type": "number", "exclusiveMinimum": 0, "format": FINITE},
            id_part=lambda value: None if value == 1e-4 else f"ratol{value:g}",
        ),
    )
    streams: int = _option(
        1,
        OptionInfo(
            axis="streams",
            help="streams independent ops may run on at once (CPU threads or CUDA streams)",
            schema={"type": "integer", "minimum": 1},
            id_part=lambda value: None if value == 1 else f"s{value}",
        ),
    )
    scheduler: str = _option(
        DEFAULT_SCHEDULER,
        OptionInfo(
            axis="schedulers",
            help="scheduler spreading ops over the streams",
            schema={"type": "string", "minLength": 1},
            id_part=lambda value: None if value == DEFAULT_SCHEDULER else str(value),
            plugins=SCHEDULERS,
        ),
    )
    measure_choices: bool = _option(
        True,
        OptionInfo(
            axis="measure_choices",
            help="keep rewrites and several streams only where they measure faster at prepare time",
            schema=_BOOLEAN,
            id_part=lambda value: None if value else "unmeasured",
        ),
    )
    max_signatures: int = _option(
        8,
        OptionInfo(
            axis="max_signatures",
            help="input signatures (shapes, scalars) that keep a program; a new one evicts the least recently used",
            schema={"type": "integer", "minimum": 2},
            id_part=lambda value: None if value == 8 else f"sig{value}",
        ),
    )

    def __post_init__(self) -> None:
        """Each value as a flag or a suite's key takes it (its field's schema): in Python,
        ``rewrite_rtol=nan`` and ``cleanup_activations="yes"`` were taken (a NaN tolerance
        compares false, so every rewrite was refused), and ``streams=2.0`` failed deep in
        preparing with "'float' object cannot be interpreted as an integer"."""
        for option in options_of(type(self)):
            value = getattr(self, option.name)
            if not _allows(option.info.schema, value):
                raise ValueError(f"{option.name} must be {_expectation(option.info.schema)}, got {value!r}")


@dataclass(frozen=True)
class RuntimeOptions(StaticOptions):
    """Everything a case tells its runtime: the static options (read only by runtimes that plan
    memory) plus ``threads``, the intra-op thread count (``torch.set_num_threads``) the case runs
    under, and ``device``, where model and inputs live."""

    threads: int = _option(
        1,
        OptionInfo(
            axis="threads",
            help="intra-op threads",
            # torch.set_num_threads takes a C int: a count beyond failed every case with "Overflow".
            schema={"type": "integer", "minimum": 1, "maximum": MAX_THREADS},
            id_part=lambda value: f"t{value}",
        ),
    )
    device: str = _option(
        "cpu",
        OptionInfo(
            axis="devices",
            help="device of model and inputs",
            schema={"enum": ["cpu", "cuda"]},
            id_part=lambda value: None if value == "cpu" else str(value),
        ),
    )


@dataclass(frozen=True)
class Option:
    """One option as read off its field: name, default and :class:`OptionInfo`."""

    name: str
    default: Any
    info: OptionInfo

    @property
    def is_static(self) -> bool:
        """Read only by runtimes that plan memory (those that list it in ``honours``)."""
        return self.name in STATIC_OPTION_NAMES


def options_of(cls: type[StaticOptions] = RuntimeOptions) -> tuple[Option, ...]:
    """The options of ``cls`` in declaration order (the order of a case id's parts)."""
    return tuple(Option(f.name, f.default, f.metadata[_METADATA_KEY]) for f in dataclasses.fields(cls))


def id_parts(options: StaticOptions, names: Collection[str] | None = None) -> list[str]:
    """The case-id parts of ``options`` (only of the options in ``names``, when given), in
    declaration order: ``["greedy_by_size", "cleanup", "out", "t1"]``."""
    parts = []
    for option in options_of(type(options)):
        if names is None or option.name in names:
            part = option.info.id_part(getattr(options, option.name))
            if part is not None:
                parts.append(part)
    return parts


def plugin_options() -> tuple[tuple[Option, Registry], ...]:
    """The options that name a plugin, each with the registry of its plugins."""
    return tuple((option, option.info.plugins) for option in options_of() if option.info.plugins is not None)


STATIC_OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StaticOptions))

_Options = TypeVar("_Options", bound=StaticOptions)


def add_option_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type[StaticOptions]) -> None:
    """One flag per option of ``cls``: ``--planner NAME``, ``--threads N``, and for booleans
    ``--cleanup-activations`` / ``--no-cleanup-activations``; defaults are the options' own."""
    for option in options_of(cls):
        flag = "--" + option.name.replace("_", "-")
        help_text = f"{option.info.help} (default: %(default)s)"
        if isinstance(option.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=option.default, help=help_text)
        elif "enum" in option.info.schema:
            parser.add_argument(flag, choices=list(option.info.schema["enum"]), default=option.default, help=help_text)
        else:
            kind = type(option.default)
            parser.add_argument(flag, type=_within(kind, option.info.schema), default=option.default, help=help_text)


def _allows(schema: Mapping[str, Any], value: object) -> bool:
    """Whether an option's schema takes ``value``, for the keywords option schemas use (``type``,
    ``enum``, ``minimum``, ``exclusiveMinimum``, ``minLength``, the finite format), read as the
    suites' validator reads them (an integer is an int, not 2.0, nor a bool). Written here
    rather than through jsonschema, which the suites use: this module is read at pytest's
    start-up, and options are made at every import of a runtime."""
    kind = schema.get("type")
    whole = isinstance(value, int) and not isinstance(value, bool)
    if "enum" in schema:
        return value in schema["enum"]
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str) and len(value) >= schema.get("minLength", 0)
    if not (whole or (kind == "number" and isinstance(value, float))):
        return False
    assert isinstance(value, (int, float))
    minimum, above, maximum = schema.get("minimum"), schema.get("exclusiveMinimum"), schema.get("maximum")
    return (
        (schema.get("format") != FINITE or math.isfinite(value))
        and (minimum is None or value >= minimum)
        and (above is None or value > above)
        and (maximum is None or value <= maximum)
    )


def _expectation(schema: Mapping[str, Any]) -> str:
    """What an option's schema takes, in words: ``an integer of at least 2``."""
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    kind = schema.get("type")
    if kind == "boolean":
        return "True or False"
    if kind == "string":
        return "a non-empty str" if schema.get("minLength") else "a str"
    words = "an integer" if kind == "integer" else "a finite number" if schema.get("format") == FINITE else "a number"
    if schema.get("minimum") is not None:
        words += f" of at least {schema['minimum']}"
    if schema.get("exclusiveMinimum") is not None:
        words += f" more than {schema['exclusiveMinimum']}"
    if schema.get("maximum") is not None:
        words += f" and at most {schema['maximum']:,}"
    return words


def _within(kind: type, schema: Mapping[str, Any]) -> Callable[[str], Any]:
    """A flag's parser that refuses what the option's schema refuses in a suite: below
    ``minimum``, not above ``exclusiveMinimum``, NaN or infinite where the format is finite
    (``--rewrite-rtol -1`` and ``nan`` were taken, and every rewrite refused)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not _allows(schema, value):
            raise argparse.ArgumentTypeError(f"expected {_expectation(schema)}, got {text!r}")
        return value

    return parse


def options_from_flags(args: argparse.Namespace, cls: type[_Options]) -> _Options:
    """The ``cls`` options that :func:`add_option_flags` put in ``args``. A plugin's name is checked
    here, as a suite checks it (UnknownPluginError): ``--scheduler`` was read only with several
    streams, so an unknown one ran without a word."""
    values = {option.name: getattr(args, option.name) for option in options_of(cls)}
    for option, registry in plugin_options():
        if option.name in values and values[option.name] not in registry.names():
            raise UnknownPluginError(unknown_name_message(registry.kind, values[option.name], registry.names()))
    return cls(**values)
