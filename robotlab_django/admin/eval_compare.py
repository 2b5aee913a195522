"""Two eval runs compared in the admin: the "compare" action of the eval runs' list, and its page.

The action (a POST of the change list, with its CSRF token) checks that two runs are selected and redirects to
``compare/?base=<older>&other=<newer>``; that page answers GET only, to staff with the view permission on eval
runs, each time it is asked. It shows the runs' totals and their deltas, a chart of every case's score in both
(server-side SVG, :func:`robotlab_django.evals.charts.case_bars`) and a table of the cases, the ones that got worse
first (:func:`robotlab_django.evals.compare.compare_runs`). Every case name and reason is escaped.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from robotlab_django.admin.display import AdminURLs, route_name, short
from robotlab_django.evals.charts import BASE_COLOR, OTHER_COLOR, case_bars
from robotlab_django.evals.compare import CaseRow, Comparison, Side, compare_runs
from robotlab_django.models import EvalRun
from robotlab_django.templatetags.robotlab_format import format_cost

if TYPE_CHECKING:
    from django.db.models import QuerySet

__all__ = ["CHART_CASES", "EvalRunCompareAdmin", "run_label"]

#: The chart shows this many cases (the table shows them all), worse first.
CHART_CASES = 60


def run_label(run: EvalRun) -> str:
    """``#12 support v3`` (``#12 support (code)`` for a run of the robot's code)."""
    return f"#{run.pk} {run.version or f'{run.robot_name} (code)'}"


def _number(value: float | None, places: int = 2) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def _signed(value: float | int | None, places: int = 2) -> str:
    """A delta with its sign (none on zero)."""
    if value is None:
        return "-"
    text = f"{value:+.{places}f}" if isinstance(value, float) else f"{value:+d}"
    return text.lstrip("+-") if float(text) == 0 else text


def _seconds(value: float | None, sign: bool = False) -> str:
    """A latency: milliseconds under a second, else seconds (``+`` before a positive delta)."""
    if value is None:
        return "-"
    if abs(value) < 1:
        milliseconds = round(value * 1000)
        text = f"{milliseconds} ms" if milliseconds else "0 ms"
    else:
        text = f"{value:.2f} s"
    return f"+{text}" if sign and not text.startswith(("-", "0 ")) else text


def _signed_cost(value: Decimal | None) -> str:
    if value is None:
        return "-"
    return ("-" if value < 0 else "+" if value > 0 else "") + format_cost(abs(value))


def _side(side: Side | None) -> dict[str, str]:
    if side is None:
        return {"score": "-", "latency": "-", "cost": "-"}
    return {"score": _number(side.score), "latency": _seconds(side.latency), "cost": format_cost(side.cost)}


def _why(row: CaseRow, base_label: str) -> str:
    """Why the second run lost points on the case; else why the first did, after the first run's label."""
    now = row.other.error or row.other.reason if row.other else ""
    before = row.base.error or row.base.reason if row.base else ""
    return short(now, 160) if now else short(f"{base_label}: {before}", 160) if before else ""


def _case_cells(row: CaseRow, base_label: str) -> dict[str, Any]:
    """The table's cells of ``row`` as text (the template escapes them)."""
    return {"name": row.name, "change": row.change, "base": _side(row.base), "other": _side(row.other),
            "why": _why(row, base_label),
            "score_delta": _signed(row.score_delta), "latency_delta": _seconds(row.latency_delta, sign=True),
            "cost_delta": _signed_cost(row.cost_delta)}


