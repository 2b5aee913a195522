"""Private robot modules are not autodiscovered; importing this one is a test failure."""

from __future__ import annotations

raise AssertionError("autodiscovery imported a private module")
