"""The nightly job: measure the commits not measured yet, publish, and flag regressions.

By default asv builds each new commit into its own virtualenv (``asv.conf.json``: torch pinned,
the project's wheel with its extras) and runs the benchmarks there. An existing environment
(``--python``) can only measure what it has installed, so the nightly then measures the
checked-out commit, which must be clean and be what that environment imports, with
``--set-commit-hash``. asv writes into a staged copy of the results (``staging``); ``asv publish``
writes the site into a new folder, which is made to work offline and swapped in whole
(``srbench.fileio.atomic_directory``). asv's comparison of the newest commit against the newest
one measured before this run decides the exit status (:class:`NightlyStatus`).
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from srbench.asv_tracking.offline_html import OfflineAssetError, make_offline
from srbench.asv_tracking.staging import load_config, staged_results
from srbench.asv_tracking.suite_selection import SUITES_VARIABLE
from srbench.fileio import atomic_directory

DEFAULT_FACTOR = 1.1


class NightlyStatus(IntEnum):
    """The nightly's exit status (the README's table of exit statuses says the same)."""

    NO_REGRESSION = 0
    REGRESSION = 1  # worse beyond --factor, or a benchmark that newly fails
    FAILED = 2  # the job itself could not run


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


def _asv(options: NightlyOptions, *arguments: str, config: Path | None = None, stdin: str = "") -> int:
    """Run ``asv`` (the one installed beside this interpreter); return its exit status."""
    suites = {SUITES_VARIABLE: options.suites} if options.suites else {}
    environ = {"HF_HUB_OFFLINE": "1", **os.environ, **suites}  # zoo models are built from configs
    command = [sys.executable, "-m", "asv", *arguments, "--config", str(config or options.config)]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, cwd=options.config.parent, env=environ, input=stdin, text=True).returncode


def _git(repo: str, *arguments: str) -> str:
    completed = subprocess.run(["git", "-C", repo, *arguments], capture_output=True, text=True)
    if completed.returncode != 0:
        raise NightlyError(f"`git {' '.join(arguments)}` failed in {repo}: {completed.stderr.strip()}")
    return completed.stdout.strip()


def ensure_machine(options: NightlyOptions) -> str:
    """The machine name results are filed under (``--machine``, else the host name); described in
    ``~/.asv-machine.json`` first if new, as ``asv run`` would otherwise stop to ask about it."""
    from asv.machine import MachineCollection
    from asv.util import UserError

    name = options.machine or platform.node()
    try:
        MachineCollection.load(name)
    except UserError:
        if _asv(options, "machine", "--yes", "--machine", name) != 0:
            raise NightlyError(f"asv could not describe machine {name!r}") from None
    return name


def environments(options: NightlyOptions) -> list[Any]:
    """The asv environments this nightly runs in (results are filed under their names)."""
    from asv.environment import get_environments

    specs = [options.environment] if options.environment else None
    return list(get_environments(load_config(options.config), specs, verbose=False))


def measured_commits(conf: Any, machine: str, env_names: Sequence[str]) -> set[str]:
    """Commits with results of this machine in one of ``env_names``."""
    from asv.results import iter_results_for_machine

    return {r.commit_hash for r in iter_results_for_machine(conf.results_dir, machine) if r.env_name in env_names}


def commits_to_measure(history: Sequence[str], measured: set[str], max_commits: int) -> list[str]:
    """Of ``history`` (newest first), the commits newer than the newest measured one, oldest first,
    at most ``max_commits`` (the newest). With nothing measured yet, only the newest commit: older
    ones predate the benchmarks, or would take a night each."""
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


def check_existing_environment(environment: Any, repo: str, commit: str) -> None:
    """What an existing environment measures is filed under ``commit``: refuse unless the working
    tree is that commit's (tracked files) and the environment imports srbench from it (editable)."""
    from asv.util import ProcessError

    if subprocess.run(["git", "-C", repo, "diff", "--quiet", commit]).returncode != 0:
        raise NightlyError(f"the working tree is not {commit[:8]} (another commit, or uncommitted changes)")
    probe = "import pathlib, srbench; print(pathlib.Path(srbench.__file__).resolve().parents[1])"
    try:
        installed = environment.run(["-c", probe], display_error=False).strip()
    except ProcessError as error:
        installed = f"nowhere ({str(error).strip()[-200:]})"
    if installed != str(Path(repo).resolve()):
        raise NightlyError(
            f"{environment.name} imports srbench from {installed}, not from {repo}; "
            f"install it editable there (pip install -e {repo}) or drop --environment"
        )


