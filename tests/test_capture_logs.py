"""What torch writes about a capture that fails is held back where the CaptureError says it
(srbench.graph.capture_logs): no FakeTensor traceback, no partial graph on stderr; the model's
own writes, other threads' logs and a successful capture's messages are kept."""

import logging
import sys
import threading
from collections.abc import Iterator

import pytest
import torch

from srbench.graph import CaptureError, capture
from srbench.graph.capture_logs import held_while_capturing
from srbench.static import StaticModule

FAKE_TENSOR = "torch._subclasses.fake_tensor"
SHAPES = "torch.fx.experimental.symbolic_shapes"


class Listing(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def torch_logs() -> Iterator[Listing]:
    """What reaches the handlers of torch's failure loggers (attached to each: torch's loggers
    need not propagate to the root's)."""
    listing = Listing()
    loggers = [logging.getLogger(name) for name in (FAKE_TENSOR, SHAPES, "torch.export._trace")]
    for logger in loggers:
        logger.addHandler(listing)
    yield listing
    for logger in loggers:
        logger.removeHandler(listing)


class Branches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("the model's own line", file=sys.stderr)
        if x.sum() > 0:  # a branch on a value: export stops here and prints its partial graph
            return x + 1
        return x - 1


def test_a_call_the_model_refuses_is_one_error_without_torchs_traceback(capsys, torch_logs):
    module = StaticModule(torch.nn.Linear(4, 3).eval(), (torch.randn(2, 4),))
    with pytest.raises(CaptureError, match="same reduction dim"):
        module.runtime()(torch.randn(2, 5))
    assert "failed while attempting to run meta" not in capsys.readouterr().err
    assert not [m for m in torch_logs.messages if "failed while attempting" in m], torch_logs.messages


def test_a_branch_on_a_value_prints_no_partial_graph_but_keeps_the_models_writes(capsys, torch_logs):
    with pytest.raises(CaptureError, match="reads a tensor's value"):
        capture(Branches(), (torch.randn(3),))
    err = capsys.readouterr().err
    assert "def forward" not in err and "the model's own line" in err
    assert not torch_logs.messages


def test_records_are_written_out_after_a_capture_that_succeeds_and_dropped_after_one_that_fails(torch_logs):
    logger = logging.getLogger(SHAPES)
    with held_while_capturing():
        logger.warning("held")
        assert torch_logs.messages == []
    assert torch_logs.messages == ["held"]
    with pytest.raises(ValueError), held_while_capturing():
        logger.warning("dropped")
        raise ValueError("the capture failed")
    assert torch_logs.messages == ["held"]


def test_other_threads_log_and_write_while_a_capture_holds_back_its_own(capsys, torch_logs):
    logger = logging.getLogger(FAKE_TENSOR)

    def other() -> None:
        logger.error("another thread's")
        sys.stderr.write("another thread's write\n")

    with pytest.raises(ValueError), held_while_capturing():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert torch_logs.messages == ["another thread's"]
        assert "another thread's write" in capsys.readouterr().err
        raise ValueError("the capture failed")
    assert torch_logs.messages == ["another thread's"]
