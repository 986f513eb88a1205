"""A background scan's DataLoader workers fork from a small server (started once by ``vfork`` +
``exec``, torch preloaded), as forking from the window stalls its GUI thread; unlike
``forkserver`` it never re-runs ``__main__``. What cannot go to the server forks plainly."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pickle
import sys
import threading
from multiprocessing import context, forkserver, process, reduction, spawn, util
from typing import Any

#: What the server imports before forking: a scan loader's needs (torch, sources, preprocessing).
PRELOAD = ["torch", "torch.utils.data", "PIL.Image", "torchvision.transforms", "actviz.data.scan"]


class _Server(forkserver.ForkServer):
    """A fork server of actviz's own (not the one ``multiprocessing`` shares)."""

    def __init__(self) -> None:
        super().__init__()
        # Without "__main__": the server does not import the caller's main module.
        self.set_forkserver_preload(list(PRELOAD))

    def pid(self) -> int | None:
        return self._forkserver_pid


_SERVER = _Server()

if "forkserver" in multiprocessing.get_all_start_methods() and not getattr(sys, "frozen", False):
    from multiprocessing import popen_forkserver

    class _Popen(popen_forkserver.Popen):
        """Starts one process through :data:`_SERVER`, naming no main module."""

        def _launch(self, process_obj: Any) -> None:
            prep_data = spawn.get_preparation_data(process_obj._name)
            # Else the child reruns the caller's script as __mp_main__ (loader_context checked).
            prep_data.pop("init_main_from_path", None)
            prep_data.pop("init_main_from_name", None)
            buf = io.BytesIO()
            context.set_spawning_popen(self)
            try:
                reduction.dump(prep_data, buf)
                reduction.dump(process_obj, buf)
            finally:
                context.set_spawning_popen(None)
            self.sentinel, w = _SERVER.connect_to_new_process(self._fds)
            # As the standard library: the child watches this write end for its parent's exit.
            self.finalizer = util.Finalize(self, util.close_fds, (os.dup(w), self.sentinel))
            with open(w, "wb", closefd=True) as f:
                f.write(buf.getbuffer())
            self.pid = forkserver.read_signed(self.sentinel)

    class _Process(process.BaseProcess):
        _start_method = "forkserver"

        @staticmethod
        def _Popen(process_obj: Any) -> _Popen:
            return _Popen(process_obj)

    class LoaderContext(context.ForkServerContext):
        """A ``multiprocessing`` context whose processes come from actviz's fork server
        (pass it as a DataLoader's ``multiprocessing_context``)."""

        Process = _Process  # type: ignore[assignment]

    _CONTEXT: LoaderContext | None = LoaderContext()
else:  # pragma: no cover - Windows, frozen apps

    class LoaderContext:  # type: ignore[no-redef]
        """Unavailable here: loaders are forked (or spawned) as the DataLoader does."""

    _CONTEXT = None


def loader_context(dataset: Any) -> Any | None:
    """The context to start ``dataset``'s loaders from the fork server, or None (plain fork) when
    there is no ``forkserver`` or the dataset does not pickle without ``__main__``."""
    if _CONTEXT is None:
        return None
    try:
        blob = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - any failure to pickle means: fork instead
        return None
    # Globals pickle by module name; a stray "__main__" in the data only costs the server.
    return None if b"__main__" in blob else _CONTEXT


def prestart() -> None:
    """Start the fork server now (if available and not running), on a background thread at
    lowered priority, so the first scan does not wait for it to import torch."""
    if _CONTEXT is None or _SERVER.pid() is not None:
        return

    def start() -> None:
        from actviz.core.threads import lower_thread_priority

        # It inherits this thread's priority (Linux): it and its loaders stay behind the window.
        lower_thread_priority()
        # On failure the scan falls back to starting it (or reports why it cannot).
        with contextlib.suppress(OSError):
            _SERVER.ensure_running()

    threading.Thread(target=start, name="actviz-loader-server", daemon=True).start()
