"""Which version of a robot a thread runs: labels' rollouts, sticky per thread, else the current version.

A robot without :class:`~robotlab_django.models.RobotVersion` rows runs from its code (:func:`choose` returns
``None``). A label with a rollout percentage takes that share of threads: a thread's bucket (0-99) is a hash of
the robot's name and the thread, so a thread keeps its version while the rollout stands, and a rollback
(:func:`rollback`) moves new runs at once.
"""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.utils import timezone

from robotlab_django.models import RobotLabel, RobotVersion

__all__ = ["NoSuchVersionError", "bucket", "choose", "resolve", "rollback", "set_current"]


class NoSuchVersionError(LookupError):
    """No version of the robot has that number or label."""


def bucket(robot_name: str, thread_key: object) -> int:
    """The thread's rollout bucket for ``robot_name``, 0-99: the same for every run of the thread."""
    digest = hashlib.sha256(f"{robot_name}\x00{thread_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def choose(robot_name: str, thread_key: object) -> RobotVersion | None:
    """The version a run of ``robot_name`` on the thread ``thread_key`` runs; ``None``: the robot's code.

    Labels with a rollout share the buckets in the order of their names (their percentages add up); the
    threads outside every rollout run the current version.
    """
    labels = list(RobotLabel.objects.filter(robot_name=robot_name, rollout_percent__gt=0)
                  .select_related("version").order_by("name"))
    if labels:
        slot, upto = bucket(robot_name, thread_key), 0
        for label in labels:
            upto += min(int(label.rollout_percent), 100)
            if slot < upto:
                return label.version
    return RobotVersion.objects.filter(robot_name=robot_name, is_current=True).first()


def resolve(robot_name: str, version: str | int) -> RobotVersion:
    """The version named by ``version``: its number (``3``, ``"v3"``), a label, or ``"current"``.

    Raises:
        NoSuchVersionError: none matches.
    """
    text = str(version).strip()
    found: RobotVersion | None
    if text == "current":
        found = RobotVersion.objects.filter(robot_name=robot_name, is_current=True).first()
    elif text.removeprefix("v").isdigit():
        found = RobotVersion.objects.filter(robot_name=robot_name, number=int(text.removeprefix("v"))).first()
    else:
        label = RobotLabel.objects.filter(robot_name=robot_name, name=text).select_related("version").first()
        found = label.version if label else None
    if found is None:
        raise NoSuchVersionError(f"Robot {robot_name!r} has no version {text!r}.")
    return found


def set_current(version: RobotVersion) -> RobotVersion:
    """Make ``version`` its robot's current version (the one it replaces is remembered for :func:`rollback`)."""
    with transaction.atomic():
        RobotVersion.objects.filter(robot_name=version.robot_name, is_current=True).exclude(
            pk=version.pk).update(is_current=False)
        version.is_current, version.made_current_at = True, timezone.now()
        version.save(update_fields=["is_current", "made_current_at"])
    return version


def rollback(robot_name: str) -> RobotVersion | None:
    """Stop every rollout of ``robot_name`` and make the version current before this one current again.

    New runs move at once. Returns the version now current (``None``: there was none before; the
    current version then stays, its rollouts stopped).
    """
    with transaction.atomic():
        RobotLabel.objects.filter(robot_name=robot_name).update(rollout_percent=0)
        versions = RobotVersion.objects.select_for_update().filter(robot_name=robot_name)
        current = versions.filter(is_current=True).first()
        previous = (versions.filter(is_current=False, made_current_at__isnull=False)
                    .order_by("-made_current_at").first())
        if previous is None:
            return current
        if current is not None:  # forgotten, so a second rollback goes further back
            versions.filter(pk=current.pk).update(is_current=False, made_current_at=None)
        return set_current(previous)
