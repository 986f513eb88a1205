"""Reports and session files are written to a temporary file renamed over the target; that
file kept mkstemp's private mode 0600, so a report meant to be shared (copied to a web folder,
a shared drive) could not be read by anyone else. They now get a new file's usual mode (the
umask's), or the mode of the file they replace."""

from __future__ import annotations

import os
import stat

import pytest
import torch
from torch import nn

import actviz
from actviz.io.export.report import write_report
from actviz.workspace.session_file import SessionState, save_state


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@pytest.fixture(scope="module")
def cap():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(3)).eval()
    x = torch.rand(1, 3, 6, 6)
    model(x)
    return actviz.capture(model, x, ["0", "1"])


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_report_gets_a_new_files_mode_or_keeps_the_old_one(cap, tmp_path):
    out = tmp_path / "report.html"
    write_report(cap, out)
    assert _mode(out) == 0o666 & ~_umask()
    out.chmod(0o640)
    write_report(cap, out)
    assert _mode(out) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_session_file_gets_a_new_files_mode(cap, tmp_path):
    out = tmp_path / "study.actviz"
    save_state(SessionState(ticked=("0",), capture=cap), out)
    assert _mode(out) == 0o666 & ~_umask()
    out.chmod(0o600)
    save_state(SessionState(ticked=("0",), capture=cap), out)
    assert _mode(out) == 0o600
