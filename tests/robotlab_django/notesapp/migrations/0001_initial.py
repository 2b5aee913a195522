"""The notes app's tables (made by ``makemigrations notesapp``, wrapped to the line length)."""

from __future__ import annotations

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Projects and notes."""

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=40)),
                ("team", models.CharField(blank=True, default="", max_length=20)),
            ],
        ),
        migrations.CreateModel(
            name="Note",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("title", models.CharField(max_length=40)),
                ("body", models.TextField(blank=True, default="", help_text="What the note says.")),
                ("status", models.CharField(choices=[("open", "Open"), ("done", "Done")], default="open",
                                            max_length=8)),
                ("priority", models.PositiveSmallIntegerField(
                    default=1, validators=[django.core.validators.MaxValueValidator(5)])),
                ("due", models.DateField(blank=True, null=True)),
                ("amount", models.DecimalField(decimal_places=2, default=0, max_digits=8)),
                ("secret", models.CharField(blank=True, default="", max_length=40)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="notes",
                                            to=settings.AUTH_USER_MODEL)),
                ("project", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                              related_name="notes", to="notesapp.project")),
            ],
        ),
    ]
