"""Opening a scanned channel in the channel view, running its layer first when the result
shown does not hold it (on the channel's best image when no input is open yet)."""

from __future__ import annotations

from typing import Any

from actviz.ui.dataset.topk import source_name
from actviz.ui.panels import style

__all__ = ["TOP_NAMED", "ChannelOpening"]

#: Top images named in the dock for a channel without maps to open.
TOP_NAMED = 5


class ChannelOpening:
    """Opens channels of the dataset feature's scans (``scans``); the ``dock`` says when
    one has no maps to open large."""

    def __init__(self, host: Any, scans: Any, dock: Any) -> None:
        self.host = host
        self.session = host.session
        self.scans = scans
        self.dock = dock
        #: (layer, channel) to open once the run that captures its layer finished.
        self.pending: tuple[str, int] | None = None
        #: A channel's top image is being opened as the input, to run and open the channel.
        self.awaiting_input = False
        host.run_finished.connect(self._on_run_finished)
        host.input_loaded.connect(self._on_input_loaded)
        host.input_load_failed.connect(self._on_input_load_failed)

    def open(self, layer: str, channel: int) -> bool:
        """Open ``channel`` of ``layer`` now (True) or once its layer ran (False)."""
        self.host.show_tab(None)
        if self.host.open_channel(layer, channel):
            self.pending = None
            return True
        result = self.session.result
        if result is not None and layer in result.layers:
            # Shown, but not as maps: running again would open nothing either.
            self.pending = None
            self._say_no_maps(layer, channel)
            return False
        self.pending = (layer, int(channel))
        if not self.session.is_ticked(layer):
            self.session.set_ticked([layer], True)
        if self.session.input is None and self._open_top_image(layer, channel):
            return False  # the run follows the image (see _on_input_loaded)
        if self.host.run() is None:
            self.pending = None
        return False

    def forget(self) -> None:
        """Open nothing when the run or input asked for ends (another model came)."""
        self.pending = None
        self.awaiting_input = False

    def _open_top_image(self, layer: str, channel: int) -> bool:
        """No input yet: open the channel's best image (then run); False when there is none."""
        if not self.scans.covers(layer):
            return False
        top = self.scans.scan.top(layer, channel)
        if not top or not isinstance(top[0].source, str):
            return False
        self.awaiting_input = True
        return self.host.open_input_source(top[0].source, remember=False)

    def _on_input_loaded(self, _source: str) -> None:
        if self.awaiting_input:
            self.awaiting_input = False
            if self.pending is not None and self.host.run() is None:
                self.pending = None

    def _on_input_load_failed(self, _text: str) -> None:
        if self.awaiting_input:
            self.forget()

    def _on_run_finished(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None and not self.host.open_channel(*pending):
            self._say_no_maps(*pending)

    def _say_no_maps(self, layer: str, channel: int) -> None:
        """Say in the dock that ``layer``'s channel cannot open large (maps only)."""
        result = self.session.result
        prepared = result.layers.get(layer) if result is not None else None
        shape = getattr(prepared, "shape", None)
        what = f" (its output is {tuple(shape)})" if shape else ""
        text = f"{layer} ch {channel} has no maps to open large{what}."
        if self.scans.covers(layer):
            top = self.scans.scan.top(layer, channel)[:TOP_NAMED]
            if top:
                named = ", ".join(
                    f"{source_name(e.source)} ({style.format_value(e.value)})" for e in top
                )
                text += f" Its top images: {named}."
        self.dock.set_message(text)
