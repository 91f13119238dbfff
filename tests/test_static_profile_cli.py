"""``srbench profile``: the per-op profile of a zoo model as a table or JSON."""

from __future__ import annotations

import json

import pytest
import torch

from srbench.cli import main


def test_profile_prints_an_aligned_table(capsys):
    threads = torch.get_num_threads()
    assert main(["profile", "--model", "mlp", "--batch", "2", "--iterations", "3", "--warmup", "0"]) == 0
    torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "Static runtime profile of 'mlp', 3 iterations" in out
    assert "out-variant nodes" in out and "5 of 5" in out  # the output's too: it hosts the first layer's result
    # managed tensors (two elementwise results written over their inputs: 8 KiB), slab, arena and
    # hosted bytes (the first layer's result planned into the output's bytes)
    assert "4 (8 KiB)" in out and "4 KiB / 0 B / 4 KiB" in out
    header = next(line for line in out.splitlines() if line.startswith("node kind"))
    first_row = out.splitlines()[out.splitlines().index(header) + 1]
    mean = first_row.split()[1]  # the numbers end where their header ends: an aligned table
    assert first_row.index(f" {mean} ") + 1 + len(mean) == header.index("mean ms") + len("mean ms")


def test_profile_json_is_machine_readable(capsys):
    threads = torch.get_num_threads()
    assert main(["profile", "--model", "mlp", "--batch", "2", "--iterations", "2", "--warmup", "0", "--json"]) == 0
    torch.set_num_threads(threads)
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "mlp" and data["iterations"] == 2
    assert data["out_variant_nodes"] == 5 and data["managed_tensors"] == 4 and data["hosted_bytes"] == 4096
    assert {node["kind"] for node in data["nodes"]} == {"aten::linear", "aten::relu"}


def test_profile_of_unknown_model_fails_with_the_known_names(capsys):
    assert main(["profile", "--model", "no_such_model"]) == 2
    err = capsys.readouterr().err
    assert "no_such_model" in err and "mlp" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch", str(10**20)], "srbench profile: model 'mlp': cannot make its example inputs at batch 100,"),
        (["--warmup", "-1"], "srbench profile: argument --warmup: expected a non-negative integer, got '-1'"),
        (["--threads", str(10**20)], f"srbench profile: --threads {10**20}: expected at most 2,147,483,647"),
    ],
)
def test_profile_bad_input_is_one_line(capsys, argv, message):
    """A batch torch cannot make inputs of ended in a traceback, and ``--warmup -1`` ran none silently."""
    try:
        status = main(["profile", "--model", "mlp", "--iterations", "1", *argv])
    except SystemExit as exit_info:  # argparse's refusal
        status = exit_info.code
    assert status == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(message)


def test_profile_of_a_model_whose_provider_is_unavailable_is_one_line(capsys, monkeypatch):
    """It ended in a traceback (ModelUnavailable), where ``srbench plan`` and ``estimate`` said why."""
    from srbench.zoo import ModelUnavailable

    class Unavailable:
        def get(self, name):
            raise ModelUnavailable(f"model {name!r} is provided by 'elsewhere', which is unavailable here: no module")

    monkeypatch.setattr("srbench.zoo.load_zoo", Unavailable)
    assert main(["profile", "--model", "far"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "srbench profile: model 'far' is provided by 'elsewhere', which is unavailable here: no module"
    ]


def test_profile_code_prints_the_generated_forward(capsys):
    assert main(["profile", "--model", "mlp", "--batch", "2", "--code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("def forward(*args, **kwargs):") and "def forward_unchecked" not in out
    # three linears and two ReLUs: the first linear allocates the output (which hosts its result,
    # as empty_strided would), the others write into their planned tensors
    assert out.count("out=") == 4 and "empty_strided" not in out