def run_benchmarks(options: NightlyOptions, machine: str, commits: Sequence[str], existing: bool) -> None:
    """``asv run`` on ``commits`` (an existing environment: with ``--set-commit-hash``), into a
    staged copy of the results (see ``staging``)."""
    arguments = ["-E", options.environment] if options.environment else []
    arguments += [f"--set-commit-hash={commits[-1]}"] if existing else ["HASHFILE:-"]
    arguments += ["--machine", machine, *(["--quick"] if options.quick else []), *options.asv_args]
    with staged_results(options.config) as config:
        returncode = _asv(options, "run", *arguments, config=config, stdin="\n".join(commits))
    if returncode == 2:  # some benchmarks failed: recorded, and compared below (a new failure is a regression)
        print("some benchmarks failed; they are recorded, and the comparison below flags new failures", flush=True)
    elif returncode != 0:
        raise NightlyError(f"asv run exited with status {returncode}")


def publish(options: NightlyOptions) -> Path:
    """``asv publish`` into a new folder, made offline, then swapped in for the configured site."""
    html_dir = Path(load_config(options.config).html_dir)
    with atomic_directory(html_dir) as site:
        if _asv(options, "publish", f"--html-dir={site}") != 0:
            raise NightlyError("asv publish failed")
        make_offline(site)
    return html_dir


def compare_commits(
    conf: Any, pair: tuple[str, str], machine: str, env_names: list[str], factor: float
) -> tuple[bool, str]:
    """Whether the second commit of ``pair`` is worse than the first beyond ``factor``, and asv's
    table of what changed. ``asv compare`` prints that table but always exits 0, and ``asv
    continuous`` times both commits again; so this calls the function behind ``asv compare``,
    which applies the factor and, where samples allow, asv's statistical test, and counts a newly
    failing benchmark as worse. Every srbench benchmark is lower-is-better."""
    from asv.commands.compare import Compare

    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        worse, _ = Compare.print_table(
            conf, *pair, factor=factor, split=True, only_changed=True, machine=machine, env_names=env_names
        )
    return bool(worse), table.getvalue()


def run_nightly(options: NightlyOptions) -> NightlyStatus:
    """The whole job; returns the exit status (see the module docstring)."""
    from asv.environment import is_existing_only
    from asv.util import UserError

    try:
        # The configuration first: a file asv cannot read is one line here, where `asv machine`
        # (run for a new machine) printed its traceback.
        conf, machine, envs = load_config(options.config), ensure_machine(options), environments(options)
        env_names = [env.name for env in envs]
        history = _git(conf.repo, "rev-list", "--first-parent", *(conf.branches[:1] or ["HEAD"])).split()
        existing = is_existing_only(envs)  # it holds one commit, installed: the branch's tip
        batch = commits_to_measure(
            history, measured_commits(conf, machine, env_names), 1 if existing else options.max_commits
        )
        if batch:
            print(f"measuring {len(batch)} commit(s): {' '.join(c[:8] for c in batch)}", flush=True)
            for environment in envs if existing else []:
                check_existing_environment(environment, conf.repo, batch[-1])
            run_benchmarks(options, machine, batch, existing)
        else:
            print("no new commits to measure", flush=True)
        if options.publish:
            print(f"published to {publish(options)}", flush=True)
        pair = baseline_and_newest(history, measured_commits(conf, machine, env_names), batch)
        if pair is None:
            print("fewer than two measured commits: nothing to compare yet", flush=True)
            return NightlyStatus.NO_REGRESSION
        worse, table = compare_commits(conf, pair, machine, env_names, options.factor)
    except (NightlyError, OfflineAssetError, UserError) as error:
        print(f"error: {error}", file=sys.stderr)
        return NightlyStatus.FAILED
    print(table, flush=True)
    before_commit, after_commit = pair[0][:8], pair[1][:8]
    if worse:
        print(f"REGRESSION: {after_commit} is worse than {before_commit} by more than a factor {options.factor}")
        return NightlyStatus.REGRESSION
    print(f"no regression beyond a factor {options.factor} from {before_commit} to {after_commit}")
    return NightlyStatus.NO_REGRESSION
