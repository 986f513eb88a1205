"""Opening Hugging Face model folders in the window: a folder with its own code asks first,
with words about model code, and opens only when trusted."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
pytest.importorskip("tokenizers", reason="needs the hf extra (tokenizers)")

from actviz.ui.window.file_opening import ask_untrusted  # noqa: E402
from tests.io.hf_tiny import (  # noqa: E402
    remote_code_sandbox,
    save_remote_code_model,
    save_tiny_gpt2,
)
from tests.ui.conftest import LOAD_TIMEOUT_MS  # noqa: E402


@pytest.fixture
def remote_folder(tmp_path):
    return save_remote_code_model(tmp_path / "remote", save_tiny_gpt2(tmp_path / "gpt2"))


def test_remote_code_folder_is_asked_about_and_opens_only_when_trusted(
    qtbot, actviz_window, remote_folder, tmp_path
):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    before = window.session.model
    asked = []

    def ask(answer):
        def confirm(parent, path, message):
            asked.append((path, message.split(";")[0]))
            return answer

        return confirm

    window.confirm_untrusted = ask(False)
    with qtbot.waitSignal(window.model_load_failed, timeout=LOAD_TIMEOUT_MS):
        window.files.open_model_source(str(remote_folder))
    first = (str(remote_folder), f"{remote_folder}: this model runs Python code shipped with it")
    assert [(p, m.split(" (")[0]) for p, m in asked] == [first]
    assert window.session.model is before
    assert f"Not opened: {remote_folder} was not trusted." in window.centre.banner.texts()
    window.confirm_untrusted = ask(True)
    with remote_code_sandbox(tmp_path):
        with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
            window.files.open_model_source(str(remote_folder))
    assert len(asked) == 2
    assert type(window.session.model).__name__ == "EvilForCausalLM"


def test_the_default_question_names_model_code_for_a_folder(qtbot, actviz_window, remote_folder):
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    seen = []

    def answer_cancel():
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox)
        seen.append((box.windowTitle(), box.text(), box.defaultButton().text().replace("&", "")))
        box.defaultButton().click()  # Cancel is the default

    QTimer.singleShot(0, answer_cancel)
    assert ask_untrusted(window, str(remote_folder), "details") is False
    assert seen == [
        (
            "Untrusted model code",
            "Opening remote would run the Python code that comes with it.",
            "Cancel",
        )
    ]


def test_a_model_folder_typed_in_the_open_dialog_opens_with_its_tokenizer(
    qtbot, actviz_window, tmp_path
):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(size=(1400, 900), auto_run=True)
    window = win.window
    dialog = window.files.menus.open_model_dialog()
    dialog.tabs.setCurrentIndex(1)
    dialog.file_edit.setText(str(folder))
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert window.files.menus.model_dialog is None  # closed as opened
    loaded = window.session.loaded_model
    assert type(loaded.model).__name__ == "GPT2LMHeadModel" and loaded.kind == "hf"
    assert loaded.tokenizer is not None and loaded.task == "causal-lm"
    # The target box reads a token's text through the model's tokenizer.
    mat = loaded.tokenizer.get_vocab()["mat"]
    assert window.session.set_target_text("mat") == mat and window.session.target == mat


def test_a_text_model_without_input_says_to_type_and_a_dropped_one_brings_its_prompt(
    qtbot, actviz_window, tmp_path
):
    """A window with no input asked to "pick a sample" for a text model (the picker is off for
    one); a model folder dropped on such a window waited for an input with no word of one."""
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(size=(1280, 720), auto_run=True)
    window = win.window
    assert window.files.open_model_source(str(folder), wait=True)
    win.wait_idle()
    assert window.session.input is None
    placeholder = window.display.layers_placeholder.text()
    assert placeholder.startswith("Type a text in the box above and press Enter"), placeholder

    dropped = actviz_window(size=(1280, 720), auto_run=True)
    with qtbot.waitSignal(dropped.window.input_loaded, timeout=LOAD_TIMEOUT_MS):
        dropped.window.files.open_dropped(folder)
    dropped.wait_idle()
    assert dropped.session.input.kind == "text" and dropped.session.result is not None
