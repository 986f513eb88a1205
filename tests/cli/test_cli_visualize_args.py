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


def test_the_layer_objective_makes_one_image_and_refuses_channels(tmp_path, capsys):
    # It made 16 images of the same objective from 16 seeds, written and printed as if they
    # were channels 0-15.
    base = ["visualize", "--model", "demo", "--layer", "features.block3", "--objective", "layer"]
    small = ["--steps", "2", "--size", "16", "--no-cache"]
    assert main(base + small + ["--channels", "0-3", "--out", str(tmp_path / "a")]) == 2
    assert "no channels" in capsys.readouterr().err
    out = tmp_path / "b"
    assert main(base + small + ["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.glob("*.png")) == [
        "features.block3_0.png",
        "features.block3_sheet.png",
    ]
    assert "features.block3: final mean square" in printed, printed


def test_every_option_says_what_it_does():
    import argparse

    from actviz.cli.visualize_command import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), lambda p, _required: None)
    sub = parser._subparsers._group_actions[0].choices["visualize"]  # noqa: SLF001
    bare = [a.dest for a in sub._actions if not a.help]  # noqa: SLF001
    assert bare == [], bare  # --seed, --param and --transforms had no help


def test_many_channels_run_in_batches_by_default(tmp_path, monkeypatch):
    # All channels were one batch: --channels 0-511 of a large layer asked for tens of GB.
    import actviz.analysis.visualize.feature_vis as engine

    asked = {}
    real = engine.visualize

    def spy(*args, **kwargs):
        asked.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "visualize", spy)
    args = ["visualize", "--model", "demo", "--layer", "features.block3", "--channels", "0-19"]
    assert main(args + ["--steps", "1", "--size", "16", "--no-cache", "--out", str(tmp_path)]) == 0
    assert asked["batch"] == 16


def test_random_weights_leave_nothing_in_the_cache(tmp_path, monkeypatch):
    # A torchvision name opened without weights gets new random weights in every process:
    # its cache entries could never be read again, only pile up.
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    small = ["--steps", "2", "--size", "16", "--channels", "0"]
    args = ["visualize", "--model", "resnet18", "--layer", "layer1", *small]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert not list(cache.rglob("*.*"))
    # Trained weights (the demo's) are cached as before.
    args = ["visualize", "--model", "demo", "--layer", "features.block3", *small]
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert list((cache / "actviz" / "visualize").rglob("*.*"))
