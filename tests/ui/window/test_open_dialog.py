"""Opening a weights-only file from the Open model dialog: the architecture is guessed when
certain (and said so), asked in the dialog with the candidates when not, the path is kept
after a failure, and nothing sends the user to the command line."""

from __future__ import annotations

import pytest
import torch
import torchvision
from PySide6.QtCore import Qt

from tests.ui.conftest import LOAD_TIMEOUT_MS

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

TIED = ["fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_fpn"]


def _open_file(qtbot, window, path, arch: str = ""):
    dialog = window.files.menus.open_model_dialog()
    assert dialog.isVisible() and window.files.menus.model_dialog is dialog
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText(str(path))
    dialog.arch_combo.setEditText(arch)
    return dialog


def _press_open(qtbot, dialog):
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)


def test_the_hint_says_the_architecture_is_recognised(qtbot, actviz_window):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    dialog = window.files.menus.open_model_dialog()
    text = dialog.hint_label.text()
    assert "leave the architecture empty" in text and "recognises it" in text
    assert "--arch" not in text
    dialog.reject()
    assert window.files.menus.model_dialog is None


def test_a_resnet18_state_dict_opens_with_no_arch_and_the_guess_is_shown(
    qtbot, actviz_window, tmp_path
):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    torch.manual_seed(0)
    ref = torchvision.models.resnet18(weights=None).eval()
    path = tmp_path / "r18.pt"
    torch.save(ref.state_dict(), path)
    dialog = _open_file(qtbot, window, path)
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    assert not dialog.isVisible() and window.files.menus.model_dialog is None
    assert window.session.model_name == "r18.pt (resnet18)"
    assert torch.equal(window.session.model.conv1.weight, ref.conv1.weight)
    note = "architecture guessed: resnet18 (all 122 tensors match)"
    assert window.statusBar().currentMessage() == note
    assert not any("arch" in t for t in window.centre.banner.texts())


def test_a_first_guess_says_what_it_tries_in_the_dialog_and_the_status_bar(
    qtbot, actviz_window, tmp_path, fresh_signatures
):
    """Guessing builds some fifty architectures the first time (9 s on two cores): the dialog
    said only "Opening r18.pt…" meanwhile."""
    fresh_signatures()  # nothing kept from earlier sessions
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    torch.manual_seed(0)
    path = tmp_path / "r18.pt"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), path)
    dialog = _open_file(qtbot, window, path)
    said: list[tuple[str, str]] = []
    window.files.status_label.setText = lambda text: said.append(("status", text))
    busy = dialog.set_busy
    placeholder = window.centre.layers_placeholder
    assert placeholder.text().startswith("Open a model (Ctrl+O)")

    def set_busy(on: bool, text: str = "") -> None:
        said.extend([("dialog", text), ("Layers tab", placeholder.text())])
        busy(on, text)

    dialog.set_busy = set_busy
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    tries = [(where, t) for where, t in said if t.startswith("Guessing the architecture")]
    assert ("dialog", "Guessing the architecture of the weights: trying resnet18…") in tries
    assert {where for where, _ in tries} == {"dialog", "status"}
    # Meanwhile the empty Layers tab says a model is on its way, not "Open a model".
    # (The first pair: the Open click, before the load starts.)
    assert {t for where, t in said[2:] if where == "Layers tab"} == {"Opening r18.pt…"}
    assert window.session.model_name == "r18.pt (resnet18)"
    assert not placeholder.text().startswith("Opening")


def test_tied_candidates_are_asked_in_the_dialog_and_the_choice_opens(
    qtbot, actviz_window, tmp_path
):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    torch.manual_seed(0)
    ref = torchvision.models.get_model(TIED[1], weights=None, weights_backbone=None).eval()
    path = tmp_path / "detector.pth"
    torch.save(ref.state_dict(), path)
    dialog = _open_file(qtbot, window, path)
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    # Still open, the path kept, the two candidates listed with score and reason.
    assert dialog.isVisible() and dialog.tabs.currentIndex() == 1
    assert dialog.file_edit.text() == str(path)
    assert dialog.candidates()[:2] == TIED and dialog.arch_list.isVisible()
    first = dialog.arch_list.item(0).text()
    assert first.startswith(f"{TIED[0]}  —  score 1.00: all ") and first.endswith("tensors match")
    message = dialog.message()
    assert message.startswith("detector.pth holds only weights, not the architecture, and 2 ")
    assert "Choose one of the candidates below" in message and "--arch" not in message
    assert window.centre.banner.texts() == [] and window.session.model is None
    assert dialog.open_button.isEnabled()
    # Picking one puts it in the architecture field; Open loads it.
    dialog.arch_list.setCurrentRow(dialog.candidates().index(TIED[1]))
    assert dialog.arch_combo.currentText() == TIED[1]
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    assert not dialog.isVisible()
    assert window.session.model_name == f"detector.pth ({TIED[1]})"
    named = dict(window.session.model.named_parameters())
    for key, value in list(ref.named_parameters())[:5]:
        assert torch.equal(named[key], value)
    # Named, not guessed: no guess is announced.
    assert "guessed" not in window.statusBar().currentMessage()


