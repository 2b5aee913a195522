"""A run's live events: coalesced, stored for replay, sent to the thread's group."""