def _totals(comparison: Comparison) -> list[tuple[str, str, str, str]]:
    """The summary rows: (figure, first run, second run, delta)."""
    base, other = comparison.base_totals, comparison.other_totals
    return [
        (str(_("score")), _number(base.score, 3), _number(other.score, 3), _signed(comparison.score_delta, 3)),
        (str(_("passed")), f"{base.passed}/{base.cases}", f"{other.passed}/{other.cases}",
         _signed(comparison.passed_delta)),
        (str(_("mean latency")), _seconds(base.mean_latency), _seconds(other.mean_latency),
         _seconds(comparison.latency_delta, sign=True)),
        (str(_("cost")), format_cost(base.cost), format_cost(other.cost), _signed_cost(comparison.cost_delta)),
        (str(_("tokens")), str(base.tokens), str(other.tokens), _signed(comparison.tokens_delta)),
        (str(_("duration")), _seconds(base.duration), _seconds(other.duration),
         _seconds(comparison.duration_delta, sign=True)),
    ]


def _run(pk: str) -> EvalRun:
    if not pk.isdigit():
        raise Http404("Name two eval runs: ?base=<id>&other=<id>.")
    found = EvalRun.objects.select_related("version", "eval_set").filter(pk=int(pk)).first()
    if found is None:
        raise Http404("No such eval run.")
    return found


class EvalRunCompareAdmin(AdminURLs, admin.ModelAdmin):  # type: ignore[type-arg]
    """The "compare" action and page of eval runs (a base of :class:`~robotlab_django.admin.evals.EvalRunAdmin`)."""

    def get_urls(self) -> list[Any]:
        """The change list URLs plus ``compare/``."""
        return [path("compare/", self.admin_site.admin_view(self.compare_view), name=route_name(self.opts, "compare")),
                *super().get_urls()]

    @admin.action(description=_("Compare the two selected eval runs"), permissions=["view"])
    def compare_runs(self, request: HttpRequest, queryset: QuerySet[EvalRun]) -> HttpResponse | None:
        """Open the comparison of the two selected runs, the older one first."""
        chosen = sorted(queryset[:3], key=lambda run: (run.created_at, run.pk))
        if len(chosen) != 2:
            self.message_user(request, _("Select exactly two eval runs."), messages.WARNING)
            return None
        query = urlencode({"base": chosen[0].pk, "other": chosen[1].pk})
        return HttpResponseRedirect(f"{self._url('compare')}?{query}")

    @admin.display(description=_("compare"))
    def compare_link(self, obj: EvalRun) -> str:
        """A link to this run against the run of its set and robot before it (empty for the first)."""
        if obj is None or obj.pk is None:
            return ""
        before = (EvalRun.objects.filter(eval_set_id=obj.eval_set_id, robot_name=obj.robot_name)
                  .filter(created_at__lt=obj.created_at).order_by("-created_at", "-pk").first())
        if before is None:
            return "-"
        return format_html('<a href="{}?{}">{}</a>', self._url("compare"),
                           urlencode({"base": before.pk, "other": obj.pk}),
                           _("against %(run)s") % {"run": run_label(before)})

    def compare_view(self, request: HttpRequest) -> HttpResponse:
        """The two runs ``?base=`` and ``?other=`` side by side (GET only; the view permission on eval runs)."""
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        if not self.has_view_permission(request):
            raise PermissionDenied
        base, other = _run(request.GET.get("base", "")), _run(request.GET.get("other", ""))
        comparison = compare_runs(base, other)
        base_label, other_label = run_label(base), run_label(other)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Compare eval runs"),
            "opts": self.opts,
            "comparison": comparison,
            "base_label": base_label,
            "other_label": other_label,
            "base_color": BASE_COLOR,
            "other_color": OTHER_COLOR,
            "totals": _totals(comparison),
            "rows": [_case_cells(row, base_label) for row in comparison.rows],
            "counts": comparison.counts,
            "chart": case_bars(comparison.rows[:CHART_CASES], base_label=base_label, other_label=other_label,
                               title=str(_("Score per case"))),
            "chart_cases": min(len(comparison.rows), CHART_CASES),
            "changelist_url": self._url("changelist"),
            "base_url": self._url("change", base.pk),
            "other_url": self._url("change", other.pk),
        }
        return TemplateResponse(request, "robotlab/admin/eval_compare.html", context)