def test_weights_that_match_nothing_say_so_in_the_dialog_and_keep_the_path(
    qtbot, actviz_window, tmp_path
):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    path = tmp_path / "mine.pt"
    torch.save({"encoder.w": torch.zeros(3, 4), "decoder.w": torch.zeros(4, 3)}, path)
    dialog = _open_file(qtbot, window, path)
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    assert dialog.isVisible() and dialog.file_edit.text() == str(path)
    assert dialog.candidates() == [] and not dialog.arch_list.isVisible()
    assert dialog.message() == (
        "mine.pt holds only weights, not the architecture, and no known architecture matches "
        "its tensor names and shapes. Type the architecture it belongs to: a torchvision name "
        "(resnet18) or path/model.py:ClassName."
    )
    assert window.centre.banner.texts() == []
    # A wrong architecture typed: the reason is shown, the path still kept.
    dialog.arch_combo.setEditText("resnet18")
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        _press_open(qtbot, dialog)
    assert dialog.isVisible() and dialog.file_edit.text() == str(path)
    assert dialog.message().startswith(f"Could not open model {str(path)!r}: ")
    assert "--arch" not in dialog.message()
    dialog.reject()
    assert window.files.menus.model_dialog is None and window.centre.banner.texts() == []


def test_outside_the_dialog_the_banner_points_to_the_dialog_not_the_command_line(
    qtbot, actviz_window, tmp_path
):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    torch.manual_seed(0)
    state = torchvision.models.resnet18(weights=None).state_dict()
    state["extra_head.weight"] = torch.zeros(5, 512)
    path = tmp_path / "custom.pt"
    torch.save(state, path)
    assert window.files.open_model_source(str(path), wait=True) is False
    (text,) = window.centre.banner.texts()
    assert text == (
        "custom.pt holds only weights, not the architecture, and none fits exactly; closest: "
        "resnet18 (122 of 123 tensors match, 1 is not in the model). Open it from File > Open "
        "model (Ctrl+O) to choose among the candidates."
    )


def test_a_load_cancelled_from_the_window_frees_the_dialog(qtbot, actviz_window):
    """Esc in the window (Run > Cancel) while the dialog's model loads: the dialog says the
    load was cancelled and Open works again (it kept "Opening demo…" with Open disabled)."""
    import threading

    win = actviz_window(size=(1400, 900))
    window = win.window
    release = threading.Event()
    real = window.model_loader

    def slow(source, **kwargs):
        release.wait(10)
        return real(source, **kwargs)

    window.model_loader = slow
    dialog = window.files.menus.open_model_dialog()
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText("demo")
    _press_open(qtbot, dialog)
    assert dialog.message().startswith("Opening") and not dialog.open_button.isEnabled()
    window.cancel()  # what Esc and the toolbar's Cancel do
    release.set()
    qtbot.waitUntil(lambda: "cancelled" in dialog.message(), timeout=LOAD_TIMEOUT_MS)
    assert dialog.message() == "Opening demo was cancelled; the model stays."
    assert dialog.isVisible() and dialog.open_button.isEnabled()
    win.wait_idle()
    assert window.session.model is None  # the load's result was dropped
    dialog.reject()


def test_a_load_replaced_by_another_frees_the_dialog(qtbot, actviz_window, tmp_path):
    """File > Demo (or a recent model) while the dialog's model loads: the dialog says its
    load was replaced and Open works again (it kept "Opening my.pt…" with Open disabled: a
    stress run's stuck dialog)."""
    import threading

    win = actviz_window(size=(1400, 900))
    window = win.window
    release = threading.Event()
    real = window.model_loader

    def slow(source, **kwargs):
        if source != "demo":
            release.wait(10)
        return real(source, **kwargs)

    window.model_loader = slow
    path = tmp_path / "my.pt"
    torch.save(torchvision.models.resnet18().state_dict(), path)
    dialog = window.files.menus.open_model_dialog()
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText(str(path))
    _press_open(qtbot, dialog)
    assert dialog.message().startswith("Opening") and not dialog.open_button.isEnabled()
    assert window.files.load_demo()  # what File > Demo does
    assert dialog.message() == "Opening my.pt was replaced by demo."
    assert dialog.isVisible() and dialog.open_button.isEnabled()
    release.set()
    assert win.wait_idle()
    assert type(window.session.model).__name__ == "DemoNet"  # the ResNet's load was dropped
    dialog.reject()
