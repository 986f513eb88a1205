"""A background scan's loader processes come from actviz's fork server, not from this process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader

from actviz.data import scan
from actviz.data.fork_server import _SERVER, LoaderContext, loader_context
from tests.data.conftest import LAYERS, assert_same_scan, tiny_net, write_images

pytestmark = pytest.mark.skipif(
    not isinstance(loader_context([1]), LoaderContext), reason="no forkserver on this platform"
)


class _WhoLoads(torch.utils.data.Dataset):
    """Each item: (this process, its parent, whether its ``__main__`` is a script: the
    standard library's forkserver children run the caller's again, the server's is ``-c``)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(
            [os.getpid(), os.getppid(), int(hasattr(sys.modules["__main__"], "__file__"))]
        )


def test_loaders_are_forked_by_the_server_not_by_this_process():
    data = _WhoLoads()
    ctx = loader_context(data)
    assert isinstance(ctx, LoaderContext)
    loader = DataLoader(data, batch_size=1, num_workers=2, multiprocessing_context=ctx)
    rows = torch.cat(list(loader)).tolist()
    assert len(rows) == 4
    server = _SERVER.pid()  # the fork server's process id
    assert server is not None and server != os.getpid()
    for pid, parent, imported_main in rows:
        assert pid not in (os.getpid(), server)
        assert parent == server  # not this (possibly large) process: nothing of it is copied
        assert imported_main == 0
    assert len({pid for pid, _, _ in rows}) == 2  # one process per worker


class _Holding(torch.utils.data.Dataset):
    def __init__(self, thing):
        self.thing = thing

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int):
        return torch.zeros(1)


class _FromMain:
    """Stands for a class a user's script defines (pickled as ``__main__._FromMain``)."""


def test_what_cannot_reach_the_server_is_forked_as_before(monkeypatch):
    assert loader_context(_Holding(lambda x: x)) is None  # does not pickle
    monkeypatch.setattr(_FromMain, "__module__", "__main__")
    monkeypatch.setattr(sys.modules["__main__"], "_FromMain", _FromMain, raising=False)
    # It pickles, but the loaders do not import the caller's main module.
    assert loader_context(_Holding(_FromMain())) is None
    assert isinstance(loader_context(_Holding(3)), LoaderContext)


def test_a_background_scan_through_the_server_is_exact(tmp_path):
    folder = tmp_path / "images"
    write_images(folder, 24)
    net = tiny_net()
    common = dict(k=3, batch_size=4, cache=False)
    served = scan(net, folder, LAYERS, num_workers=1, background=True, **common)
    plain = scan(net, folder, LAYERS, num_workers=0, **common)
    assert served.count == 24
    assert_same_scan(served, plain, exact=True)


def test_a_script_without_a_main_guard_is_not_run_again_by_its_loaders(tmp_path):
    """``actviz.explore(model)`` from a script with no ``if __name__ == "__main__":``: the
    standard library's forkserver would run the script again in every loader (and fail)."""
    folder = tmp_path / "images"
    write_images(folder, 12)
    runs = tmp_path / "runs.txt"
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import torch
            from torch import nn
            import actviz

            with open({str(runs)!r}, "a") as f:
                f.write("ran\\n")
            torch.manual_seed(0)
            net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
            result = actviz.scan(
                net, {str(folder)!r}, ["0"], k=2, batch_size=2, num_workers=1,
                background=True, cache=False,
            )
            print("scanned", result.count)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "scanned 12" in done.stdout
    assert runs.read_text() == "ran\n"  # once: its loaders did not run it
