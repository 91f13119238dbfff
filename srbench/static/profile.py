"""Per-op profile of the static runtime, in the manner of PyTorch's ``benchmark_individual_ops``.

The generated code has a profiling variant with a timer after every line, so the time of each
node is measured where it runs, with the same calls as a plain run. Nodes that cost nothing at
run time (views made once, ``getitem`` of managed results) have no line and are counted apart.
"""

from __future__ import annotations

import enum
import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from srbench.formatting import aligned_table, format_bytes
from srbench.inputs import Inputs
from srbench.static.choose import RunAs
from srbench.static.passes import Rewrite, RewriteOutcome


def _plain(value: object) -> object:
    return value.value if isinstance(value, enum.Enum) else value


if TYPE_CHECKING:
    from srbench.static.module import StaticModule


@dataclass(frozen=True)
class NodeTime:
    node: str
    kind: str
    how: RunAs
    call: str  # the label of the call it makes (see NodePath)
    mean_ms: float
    median_ms: float
    percent: float  # of the sum of node means


@dataclass(frozen=True)
class NodePath:
    """How one node of the prepared graph runs: ``how`` (out variant, fallback, native, folded,
    skipped), ``static`` for views made once per runtime, and ``call``, the label of what it
    calls: ``torch.addmm`` (a C binding), ``aten.mm.out`` (an overload), ``registered aten::tanh``
    (a user's out variant), empty for folded and skipped nodes."""

    node: str
    kind: str
    how: RunAs
    static: bool
    call: str

    @property
    def path(self) -> str:
        return f"{self.how.value} (made once)" if self.static else self.how.value


@dataclass(frozen=True)
class KindTime:
    kind: str
    mean_ms: float  # per iteration, all nodes of the kind together
    median_ms: float
    percent: float
    count: int


@dataclass(frozen=True)
class OpProfile:
    """Where the time of a run goes, in milliseconds per iteration. Nodes and kinds carry the
    mean (as PyTorch's ``benchmark_individual_ops`` reports) and the median (robust on a busy
    machine); ``total_ms`` is the median wall time of a whole profiled call and ``nodes_ms`` the
    sum of the node medians; slab alloc/free times are medians too."""

    model: str
    iterations: int
    setup_ms: float
    first_iteration_ms: float
    total_ms: float
    nodes_ms: float
    slab_alloc_ms: float
    slab_free_ms: float
    nodes: tuple[NodeTime, ...]
    kinds: tuple[KindTime, ...]
    paths: tuple[NodePath, ...]  # every node, in graph order
    num_nodes: int
    out_variant_nodes: int
    native_nodes: int
    fallback_nodes: int
    static_nodes: int
    folded_nodes: int
    managed_tensors: int
    managed_bytes: int
    slab_bytes: int
    output_arena_bytes: int
    hosted_bytes: int  # intermediates planned into the outputs' bytes (srbench.memory.hosting)
    rewrites: tuple[Rewrite, ...] = ()  # prepare-time rewrites, applied or refused with the reason
    served_nodes: int = 0  # fallbacks whose results the slab serves (srbench.static.serving)
    unserved: str | None = None  # why fallback results are not served from the slab

    def to_dict(self) -> dict:
        """Plain JSON values (how each node runs as its name)."""
        return asdict(self, dict_factory=lambda items: {key: _plain(value) for key, value in items})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self, top: int = 15) -> str:
        """An aligned, human-readable report: summary, the paths nodes took (how they run and
        what they call, with counts), time per node kind, slowest nodes."""
        summary = [
            ("setup (prepare)", f"{self.setup_ms:.3f} ms"),
            ("first iteration", f"{self.first_iteration_ms:.3f} ms"),
            ("total per iteration", f"{self.total_ms:.4f} ms"),
            ("sum over nodes", f"{self.nodes_ms:.4f} ms"),
            ("slab alloc / free", f"{self.slab_alloc_ms:.4f} / {self.slab_free_ms:.4f} ms"),
            ("out-variant nodes", f"{self.out_variant_nodes} of {self.num_nodes}"),
            (
                "native / fallback / static / folded",
                f"{self.native_nodes} / {self.fallback_nodes} / {self.static_nodes} / {self.folded_nodes}",
            ),
            ("fallbacks served from the slab", str(self.served_nodes)),
            ("managed tensors", f"{self.managed_tensors} ({format_bytes(self.managed_bytes)})"),
            (
                "slab / output arena / hosted in outputs",
                " / ".join(format_bytes(n) for n in (self.slab_bytes, self.output_arena_bytes, self.hosted_bytes)),
            ),
        ]
        if self.unserved:
            summary.append(("fallback results unserved", self.unserved))
        width = max(len(label) for label, _ in summary)
        lines = [f"Static runtime profile of {self.model!r}, {self.iterations} iterations"]
        lines += [f"  {label:<{width}}  {value}" for label, value in summary]
        lines.append("")
        counts: dict[tuple[str, str], list[str]] = {}
        for path in self.paths:
            counts.setdefault((path.path, path.call), []).append(path.kind)
        lines.append(
            aligned_table(
                ("path", "call", "nodes", "kinds"),
                [
                    (how, call or "-", str(len(kinds)), ", ".join(sorted(set(kinds))))
                    for (how, call), kinds in sorted(counts.items(), key=lambda item: (-len(item[1]), item[0]))
                ],
                right_aligned=(2,),
            )
        )
        lines.append("")
        lines.append(
            aligned_table(
                ("node kind", "mean ms", "median ms", "%", "count"),
                [
                    (k.kind, f"{k.mean_ms:.4f}", f"{k.median_ms:.4f}", f"{k.percent:.1f}", str(k.count))
                    for k in self.kinds
                ],
                right_aligned=range(1, 5),
            )
        )
        lines.append("")
        slowest = sorted(self.nodes, key=lambda n: -n.median_ms)[:top]
        lines.append(
            aligned_table(
                ("node", "kind", "how", "call", "mean ms", "median ms", "%"),
                [
                    (
                        n.node,
                        n.kind,
                        n.how.value,
                        n.call,
                        f"{n.mean_ms:.4f}",
                        f"{n.median_ms:.4f}",
                        f"{n.percent:.1f}",
                    )
                    for n in slowest
                ],
                right_aligned=range(4, 7),
            )
        )
        if self.rewrites:
            lines += ["", self.rewrites_table()]
        return "\n".join(lines)

    def rewrites_table(self) -> str:
        """Each prepare-time rewrite: which node's region, what runs instead, or why not."""
        applied, refused, slower = (
            [r for r in self.rewrites if r.outcome is outcome]
            for outcome in (RewriteOutcome.APPLIED, RewriteOutcome.REFUSED, RewriteOutcome.SLOWER)
        )
        rows = [
            (
                r.node,
                r.pass_name,
                r.replacement,
                r.outcome.value,
                r.reason or f"max |difference| {r.max_difference:.3g}",
            )
            for r in (*refused, *slower, *applied)
        ]
        title = f"prepare-time rewrites: {len(applied)} applied, {len(refused)} refused"
        if slower:
            title += f", {len(slower)} not used (slower)"
        return title + "\n" + aligned_table(("node", "pass", "replacement", "outcome", "reason"), rows)


