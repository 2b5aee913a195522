"""System checks for ``settings.ROBOTLAB`` (run by ``manage.py check``, ``runserver``, ``migrate``).

===============  ===========================================================================
``robotlab.E001`` ``ROBOTLAB`` is not a dict.
``robotlab.E002`` A key has a value of the wrong type, outside its range, or not among its choices.
``robotlab.E003`` A dotted path (``LLM``, ``ROBOTS``, ``NETWORKS``) does not import, or a model setting
                  (``THREAD_MODEL``, ``RESULT_MODEL``, ``EVENT_MODEL``, ``STEP_MODEL``) names no installed model.
``robotlab.E004`` ``ROBOTLAB`` holds what looks like an API key or secret.
``robotlab.W001`` An unknown key (probably a typo; the hint suggests the closest key).
``robotlab.W002`` No LLM is configured: runs will fail until a model or a provider key is set.
``robotlab.W003`` The chat pages are routed but no channel layer is configured: nothing streams.
``robotlab.W004`` The chat pages need a login but ``LOGIN_URL`` resolves to no page (a 404 on login).
===============  ===========================================================================

Checks are registered in :meth:`robotlab_django.apps.RobotLabConfig.ready`; they never raise.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, cast

from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from .conf import SETTINGS, app_settings

__all__ = ["check_channel_layer", "check_llm_available", "check_login_url", "check_settings"]

_SECRET = re.compile(r"(API_?KEY|SECRET|TOKEN|PASSWORD|_KEY$)", re.IGNORECASE)
_POSITIVE = {"MAX_MESSAGE_LENGTH", "MAX_ATTACHMENT_BYTES", "ADMIN_USAGE_DAYS", "RETENTION_DAYS", "MAX_TOOL_ROUNDS",
             "REQUEST_TIMEOUT",
             "TASK_MAX_ATTEMPTS", "RUN_LEASE", "STREAM_FLUSH_INTERVAL", "STREAM_FLUSH_DELTAS"}
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _type_name(value: Any) -> str:
    return type(value).__name__


def _invalid(key: str, message: str, hint: str | None = None) -> Error:
    return Error(f"ROBOTLAB['{key}'] {message}", hint=hint or SETTINGS[key].doc, id="robotlab.E002")


def _value_errors(key: str, value: Any) -> list[CheckMessage]:
    spec = SETTINGS[key]
    if value is None:
        return [] if spec.nullable else [_invalid(key, "must not be None.")]
    if key == "LLM" and callable(value):
        return []
    accepted = spec.types
    is_bool = isinstance(value, bool)
    if (is_bool and bool not in accepted) or not isinstance(value, accepted):
        names = " or ".join(t.__name__ for t in accepted)
        return [_invalid(key, f"must be {names}, not {_type_name(value)} ({value!r}).")]
    value = cast(Any, value)  # its type was checked above
    if spec.choices and value not in spec.choices:
        return [_invalid(key, f"is {value!r}; choose one of: {', '.join(map(repr, spec.choices))}.")]
    if key in _POSITIVE and value <= 0:
        return [_invalid(key, f"must be greater than 0, not {value!r}.")]
    if key == "LLM_MAX_RETRIES" and value < 0:
        return [_invalid(key, f"must be 0 or more, not {value!r}.")]
    if key == "ROBOT_MODULES":
        bad = [item for item in value if not isinstance(item, str) or not _MODULE_NAME.match(item)]
        if bad:
            return [_invalid(key, f"must list module names; {bad!r} are not.")]
    if key in {"ROBOTS", "NETWORKS"}:
        bad = [name for name, target in value.items()
               if not isinstance(name, str) or not (isinstance(target, str) or callable(target))]
        if bad:
            kind = "robot" if key == "ROBOTS" else "network"
            return [_invalid(key, f"maps {kind} names to dotted paths; the entries {bad!r} are not.")]
    return []


def _resolution_errors(key: str, value: Any) -> list[CheckMessage]:
    if key == "LLM" and isinstance(value, str):
        try:
            import_string(value)
        except ImportError as exc:
            return [Error(f"ROBOTLAB['LLM'] = {value!r} cannot be imported: {exc}",
                          hint="Give the dotted path of a callable returning an LLM, such as "
                               "'robotlab.testing.DemoLLM'.", id="robotlab.E003")]
    if key in {"ROBOTS", "NETWORKS"}:
        kind = "Robot" if key == "ROBOTS" else "Network"
        errors: list[CheckMessage] = []
        for name, target in value.items():
            if isinstance(target, str):
                try:
                    import_string(target)
                except ImportError as exc:
                    errors.append(Error(f"ROBOTLAB['{key}']['{name}'] = {target!r} cannot be imported: {exc}",
                                        hint=f"Give the dotted path of a {kind.lower()} factory (a function "
                                             f"returning a {kind}, or a class with a build() classmethod).",
                                        id="robotlab.E003"))
        return errors
    if key in {"THREAD_MODEL", "RESULT_MODEL", "EVENT_MODEL", "STEP_MODEL"}:
        from django.apps import apps

        try:
            apps.get_model(value)
        except (LookupError, ValueError) as exc:
            return [Error(f"ROBOTLAB['{key}'] = {value!r} names no installed model: {exc}",
                          hint="Use 'app_label.ModelName' of an installed app (robotlab_install --models "
                               "writes such models).", id="robotlab.E003")]
    return []


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate every key of ``settings.ROBOTLAB`` (``robotlab.E001`` to ``E004``, ``W001``)."""
    raw = app_settings.raw
    if not isinstance(raw, Mapping):
        return [Error(f"ROBOTLAB must be a dict, not {_type_name(raw)}.",
                      hint="Write ROBOTLAB = {\"DEFAULT_MODEL\": \"openai/gpt-4o-mini\"} (every key is optional).",
                      id="robotlab.E001")]
    messages: list[CheckMessage] = []
    for key, value in raw.items():
        if not isinstance(key, str):
            messages.append(Warning(f"ROBOTLAB has a key that is not a string: {key!r}.", id="robotlab.W001"))
            continue
        if key not in SETTINGS:
            if _SECRET.search(key):
                messages.append(Error(
                    f"ROBOTLAB['{key}'] looks like an API key or secret; RobotLab never reads keys from settings.",
                    hint="Remove it and set the provider's environment variable (OPENAI_API_KEY, "
                         "ANTHROPIC_API_KEY, ...), which litellm reads.", id="robotlab.E004"))
                continue
            close = difflib.get_close_matches(key, list(SETTINGS), n=1)
            messages.append(Warning(
                f"ROBOTLAB has an unknown key '{key}'; it is ignored.",
                hint=f"Did you mean '{close[0]}'?" if close else f"Known keys: {', '.join(sorted(SETTINGS))}.",
                id="robotlab.W001"))
            continue
        errors = _value_errors(key, value)
        messages.extend(errors or _resolution_errors(key, value))
    return messages


