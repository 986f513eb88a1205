"""The Qt-free state of an investigation: the Session and what it holds, saved and loaded here."""
