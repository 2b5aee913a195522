"""The push-notification configs of A2A tasks: a webhook a task's owner registered for the task's state changes.

A config belongs to its task's run row and to the user who registered it (the row's owner); the A2A server
(:mod:`robotlab_django.a2a.push`) creates, reads, lists and deletes them for their owner only, and
:mod:`robotlab_django.protocols.push` sends each state change of the task to the config's URL.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from robotlab_django.storable import StorableCharField

__all__ = ["PushNotificationConfig"]


class PushNotificationConfig(models.Model):
    """A webhook registered for one A2A task (a run row): where its state changes are POSTed, signed with ``token``.

    ``token`` is the client's (or one made for it when it sent none): it is sent back in ``X-A2A-Notification-Token``
    and keys the HMAC-SHA256 signature of each notification's body, so it is stored as it is, shown to the config's
    owner only, and never logged. ``last_state`` is the last task state sent, so a state repeated (a run executed
    again after its worker was lost starts ``working`` twice) is sent once.
    """

    result = models.ForeignKey("robotlab.RobotResult", verbose_name=_("task's run"), on_delete=models.CASCADE,
                               related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE,
                             related_name="+")
    config_id = StorableCharField(_("config id"), max_length=200)
    url = models.URLField(_("webhook URL"), max_length=2000)
    token = models.CharField(_("token"), max_length=500)
    auth_scheme = models.CharField(_("authentication scheme"), max_length=50, blank=True, default="")
    auth_credentials = models.CharField(_("authentication credentials"), max_length=2000, blank=True, default="")
    last_state = models.CharField(_("last state sent"), max_length=40, blank=True, default="")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("A2A push-notification config")
        verbose_name_plural = _("A2A push-notification configs")
        ordering = ("created_at", "id")
        constraints = [models.UniqueConstraint(fields=("result", "config_id"), name="robotlab_push_config_unique")]

    def __str__(self) -> str:
        return f"{self.config_id} of run {self.result_id}"
