"""``actviz visualize`` with arguments it cannot use: the error comes at once, before the model
is opened and minutes of optimisation are spent."""

from __future__ import annotations

import pytest

from actviz.cli import main


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--steps", "0"], "steps must be at least 1"),
        (["--size", "4"], "size must be at least 8"),
        (["--batch", "0"], "batch must be at least 1"),
    ],
)
def test_bad_settings_are_refused_before_the_model_opens(tmp_path, capsys, extra, said):
    out = tmp_path / "vis"
    args = ["visualize", "--model", "demo", "--layer", "features.block3", "--out", str(out)]
    assert main(args + extra) == 2
    err = capsys.readouterr().err
    assert said in err and "opening demo" not in err, err
    assert not out.exists()


def test_an_out_folder_that_cannot_be_made_is_refused_before_any_step(tmp_path, capsys):
    # It was found only when the pictures were written, after the whole optimisation.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "vis"
    args = ["visualize", "--model", "demo", "--layer", "features.block3", "--channels", "0"]
    assert main(args + ["--steps", "2", "--size", "16", "--no-cache", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and str(out) in err, err
    assert "step" not in err and "visualising" not in err and "Error:" not in err, err
