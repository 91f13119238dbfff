"""The nightly job: measure the commits not measured yet, publish, and flag regressions.

By default asv builds each new commit into its own virtualenv (``asv.conf.json``: torch pinned,
the project's wheel with its extras) and runs the benchmarks there, so the commits are handed to
one ``asv run HASHFILE:...``. With an existing environment (``--python``, the project's ``.venv``)
asv can only measure what is installed, so the nightly measures the checked-out commit (which must
be clean, or the numbers would be filed under the wrong commit) with ``--set-commit-hash``. asv
writes into a staged copy of the results (``staging``), whose finished files then replace the
real ones atomically.

Then ``asv publish`` writes the site, which is made to work offline and swapped in, and asv's
comparison of the newest commit against the baseline (the newest one measured before this run)
decides the exit status: 0 nothing got worse, 1 a regression beyond ``--factor`` (or a benchmark
that newly fails), 2 the job itself could not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from srbench.asv_tracking.offline_html import OfflineAssetError, make_offline
from srbench.asv_tracking.regressions import DEFAULT_FACTOR, ComparisonError, compare_commits, load_config
from srbench.asv_tracking.staging import replace_directory, staged_config, staged_results
from srbench.asv_tracking.suite_selection import SUITES_VARIABLE


class NightlyStatus(IntEnum):
    """The nightly's exit status (the README's table of exit statuses says the same)."""

    NO_REGRESSION = 0
    REGRESSION = 1  # worse beyond --factor, or a benchmark that newly fails
    FAILED = 2  # the job itself could not run


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
    asv_args: tuple[str, ...] = ()

    @property
    def existing_python(self) -> str | None:
        """The interpreter of an existing environment (``existing[:PYTHON]``, ``:same``), else ``None``."""
        spec = self.environment or ""
        if spec in (":same", "existing"):
            return sys.executable
        return spec.split(":", 1)[1] if spec.startswith("existing:") else None


def _asv(options: NightlyOptions, *arguments: str, config: Path | None = None) -> int:
    """Run ``asv`` (the one installed beside this interpreter); return its exit status."""
    environ = dict(os.environ)
    environ.setdefault("HF_HUB_OFFLINE", "1")  # zoo models are built from configs, never downloaded
    if options.suites:
        environ[SUITES_VARIABLE] = options.suites
    command = [sys.executable, "-m", "asv", *arguments, "--config", str(config or options.config)]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, cwd=options.config.parent, env=environ).returncode


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
        if _asv(options, "machine", "--yes", "--machine", name) != 0:
            raise NightlyError(f"asv could not describe machine {name!r}") from None
    return name


def environment_names(options: NightlyOptions) -> list[str]:
    """The names of the asv environments this nightly runs in (results are filed under them)."""
    from asv.environment import get_environments

    specs = [options.environment] if options.environment else None
    return [env.name for env in get_environments(load_config(options.config), specs, verbose=False)]


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

    results = iter_results_for_machine(load_config(options.config).results_dir, machine)
    return {result.commit_hash for result in results if result.env_name in env_names}


def branch_history(options: NightlyOptions) -> list[str]:
    """The first-parent history of the configured branch, newest first."""
    conf = load_config(options.config)
    return _git(Path(conf.repo), "rev-list", "--first-parent", conf.branches[0] if conf.branches else "HEAD").split()


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
    return list(reversed(new[: max_commits if measured else 1]))


def baseline_and_newest(history: Sequence[str], measured: set[str], batch: Sequence[str]) -> tuple[str, str] | None:
    """The pair to compare: the newest commit measured before ``batch`` and the newest measured
    now; with an empty batch, the two newest measured commits. ``None`` with fewer than two."""
    ordered = [commit for commit in history if commit in measured]  # newest first
    before_batch = [commit for commit in ordered if commit not in batch] if batch else ordered[1:]
    return (before_batch[0], ordered[0]) if len(ordered) >= 2 and before_batch else None


def run_benchmarks(options: NightlyOptions, machine: str, commits: Sequence[str]) -> None:
    """``asv run`` on ``commits``, into a staged copy of the results (see ``staging``)."""
    conf = load_config(options.config)
    repo = Path(conf.repo)
    with tempfile.TemporaryDirectory() as folder:
        if options.existing_python is not None:
            head = _git(repo, "rev-parse", "HEAD")
            if list(commits) != [head]:
                raise NightlyError(
                    f"an existing environment ({options.environment}) holds one installed commit; it can measure "
                    f"HEAD ({head[:8]}) only, not {', '.join(c[:8] for c in commits)}; drop --environment"
                )
            if _git(repo, "status", "--porcelain", "--untracked-files=no"):
                raise NightlyError(
                    "the working tree has uncommitted changes; results would be filed under HEAD wrongly"
                )
            check_installed_from(options.existing_python, repo)
            arguments = ["-E", str(options.environment), f"--set-commit-hash={head}"]
        else:
            hashfile = Path(folder) / "commits.txt"
            hashfile.write_text("\n".join(commits) + "\n")
            arguments = [f"HASHFILE:{hashfile}", *(["-E", options.environment] if options.environment else [])]
        arguments += ["--machine", machine, *(["--quick"] if options.quick else []), *options.asv_args]
        with staged_results(Path(conf.results_dir)) as staged:
            returncode = _asv(options, "run", *arguments, config=staged_config(options.config, staged))
    if returncode not in (0, _ASV_RUN_BENCHMARKS_FAILED):
        raise NightlyError(f"asv run exited with status {returncode}")
    if returncode == _ASV_RUN_BENCHMARKS_FAILED:
        print("some benchmarks failed; they are recorded, and the comparison below flags new failures", flush=True)


def publish(options: NightlyOptions) -> Path:
    """``asv publish`` into a new folder, made offline, then swapped in for the configured site."""
    html_dir = Path(load_config(options.config).html_dir)
    html_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=html_dir.parent, prefix=f".{html_dir.name}-") as folder:
        site = Path(folder) / "html"
        if _asv(options, "publish", f"--html-dir={site}") != 0:
            raise NightlyError("asv publish failed")
        make_offline(site)
        replace_directory(site, html_dir)
    return html_dir


def run_nightly(options: NightlyOptions) -> NightlyStatus:
    """The whole job; returns the exit status (see the module docstring)."""
    try:
        machine = ensure_machine(options)
        env_names = environment_names(options)
        history = branch_history(options)
        before = measured_commits(options, machine, env_names)
        if options.existing_python is not None:  # the installed commit only
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
        if pair is None:
            print("fewer than two measured commits: nothing to compare yet", flush=True)
            return NightlyStatus.NO_REGRESSION
        comparison = compare_commits(options.config, *pair, factor=options.factor, machine=machine, env_names=env_names)
    except (NightlyError, OfflineAssetError, ComparisonError) as error:
        print(f"error: {error}", file=sys.stderr)
        return NightlyStatus.FAILED
    print(comparison.table, flush=True)
    before_commit, after_commit = pair[0][:8], pair[1][:8]
    if comparison.worsened:
        print(f"REGRESSION: {after_commit} is worse than {before_commit} by more than a factor {options.factor}")
        return NightlyStatus.REGRESSION
    print(f"no regression beyond a factor {options.factor} from {before_commit} to {after_commit}")
    return NightlyStatus.NO_REGRESSION
