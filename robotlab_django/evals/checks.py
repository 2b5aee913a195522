"""The system check of ``ROBOTLAB["ONLINE_EVALS"]`` (``robotlab.E005``): each entry's robot, rate and evaluators.

At run time a malformed entry is only warned about, once, and its robot's runs go unscored
(:func:`robotlab_django.evals.online_scoring.online_config`); this check says so at ``manage.py check``,
``runserver`` and ``migrate`` instead, naming the bad value: a robot no one registered, a rate that is not a number
from 0 to 1, evaluators that are not a list of specs, an unknown ``kind``, a spec without what its kind needs, a
regular expression that does not compile, a callable path that does not import or names a function not marked
:func:`~robotlab_django.evals.evaluators.evaluator`, a judge robot no one registered. It reads no database (a
judge's ``version`` is resolved when it runs). Registered in :meth:`robotlab_django.apps.RobotLabConfig.ready`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from robotlab_django.conf import SETTINGS, app_settings
from robotlab_django.evals.evaluators import KINDS
from robotlab_django.registry import registry

if TYPE_CHECKING:
    from django.apps import AppConfig

__all__ = ["check_online_evals", "spec_problems"]

#: What each evaluator kind needs in its spec.
REQUIRED = {"regex": ("pattern",), "json_schema": ("schema",), "callable": ("path",), "judge": ("robot",)}
_ALL_KINDS = (*sorted(KINDS), "judge")


def _callable_problem(path: object) -> str | None:
    try:
        function = import_string(str(path))
    except ImportError as exc:
        return f"'path' {path!r} cannot be imported: {exc}"
    if not getattr(function, "robotlab_evaluator", False):
        return f"'path' {path!r} is not marked @robotlab_django.evals.evaluators.evaluator"
    return None


def spec_problems(spec: object, robots: Sequence[str]) -> list[str]:
    """What is wrong with one evaluator ``spec`` (empty when nothing is); ``robots``: the registered names."""
    if not isinstance(spec, Mapping):
        return [f"is {spec!r}, not a spec (a dict with a 'kind')"]
    kind = spec.get("kind")
    if kind not in _ALL_KINDS:
        return [f"has the unknown kind {kind!r}; choose one of: {', '.join(_ALL_KINDS)}"]
    missing = [key for key in REQUIRED.get(str(kind), ()) if key not in spec]
    if missing:
        return [f"({kind}) lacks {', '.join(repr(key) for key in missing)}"]
    if kind == "regex":
        try:
            re.compile(str(spec["pattern"]))
        except re.error as exc:
            return [f"(regex) 'pattern' {spec['pattern']!r} does not compile: {exc}"]
    if kind == "json_schema" and not isinstance(spec["schema"], Mapping):
        return [f"(json_schema) 'schema' is {spec['schema']!r}, not a dict"]
    if kind == "callable":
        problem = _callable_problem(spec["path"])
        return [f"(callable) {problem}"] if problem else []
    if kind == "judge" and spec["robot"] not in robots:
        return [f"(judge) 'robot' {spec['robot']!r} is no registered robot"]
    return []


def _entry_problems(name: object, entry: object, robots: Sequence[str]) -> list[str]:
    if name not in robots:
        return [f"names the robot {name!r}, which is not registered (known: {', '.join(robots) or 'none'})"]
    if not isinstance(entry, Mapping):
        return [f"is {entry!r}, not a dict with 'rate' and 'evaluators'"]
    problems = []
    rate = entry.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        problems.append(f"has the sampling rate {rate!r}; it must be a number from 0 to 1")
    evaluators = entry.get("evaluators")
    if not isinstance(evaluators, list) or not evaluators:
        problems.append(f"has the evaluators {evaluators!r}; they must be a non-empty list of specs")
        return problems
    for index, spec in enumerate(evaluators):
        problems += [f"evaluator {index} {problem}" for problem in spec_problems(spec, robots)]
    unknown = sorted(str(key) for key in entry if key not in ("rate", "evaluators"))
    if unknown:
        problems.append(f"has unknown keys {unknown!r} (it reads 'rate' and 'evaluators')")
    return problems


def check_online_evals(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """One ``robotlab.E005`` error per problem of ``ROBOTLAB["ONLINE_EVALS"]``, naming the robot and the value."""
    everything = app_settings.ONLINE_EVALS
    if not isinstance(everything, Mapping):
        return []  # robotlab.E002 reports a value that is not a dict
    robots = registry.names()
    return [Error(f"ROBOTLAB['ONLINE_EVALS'][{name!r}] {problem}.", hint=SETTINGS["ONLINE_EVALS"].doc,
                  id="robotlab.E005")
            for name, entry in everything.items() for problem in _entry_problems(name, entry, robots)]
