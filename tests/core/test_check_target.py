"""check_target: a target no run could use is refused where it is set, with the run's message."""

from __future__ import annotations

import pytest
import torch

from actviz.core.capture import capture
from actviz.core.targets import check_target, parse_target
from actviz.io.models.demo_model import DEMO_CLASSES, build_demo_model


def test_an_out_of_range_class_is_refused_with_the_runs_own_message():
    torch.manual_seed(0)
    model = build_demo_model().eval()
    x = torch.randn(1, 3, 64, 64)
    output = capture(model, x, ["fc"], gradients=False).output
    assert output.shape == (1, len(DEMO_CLASSES)) == (1, 8)
    target = parse_target("999", DEMO_CLASSES)  # parses: a number is a class index
    with pytest.raises(ValueError) as refused:
        check_target(target, output)
    assert str(refused.value) == "target class 999 is out of range: the output has 8 classes"
    # ... the message a run fails with.
    with pytest.raises(ValueError, match="target class 999 is out of range") as at_run:
        capture(model, x, ["fc"], target=999)
    assert str(at_run.value) == str(refused.value)
    # Without an output yet, the number of classes is enough.
    with pytest.raises(ValueError, match="out of range: the output has 8 classes"):
        check_target(8, len(DEMO_CLASSES))
    for ok in (None, 0, 7, -1, parse_target("circle", DEMO_CLASSES)):
        check_target(ok, output)
        check_target(ok, len(DEMO_CLASSES))
    assert not output.requires_grad  # the check takes no gradients


def test_token_and_detection_targets_follow_their_outputs():
    logits = {"logits": torch.zeros(1, 5, 50)}  # a language model's (N, T, vocab)
    check_target(49, logits)
    with pytest.raises(ValueError, match="token 50 is out of range"):
        check_target(50, logits)
    dets = [{"boxes": torch.zeros(2, 4), "scores": torch.tensor([0.9, 0.5]),
             "labels": torch.tensor([3, 1])}]  # fmt: skip
    check_target(1, dets)
    with pytest.raises(ValueError, match="detection 2 is out of range"):
        check_target(2, dets)
    with pytest.raises(TypeError):
        check_target(1, None)
    with pytest.raises(ValueError, match="0 classes"):
        check_target(0, 0)
