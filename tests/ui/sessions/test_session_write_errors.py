"""Saving a session or writing a report where it cannot go: one line naming the file asked for.

They said "cannot save the session: [Errno 21] Is a directory: '/tmp/.x.j0ek067i.tmp' ->
'/tmp/x'" (the temporary file's name, "save the session" twice), ``save_session`` and
``export_report`` with ``wait=True`` answered True although nothing was written, and a failed
report's error stayed in the banner after the next report was written.
"""

from __future__ import annotations

from tests.ui.conftest import small_conv_window


def test_saving_a_session_to_a_folder_or_a_missing_folder(actviz_window, tmp_path):
    win = small_conv_window(actviz_window)
    sessions = win.sessions.feature
    assert not sessions.save_session(tmp_path, wait=True)
    text = win.banner_messages()[-1]
    assert text == f"Could not save the session: {tmp_path}: is a folder; give a file name"
    # The banner holds the reason; the status bar's one line is not cut mid-sentence.
    assert win.status_text() == "Could not save the session: see the message above"
    missing = tmp_path / "nowhere" / "s.actviz"
    assert not sessions.save_session(missing, wait=True)
    text = win.banner_messages()[-1]
    assert text.endswith(f"{missing}: the folder {missing.parent} does not exist")
    assert not list(tmp_path.glob("**/*.tmp"))
    good = tmp_path / "s.actviz"
    assert sessions.save_session(good, wait=True) and good.is_file()
    assert not any("Could not save" in t for t in win.banner_messages())


def test_a_written_report_clears_the_last_reports_failure(actviz_window, tmp_path):
    win = small_conv_window(actviz_window)
    sessions = win.sessions.feature
    win.window.host.show_warning("a session note", "session")
    assert not sessions.export_report(tmp_path, wait=True)
    assert any(
        t.startswith(f"Could not write the report: {tmp_path}: is a folder")
        for t in win.banner_messages()
    )
    assert win.status_text() == "Could not write the report: see the message above"
    assert sessions.export_report(tmp_path / "r.html", wait=True)
    assert (tmp_path / "r.html").is_file()
    assert not any("Could not write the report" in t for t in win.banner_messages())
    assert "a session note" in win.banner_messages()  # another source's message stays


def test_a_session_that_does_not_open_has_a_short_status(actviz_window, tmp_path):
    win = small_conv_window(actviz_window)
    bad = tmp_path / "notes.actviz"
    bad.write_text("hello")
    assert not win.sessions.feature.open_session(bad, wait=True)
    assert any(t.startswith("Could not open the session:") for t in win.banner_messages())
    assert win.status_text() == "The session notes.actviz was not opened: see the message above"
