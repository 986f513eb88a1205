"""The installed ``actviz`` console command, started as a user starts it (a subprocess).

``ACTVIZ_EXIT_AFTER_SHOW=1`` makes the window exit on its own once it has painted its first
result: the README's first Quick start command, headless.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def console_script() -> str:
    """The ``actviz`` script pip installed beside this Python (``pip install -e .``)."""
    script = pathlib.Path(sys.executable).with_name("actviz")
    found = str(script) if script.is_file() else shutil.which("actviz")
    assert found, f"no actviz console script beside {sys.executable}: run pip install -e ."
    return found


def run_actviz(*args: str, home: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    # The checkout under test wins over whatever the script's environment has installed.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    environ = dict(
        os.environ,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        ACTVIZ_OFFLINE="1",
        QT_QPA_PLATFORM="offscreen",
        PYTHONPATH=path,
        **env,
    )
    return subprocess.run(
        [console_script(), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
        cwd=home,
    )


@pytest.mark.slow
def test_actviz_opens_the_demo_paints_it_and_exits_on_its_own(tmp_path):
    proc = run_actviz(home=tmp_path, ACTVIZ_EXIT_AFTER_SHOW="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The demo's five ticked layers were on the panels when it painted.
    assert proc.stdout.splitlines()[-1] == (
        "actviz: painted 5 layer panels; exiting (ACTVIZ_EXIT_AFTER_SHOW=1)"
    )
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr
    # It closed cleanly: the window saved its geometry, in the user's config folder only.
    conf = tmp_path / ".config" / "actviz" / "actviz.conf"
    assert conf.is_file(), sorted(str(p) for p in tmp_path.rglob("*"))
    assert "geometry" in conf.read_text()


@pytest.mark.slow
def test_actviz_exits_1_when_the_model_cannot_be_opened(tmp_path):
    proc = run_actviz(
        "--model", str(tmp_path / "missing.pt"), home=tmp_path, ACTVIZ_EXIT_AFTER_SHOW="1"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "missing.pt" in proc.stdout and "Traceback" not in proc.stderr


def test_actviz_help_and_a_headless_command(tmp_path):
    proc = run_actviz("--help", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.startswith("usage: actviz")
        and "{gui,info,export,compare,scan,visualize,effects,atlas,report,concepts,bench}"
        in proc.stdout
    )
    proc = run_actviz("info", "--model", "demo", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "features.block4" in proc.stdout
    assert (
        proc.stdout.splitlines()[-1]
        == "24 modules, 18 leaves, 61,208 parameters (61,208 trainable)"
    )
