"""Fill the usage rollups from the result rows that exist (see robotlab_django.accounting.rollups)."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def backfill(apps: Any, schema_editor: Any) -> None:
    """Recompute every rollup from the result rows, in the migration's own model state."""
    from robotlab_django.accounting.rollups import rebuild

    rebuild(apps=apps, using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("robotlab", "0007_run_attachments")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
