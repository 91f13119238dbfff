"""The nightly job: measure the commits not measured yet, publish, and flag regressions.

By default asv builds each new commit into its own virtualenv (``asv.conf.json``: torch pinned,
the project's wheel with its extras) and runs the suites' benchmarks there, so the commits are
handed to one ``asv run HASHFILE:...``. With an existing environment (``--python=same``, the
project's ``.venv``) asv can only measure what is installed, so the nightly measures the checked
out commit (which must be clean, or the numbers would be filed under the wrong commit) with
``--set-commit-hash``.

Then ``asv publish`` writes the site, which is made to work offline, and asv's comparison of the
newest commit against the baseline (the newest one measured before this run) decides the exit
status: 0 nothing got worse, 1 a regression beyond ``--factor`` (or a benchmark that newly
fails), 2 the job itself could not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from srbench.asv_tracking.offline_html import OfflineAssetError, make_offline
from srbench.asv_tracking.regressions import DEFAULT_FACTOR, ComparisonError, compare_commits, load_config
from srbench.asv_tracking.suite_selection import SUITES_VARIABLE

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_FAILED = 2
# asv run exits 2 when some benchmarks failed: they are recorded, and the comparison counts a
# newly failing benchmark as a regression, so that status is not a failure of the job.
_ASV_RUN_BENCHMARKS_FAILED = 2


class NightlyError(RuntimeError):
    """The nightly cannot do its job (no git history, asv failed, a dirty tree)."""


@dataclass(frozen=True)
class NightlyOptions:
    config: Path
    factor: float = DEFAULT_FACTOR
    machine: str | None = None
    environment: str | None = None  # an asv -E spec; None: the config's virtualenv
    max_commits: int = 10
    quick: bool = False
    publish: bool = True
    suites: str | None = None
    asv_args: tuple[str, ...] = field(default_factory=tuple)


def _asv(options: NightlyOptions, *arguments: str, check: bool = True) -> int:
    """Run ``asv`` (the one installed beside this interpreter) on the nightly's configuration."""
    environ = dict(os.environ)
    environ.setdefault("HF_HUB_OFFLINE", "1")  # zoo models are built from configs, never downloaded
    if options.suites:
        environ[SUITES_VARIABLE] = options.suites
    command = [sys.executable, "-m", "asv", *arguments, "--config", str(options.config)]
    print("+ " + " ".join(command), flush=True)
    returncode = subprocess.run(command, cwd=options.config.parent, env=environ).returncode
    if check and returncode != 0:
        raise NightlyError(f"`{' '.join(command)}` exited with status {returncode}")
    return returncode


def _git(repo: Path, *arguments: str) -> str:
    completed = subprocess.run(["git", "-C", str(repo), *arguments], capture_output=True, text=True)
    if completed.returncode != 0:
        raise NightlyError(f"`git {' '.join(arguments)}` failed in {repo}: {completed.stderr.strip()}")
    return completed.stdout.strip()


def ensure_machine(options: NightlyOptions) -> str:
    """The machine name results are filed under (``--machine``, else the host name); describes
    the machine in ``~/.asv-machine.json`` if it is not there yet, as ``asv run`` would otherwise
    stop to ask questions."""
    import platform

    from asv.machine import MachineCollection
    from asv.util import UserError

    name = options.machine or platform.node()
    try:
        MachineCollection.load(name)
    except UserError:
        _asv(options, "machine", "--yes", "--machine", name)
    return name


def environment_names(options: NightlyOptions) -> list[str]:
    """The names of the asv environments this nightly runs in (results are filed under them)."""
    from asv.environment import get_environments

    conf = load_config(options.config)
    specs = [options.environment] if options.environment else None
    return [env.name for env in get_environments(conf, specs, verbose=False)]


def existing_interpreter(options: NightlyOptions) -> str | None:
    """The interpreter of an existing environment (``existing[:PYTHON]``, ``:same``), else ``None``."""
    spec = options.environment or ""
    if spec == ":same" or spec == "existing":
        return sys.executable
    if spec.startswith("existing:"):
        return spec.split(":", 1)[1]
    return None


def is_existing_environment(options: NightlyOptions) -> bool:
    return existing_interpreter(options) is not None


def check_installed_from(python: str, repo: Path) -> None:
    """An existing environment must run the repository's own working tree (an editable install),
    or its numbers would be filed under a commit they were not measured on."""
    probe = "import pathlib, srbench; print(pathlib.Path(srbench.__file__).resolve().parents[1])"
    completed = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    installed = completed.stdout.strip()
    if completed.returncode != 0 or Path(installed) != repo.resolve():
        raise NightlyError(
            f"{python} imports srbench from {installed or 'nowhere'} ({completed.stderr.strip()[-200:]}), "
            f"not from {repo}; install it editable there (pip install -e {repo}) or drop --environment"
        )


def measured_commits(options: NightlyOptions, machine: str, env_names: Sequence[str]) -> set[str]:
    """Commits with results of this machine in one of ``env_names``."""
    from asv.results import iter_results_for_machine

    conf = load_config(options.config)
    return {
        result.commit_hash
        for result in iter_results_for_machine(conf.results_dir, machine)
        if result.env_name in env_names
    }


