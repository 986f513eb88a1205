"""The "Channels that matter" dock: channels ranked by estimated (and verified) effect."""
