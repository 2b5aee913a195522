"""A project's own models, as a robot would work on them: notes that belong to a user, in projects."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models


class Project(models.Model):
    """A project notes may belong to."""

    name = models.CharField(max_length=40)
    team = models.CharField(max_length=20, blank=True, default="")

    def __str__(self) -> str:
        return self.name


class Note(models.Model):
    """A user's note."""

    class Status(models.TextChoices):
        """Where a note stands."""

        OPEN = "open", "Open"
        DONE = "done", "Done"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    title = models.CharField(max_length=40)
    body = models.TextField(blank=True, default="", help_text="What the note says.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    priority = models.PositiveSmallIntegerField(default=1, validators=[MaxValueValidator(5)])
    due = models.DateField(null=True, blank=True)
    amount = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="notes")
    secret = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.title

    def clean(self) -> None:
        """A done note says what was done."""
        if self.status == self.Status.DONE and not self.body:
            raise ValidationError("A done note needs a body saying what was done.")