def branch_history(options: NightlyOptions) -> list[str]:
    """The first-parent history of the configured branch, newest first."""
    conf = load_config(options.config)
    branch = conf.branches[0] if conf.branches else "HEAD"
    return _git(Path(conf.repo), "rev-list", "--first-parent", branch).split()


def commits_to_measure(history: Sequence[str], measured: set[str], max_commits: int) -> list[str]:
    """The commits newer than the newest measured one, oldest first, at most ``max_commits``
    (the newest are kept). With nothing measured yet, only the newest commit: older ones predate
    the benchmarks, or would take a night each."""
    if max_commits < 1:
        raise ValueError(f"max_commits must be at least 1, got {max_commits}")
    new = []
    for commit in history:
        if commit in measured:
            break
        new.append(commit)
    if not measured:
        new = new[:1]
    return list(reversed(new[:max_commits]))


def baseline_and_newest(history: Sequence[str], measured: set[str], batch: Sequence[str]) -> tuple[str, str] | None:
    """The pair to compare: the newest commit measured before ``batch`` and the newest measured
    now; with an empty batch, the two newest measured commits. ``None`` with fewer than two."""
    ordered = [commit for commit in history if commit in measured]  # newest first
    if len(ordered) < 2:
        return None
    if batch:
        before_batch = [commit for commit in ordered if commit not in batch]
        if not before_batch:
            return None
        return before_batch[0], ordered[0]
    return ordered[1], ordered[0]


def run_benchmarks(options: NightlyOptions, machine: str, commits: Sequence[str]) -> None:
    common = ["--machine", machine, *(["--quick"] if options.quick else []), *options.asv_args]
    if is_existing_environment(options):
        conf = load_config(options.config)
        head = _git(Path(conf.repo), "rev-parse", "HEAD")
        if commits != [head]:
            raise NightlyError(
                f"an existing environment ({options.environment}) holds one installed commit; it can "
                f"measure HEAD ({head[:8]}) only, but the new commits are {', '.join(c[:8] for c in commits)}; "
                "drop --environment to let asv build each commit"
            )
        if _git(Path(conf.repo), "status", "--porcelain", "--untracked-files=no"):
            raise NightlyError("the working tree has uncommitted changes; results would be filed under HEAD wrongly")
        check_installed_from(existing_interpreter(options), Path(conf.repo))
        returncode = _asv(options, "run", "-E", options.environment, f"--set-commit-hash={head}", *common, check=False)
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as hashfile:
            hashfile.write("\n".join(commits) + "\n")
        try:
            environment = ["-E", options.environment] if options.environment else []
            returncode = _asv(options, "run", f"HASHFILE:{hashfile.name}", *environment, *common, check=False)
        finally:
            os.unlink(hashfile.name)
    if returncode not in (0, _ASV_RUN_BENCHMARKS_FAILED):
        raise NightlyError(f"asv run exited with status {returncode}")
    if returncode == _ASV_RUN_BENCHMARKS_FAILED:
        print("some benchmarks failed; they are recorded, and the comparison below flags new failures", flush=True)


def publish(options: NightlyOptions) -> Path:
    _asv(options, "publish")
    html_dir = Path(load_config(options.config).html_dir)
    make_offline(html_dir)
    return html_dir


def run_nightly(options: NightlyOptions) -> int:
    """The whole job; returns the exit status (see the module docstring)."""
    try:
        machine = ensure_machine(options)
        env_names = environment_names(options)
        history = branch_history(options)
        before = measured_commits(options, machine, env_names)
        if is_existing_environment(options):  # the installed commit only
            batch = [] if history[0] in before else [history[0]]
        else:
            batch = commits_to_measure(history, before, options.max_commits)
        if batch:
            print(f"measuring {len(batch)} commit(s): {', '.join(c[:8] for c in batch)}", flush=True)
            run_benchmarks(options, machine, batch)
        else:
            print("no new commits to measure", flush=True)
        if options.publish:
            print(f"published to {publish(options)}", flush=True)
        pair = baseline_and_newest(history, measured_commits(options, machine, env_names), batch)
    except (NightlyError, OfflineAssetError, ComparisonError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    if pair is None:
        print("fewer than two measured commits: nothing to compare yet", flush=True)
        return EXIT_OK
    return report_regressions(options, machine, env_names, *pair)


def report_regressions(options: NightlyOptions, machine: str, env_names: Sequence[str], before: str, after: str) -> int:
    try:
        comparison = compare_commits(
            options.config, before, after, factor=options.factor, machine=machine, env_names=env_names
        )
    except ComparisonError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    print(comparison.table, flush=True)
    if comparison.worsened:
        print(f"REGRESSION: {after[:8]} is worse than {before[:8]} by more than a factor {options.factor}")
        return EXIT_REGRESSION
    print(f"no regression beyond a factor {options.factor} from {before[:8]} to {after[:8]}")
    return EXIT_OK
