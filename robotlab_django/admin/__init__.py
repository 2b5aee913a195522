"""The admin: threads, results with transcripts and usage charts, run control, erasure, tokens, versions, evals."""

from __future__ import annotations

from robotlab_django.admin import (  # noqa: F401  (they register their admins)
    approvals,
    effects,
    online_scores,
    tokens,
)
from robotlab_django.admin.evals import EvalCaseAdmin, EvalRunAdmin, EvalSetAdmin
from robotlab_django.admin.inlines import RobotResultInline, RunStepInline
from robotlab_django.admin.registration import register_models  # registers the app's own models' admins
from robotlab_django.admin.results import RobotResultAdmin
from robotlab_django.admin.threads import ThreadAdmin
from robotlab_django.admin.versions import RobotLabelAdmin, RobotVersionAdmin

__all__ = ["EvalCaseAdmin", "EvalRunAdmin", "EvalSetAdmin", "RobotLabelAdmin", "RobotResultAdmin", "RobotResultInline",
           "RobotVersionAdmin", "RunStepInline", "ThreadAdmin", "register_models"]
