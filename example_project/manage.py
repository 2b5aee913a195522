#!/usr/bin/env python
"""The example project's manage.py: ``python example_project/manage.py runserver``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Run a management command with the example settings (the repository root and this folder importable)."""
    for folder in (HERE.parent, HERE):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
