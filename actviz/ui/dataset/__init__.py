"""Dataset scan in the window: the scan dialog, progress, per-channel table, top-k grid."""
