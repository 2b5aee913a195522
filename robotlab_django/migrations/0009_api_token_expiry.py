"""API tokens expire (``ApiToken.expires_at``); the tokens issued before expiries existed expire 90 days from now."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import migrations, models
from django.utils import timezone

#: Days the tokens issued before this migration stay valid (``ROBOTLAB["API_TOKEN_DAYS"]``'s default).
GRACE_DAYS = 90


def expire_old_tokens(apps: Any, schema_editor: Any) -> None:
    """Give every unrevoked token without an expiry one, :data:`GRACE_DAYS` from now."""
    token = apps.get_model("robotlab", "ApiToken")
    token.objects.using(schema_editor.connection.alias).filter(
        revoked_at__isnull=True, expires_at__isnull=True).update(expires_at=timezone.now() + timedelta(days=GRACE_DAYS))


class Migration(migrations.Migration):
    dependencies = [("robotlab", "0008_backfill_rollups")]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(blank=True, help_text="Requests with the token get 401 from then on; empty: "
                                       "never.", null=True, verbose_name="expires at"),
        ),
        migrations.RunPython(expire_old_tokens, migrations.RunPython.noop),
    ]
