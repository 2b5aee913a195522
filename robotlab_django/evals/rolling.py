"""The rolling online score per robot version, per day: what the admin's usage page charts.

Each day's rolling score is the mean of the online scores (:class:`~robotlab_django.models.OnlineScore`) of the
``window`` days up to it, per robot and version (a run of the robot's code counts under its code's prompt hash). One
aggregate query reads the sums and counts per day; the rolling means are folded here. Runs that no evaluator could
score (``score`` empty) are left out.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.safestring import SafeString

from robotlab_django.accounting.usage import PALETTE
from robotlab_django.evals.charts import Line, score_lines
from robotlab_django.models import OnlineScore

__all__ = ["RollingReport", "VersionScores", "rolling_scores"]


@dataclass
class VersionScores:
    """A robot version's online scores: runs scored and mean over the period, the rolling score per day."""

    robot_name: str
    version_id: int | None
    version_number: int | None
    code_hash: str
    color: str
    runs: int = 0
    total: float = 0.0
    rolling: list[float | None] = field(default_factory=list)
    window_runs: list[int] = field(default_factory=list)

    @property
    def version_text(self) -> str:
        """``v3``, or ``code 1a2b3c4d`` for the robot's code (its prompt hash)."""
        if self.version_number is not None:
            return f"v{self.version_number}"
        return f"code {self.code_hash[:8]}" if self.code_hash else "code"

    @property
    def label(self) -> str:
        """``robot v3``, or ``robot code 1a2b3c4d``."""
        return f"{self.robot_name} {self.version_text}"

    @property
    def mean(self) -> float | None:
        """The mean score of the runs scored in the period."""
        return self.total / self.runs if self.runs else None

    @property
    def latest(self) -> float | None:
        """The last day's rolling score (``None`` when no run was scored in the window before it)."""
        return self.rolling[-1] if self.rolling else None


@dataclass
class RollingReport:
    """The rolling scores of ``days`` up to ``end``, each over ``window`` days, and their chart."""

    start: dt.date
    end: dt.date
    window: int
    days: list[dt.date]
    series: list[VersionScores]

    @property
    def chart(self) -> SafeString:
        """The rolling scores per day as lines, one per version (escaped SVG)."""
        lines = [Line(item.label, item.color, item.rolling,
                      ["-" if value is None else f"{value:.2f} over {count} run(s)"
                       for value, count in zip(item.rolling, item.window_runs, strict=True)])
                 for item in self.series]
        return score_lines(self.days, lines, title=f"Online score per version ({self.window}-day rolling mean)")


def _rows(since: dt.date, end: dt.date, robot_name: str) -> Any:
    tz = timezone.get_current_timezone()
    queryset = OnlineScore.objects.filter(
        score__isnull=False, created_at__gte=dt.datetime.combine(since, dt.time.min, tzinfo=tz),
        created_at__lt=dt.datetime.combine(end + dt.timedelta(days=1), dt.time.min, tzinfo=tz))
    if robot_name:
        queryset = queryset.filter(robot_name=robot_name)
    return (queryset.annotate(day=TruncDate("created_at", tzinfo=tz))
            .values("day", "robot_name", "version_id", "version__number", "code_hash")
            .annotate(runs=Count("pk"), total=Sum("score"))
            .order_by())


def rolling_scores(*, days: int = 30, window: int = 7, end: dt.date | None = None,
                   robot_name: str = "") -> RollingReport:
    """The rolling online score per robot version over ``days`` days up to ``end`` (today), ``window`` days each.

    Days are in the current time zone; ``robot_name`` keeps one robot's versions.
    """
    days, window = max(1, int(days)), max(1, int(window))
    end = end or timezone.localdate()
    start = end - dt.timedelta(days=days - 1)
    since = start - dt.timedelta(days=window - 1)
    index: dict[tuple[str, int | None, str], VersionScores] = {}
    sums: dict[tuple[str, int | None, str], dict[dt.date, tuple[int, float]]] = {}
    for row in _rows(since, end, robot_name):
        code = "" if row["version_id"] is not None else row["code_hash"] or ""
        key = (row["robot_name"], row["version_id"], code)
        if key not in index:
            index[key] = VersionScores(robot_name=key[0], version_id=key[1], version_number=row["version__number"],
                                       code_hash=code, color="")
            sums[key] = {}
        runs, total = sums[key].get(row["day"], (0, 0.0))
        sums[key][row["day"]] = (runs + int(row["runs"]), total + float(row["total"] or 0.0))
    calendar = [start + dt.timedelta(days=offset) for offset in range(days)]
    for key, item in index.items():
        per_day = sums[key]
        for day, (runs, total) in per_day.items():
            if day >= start:
                item.runs += runs
                item.total += total
        for day in calendar:
            window_days = [day - dt.timedelta(days=back) for back in range(window)]
            runs = sum(per_day.get(when, (0, 0.0))[0] for when in window_days)
            total = sum(per_day.get(when, (0, 0.0))[1] for when in window_days)
            item.rolling.append(total / runs if runs else None)
            item.window_runs.append(runs)
    series = sorted(index.values(), key=lambda item: (item.robot_name, item.version_number is None,
                                                      item.version_number or 0, item.code_hash))
    for position, item in enumerate(series):  # by robot, its versions in order, then its code
        item.color = PALETTE[position % len(PALETTE)]
    return RollingReport(start=start, end=end, window=window, days=calendar, series=series)
