"""The app's process sets its OpenMP spin count before torch loads; a user's own choice stays."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from actviz.core.openmp import APP_OPENMP, use_app_openmp


def test_the_app_spin_count_is_set_only_where_the_user_chose_nothing():
    env: dict[str, str] = {}
    use_app_openmp(env)
    assert env == {"GOMP_SPINCOUNT": "1000"} == APP_OPENMP
    for mine in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "50"}):
        kept = dict(mine)
        use_app_openmp(kept)
        assert kept == mine


def _gui_sees(env: dict[str, str]) -> str:
    """What ``actviz gui`` leaves for the window: the spin count, and whether torch had loaded."""
    script = textwrap.dedent(
        """
        import os, sys, types
        fake = types.ModuleType("actviz.ui.explore")
        def run_app(**_kwargs):
            print(os.environ.get("GOMP_SPINCOUNT"), "torch" in sys.modules)
            return 0
        fake.run_app = run_app
        sys.modules["actviz.ui.explore"] = fake
        from actviz.cli import main
        raise SystemExit(main(["gui"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_gui_command_sets_the_spin_count_before_torch_loads():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    assert _gui_sees(env) == "1000 False"
    assert _gui_sees({**env, "GOMP_SPINCOUNT": "7"}) == "7 False"
    assert _gui_sees({**env, "OMP_WAIT_POLICY": "PASSIVE"}) == "None False"