def profile_runtime(
    module: StaticModule, inputs: Inputs | tuple, *, iterations: int = 100, warmup: int = 10
) -> OpProfile:
    """Profile ``module`` on ``inputs`` (one call, or its positional arguments) with a fresh
    runtime: the first iteration (binding the slab included), then ``iterations`` timed runs of
    the profiling variant after ``warmup``. A call in another form than the example's is moved
    to the prepared form first, as ``run`` does."""
    inputs = module.in_prepared_form(Inputs.coerce(inputs))
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    setup_start = time.perf_counter()
    prepared = module.prepared_for(inputs)
    setup_ms = (module.setup_seconds if prepared is module.prepared else time.perf_counter() - setup_start) * 1e3
    runtime = module.runtime()
    start = time.perf_counter()
    inputs.call(runtime.run)
    first_ms = (time.perf_counter() - start) * 1e3
    bound = runtime.bind(inputs)
    timed = prepared.program.timed
    slots = len(timed) + 2  # slot 0: slab alloc, last: slab free
    times = bound.hooks.times
    times[:] = [0.0] * slots
    for _ in range(warmup):
        inputs.call(bound.forward_profiled)
    samples: list[list[float]] = []  # per iteration, per slot
    walls = []
    for _ in range(iterations):
        times[:] = [0.0] * slots
        start = time.perf_counter()
        inputs.call(bound.forward_profiled)
        walls.append(time.perf_counter() - start)
        samples.append(list(times))
    columns = [[sample[slot] * 1e3 for sample in samples] for slot in range(slots)]
    means = [statistics.fmean(column) for column in columns]
    medians = [statistics.median(column) for column in columns]
    node_slots = range(1, 1 + len(timed))
    mean_total = sum(means[i] for i in node_slots) or 1.0
    nodes = tuple(
        NodeTime(t.node, t.kind, t.how, t.call, means[i], medians[i], 100.0 * means[i] / mean_total)
        for t, i in zip(timed, node_slots)
    )
    by_kind: dict[str, list[int]] = {}
    for t, i in zip(timed, node_slots):
        by_kind.setdefault(t.kind, []).append(i)
    kinds = tuple(
        sorted(
            (
                KindTime(
                    kind,
                    sum(means[i] for i in slots_of_kind),
                    statistics.median(sum(sample[i] for i in slots_of_kind) * 1e3 for sample in samples),
                    100.0 * sum(means[i] for i in slots_of_kind) / mean_total,
                    len(slots_of_kind),
                )
                for kind, slots_of_kind in by_kind.items()
            ),
            key=lambda k: -k.mean_ms,
        )
    )
    plans = prepared.plans
    return OpProfile(
        model=module.name,
        iterations=iterations,
        setup_ms=setup_ms,
        first_iteration_ms=first_ms,
        total_ms=statistics.median(walls) * 1e3,
        nodes_ms=sum(medians[i] for i in node_slots),
        slab_alloc_ms=medians[0],
        slab_free_ms=medians[-1],
        nodes=nodes,
        kinds=kinds,
        paths=tuple(
            NodePath(p.node.name, p.kind, p.how, p.static, p.call.label if p.call is not None else "") for p in plans
        ),
        num_nodes=sum(1 for p in plans if p.how is not RunAs.SKIP),
        out_variant_nodes=sum(1 for p in plans if p.how in (RunAs.OUT, RunAs.OUT_FRESH)),
        native_nodes=sum(1 for p in plans if p.how is RunAs.NATIVE and not p.static),
        fallback_nodes=sum(1 for p in plans if p.how is RunAs.FALLBACK),
        static_nodes=sum(1 for p in plans if p.static),
        folded_nodes=sum(1 for p in plans if p.how is RunAs.CONSTANT),
        managed_tensors=len(prepared.managed) + prepared.hosted_results,
        managed_bytes=prepared.managed_bytes,
        slab_bytes=prepared.slab_bytes,
        output_arena_bytes=prepared.arena_bytes,
        hosted_bytes=prepared.hosted_bytes,
        rewrites=prepared.rewrites,
        served_nodes=sum(1 for p in plans if p.how is RunAs.SERVED),
        unserved=prepared.unserved,
    )