def check_llm_available(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``robotlab.W002`` when robots have no model to use (no setting, no ``ROBOT_LAB_MODEL``, no key)."""
    if not isinstance(app_settings.raw, Mapping) or app_settings.LLM or app_settings.DEFAULT_MODEL:
        return []
    from robotlab.config import PROVIDER_KEY_VARIABLES, get_config

    try:
        if get_config().default_model():
            return []
    except Exception:  # a broken RobotLab config file is reported when a robot runs
        return []
    keys = ", ".join(PROVIDER_KEY_VARIABLES.values())
    return [Warning(
        "No LLM is configured: robots that set no model of their own will fail to run.",
        hint=f"Set ROBOTLAB['DEFAULT_MODEL'] or ROBOT_LAB_MODEL and a provider key ({keys}); for an offline "
             "demo set ROBOTLAB['LLM'] = 'robotlab.testing.DemoLLM'. Silence with SILENCED_SYSTEM_CHECKS.",
        id="robotlab.W002")]


def _chat_pages_routed() -> bool:
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("robotlab:thread_list")
    except (NoReverseMatch, ImportError):
        return False
    except Exception:  # a broken URLconf is Django's own check (urls.E004 and friends) to report
        return False
    return True


def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``robotlab.W003`` when the chat pages are routed and ``CHANNEL_LAYERS`` is missing.

    Without a layer the websocket connects but no event ever arrives: the reply shows up all at once from
    the page's poll, which looks like a slow model rather than a missing setting.
    """
    from django.conf import settings

    if getattr(settings, "CHANNEL_LAYERS", None) or not _chat_pages_routed():
        return []
    return [Warning(
        "The chat pages are routed but CHANNEL_LAYERS is not set: replies will not stream.",
        hint='Add CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}} for one '
             'process, or "channels_redis.pubsub.RedisPubSubChannelLayer" with Redis (docs: '
             '"Add RobotLab to your Django project").', id="robotlab.W003")]


def check_login_url(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``robotlab.W004`` when the chat pages need a login and ``LOGIN_URL`` is no page of the site."""
    from django.conf import settings
    from django.urls import NoReverseMatch, Resolver404, resolve, reverse

    # settings.ROBOTLAB_CHAT_LOGIN_REQUIRED as robotlab_django.access reads it (a layer above the checks)
    if not getattr(settings, "ROBOTLAB_CHAT_LOGIN_REQUIRED", True) or not _chat_pages_routed():
        return []
    login_url = str(settings.LOGIN_URL)
    try:
        if "/" in login_url:
            if login_url.startswith(("http://", "https://")):
                return []  # another site's login (single sign-on): not ours to resolve
            resolve(login_url.split("?")[0])
        else:
            reverse(login_url)
    except (Resolver404, NoReverseMatch):
        return [Warning(
            f"The chat pages redirect to LOGIN_URL = {login_url!r}, which is no page of this site: "
            "logging in is a 404.",
            hint='Add path("accounts/", include("django.contrib.auth.urls")) to your URLconf (RobotLab ships '
                 "its registration/login.html), set LOGIN_URL to your login page, or set "
                 "ROBOTLAB_CHAT_LOGIN_REQUIRED = False.", id="robotlab.W004")]
    return []
