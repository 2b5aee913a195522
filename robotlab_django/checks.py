"""System checks for ``settings.ROBOTLAB`` (run by ``manage.py check``, ``runserver``, ``migrate``).

===============  ===========================================================================
``robotlab.E001`` ``ROBOTLAB`` is not a dict.
``robotlab.E002`` A key has a value of the wrong type, outside its range, or not among its choices.
``robotlab.E003`` A dotted path (``LLM``, ``ROBOTS``, ``NETWORKS``) does not import, or a model setting
                  (``THREAD_MODEL``, ``RESULT_MODEL``, ``EVENT_MODEL``, ``STEP_MODEL``, ``SPAN_MODEL``) names no
                  installed model.
``robotlab.E004`` ``ROBOTLAB`` holds what looks like an API key or secret.
``robotlab.E005`` ``ONLINE_EVALS`` names an unknown robot, a bad rate or evaluator (``evals/checks.py``).
``robotlab.W001`` An unknown key (probably a typo; the hint suggests the closest key).
``robotlab.W002`` No LLM is configured: runs will fail until a model or a provider key is set.
``robotlab.W003`` The chat pages are routed but no channel layer is configured: nothing streams.
``robotlab.W004`` The chat pages need a login but ``LOGIN_URL`` resolves to no page (a 404 on login).
``robotlab.W006`` (``check --deploy``) The celery executor, and no worker consumes ``TASK_QUEUE``: runs stay queued.
``robotlab.W007`` A PostgreSQL database reuses connections unchecked (psycopg's pool or ``CONN_MAX_AGE``
                  without ``CONN_HEALTH_CHECKS``): a dropped connection fails a request.
``robotlab.W008`` The default model reaches no server: an id litellm cannot place with no ``API_BASE``, or a
                  provider's own API (``anthropic/...``) sent to ``API_BASE``.
``robotlab.W009`` (``check --deploy``) The celery executor with a Redis broker on kombu's own Redis transport:
                  a broker restart with a run in flight ends the worker node (Celery 5.7.0).
===============  ===========================================================================

Checks are registered in :meth:`robotlab_django.apps.RobotLabConfig.ready`; they never raise.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from robotlab_django.conf import SETTINGS, app_settings

if TYPE_CHECKING:
    from django.apps import AppConfig

__all__ = ["broker_transport_warnings", "check_broker_transport", "check_channel_layer", "check_database_connections",
           "check_llm_available", "check_login_url", "check_model_endpoint", "check_settings", "check_workers",
           "database_warnings"]

#: Providers whose names need no look-up in litellm (importing it takes seconds): placed, and not OpenAI's API.
_KNOWN_PROVIDERS = frozenset({"anthropic", "gemini", "vertex_ai", "bedrock", "azure", "azure_ai", "mistral", "cohere",
                              "ollama", "ollama_chat", "huggingface", "fireworks_ai", "perplexity", "cerebras",
                              "sambanova", "watsonx", "databricks", "replicate", "nvidia_nim", "sagemaker"})
#: litellm providers that speak OpenAI's chat API to whatever ``API_BASE`` names.
_OPENAI_SPEAKERS = frozenset({"ollama", "ollama_chat", "openai_like", "custom_openai", "litellm_proxy", "llamafile",
                              "text-completion-openai"})

_SECRET = re.compile(r"(API_?KEY|SECRET|TOKEN|PASSWORD|_KEY$)", re.IGNORECASE)
_POSITIVE = {"MAX_MESSAGE_LENGTH", "MAX_ATTACHMENT_BYTES", "ADMIN_USAGE_DAYS", "RETENTION_DAYS", "MAX_TOOL_ROUNDS",
             "REQUEST_TIMEOUT",
             "TASK_MAX_ATTEMPTS", "RUN_LEASE", "STREAM_FLUSH_INTERVAL", "STREAM_FLUSH_DELTAS",
             "API_TOKEN_DAYS", "RUN_RATE_LIMIT", "RUN_RATE_PERIOD",
             "MAX_ATTACHMENTS", "WORKER_WAIT_HINT"}
_GROUP_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _type_name(value: object) -> str:
    return type(value).__name__


def _invalid(key: str, message: str, hint: str | None = None) -> Error:
    return Error(f"ROBOTLAB['{key}'] {message}", hint=hint or SETTINGS[key].doc, id="robotlab.E002")


def _value_errors(key: str, value: Any) -> list[CheckMessage]:  # a setting: anything
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
    if key == "GROUP_PREFIX" and not _GROUP_PREFIX.match(value):
        return [_invalid(key, f"is {value!r}; use 1 to 60 ASCII letters, digits, '-', '_' or '.' (channels' rule "
                              "for group names).")]
    if key in {"ROBOTS", "NETWORKS"}:
        from robotlab_django.registry.entries import settings_entry_problem

        problems = {name: settings_entry_problem(target) or "its name is no str" for name, target in value.items()
                    if not isinstance(name, str) or settings_entry_problem(target)}
        if problems:
            kind = "robot" if key == "ROBOTS" else "network"
            return [_invalid(key, f"maps {kind} names to dotted paths or dicts of options; the entries "
                                  f"{list(problems)!r} are not: {'; '.join(problems.values())}.")]
    return []


def _resolution_errors(key: str, value: Any) -> list[CheckMessage]:  # a setting _value_errors checked
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
        for name, entry in value.items():
            target = entry.get("factory") if isinstance(entry, dict) else entry
            if isinstance(target, str):
                try:
                    import_string(target)
                except ImportError as exc:
                    errors.append(Error(f"ROBOTLAB['{key}']['{name}'] = {target!r} cannot be imported: {exc}",
                                        hint=f"Give the dotted path of a {kind.lower()} factory (a function "
                                             f"returning a {kind}, or a class with a build() classmethod).",
                                        id="robotlab.E003"))
        return errors
    if key in {"THREAD_MODEL", "RESULT_MODEL", "EVENT_MODEL", "STEP_MODEL", "SPAN_MODEL"}:
        from django.apps import apps

        try:
            apps.get_model(value)
        except (LookupError, ValueError) as exc:
            return [Error(f"ROBOTLAB['{key}'] = {value!r} names no installed model: {exc}",
                          hint="Use 'app_label.ModelName' of an installed app (robotlab_install --models "
                               "writes such models).", id="robotlab.E003")]
    return []


def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
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


def check_llm_available(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
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


def check_channel_layer(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
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


def check_login_url(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """``robotlab.W004`` when the chat pages need a login and ``LOGIN_URL`` is no page of the site."""
    from django.conf import settings
    from django.urls import NoReverseMatch, Resolver404, resolve, reverse

    # settings.ROBOTLAB_CHAT_LOGIN_REQUIRED as robotlab_django.chat.access reads it (a layer above the checks)
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


def check_workers(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """``robotlab.W006`` (``check --deploy``): the celery executor, and no worker answers on ``TASK_QUEUE``.

    Asks the workers over the broker for a second (:func:`robotlab_django.workers.presence.queue_consumers`),
    with the current Celery app: the project's, once its ``celery.py`` is imported (as ``manage.py`` does
    when the project's ``__init__.py`` imports it).
    """
    from robotlab_django.workers.presence import BrokerUnreachableError, queue_consumers

    if app_settings.EXECUTOR != "celery":
        return []
    queue = str(app_settings.TASK_QUEUE)
    hint = (f"Start a worker on the queue: celery -A yourproject worker -Q {queue} (docs: Live runs, Celery). "
            "Runs queued meanwhile wait; the chat page says so after ROBOTLAB['WORKER_WAIT_HINT'] seconds.")
    try:
        workers = queue_consumers(queue)
    except BrokerUnreachableError as exc:
        return [Warning(f"EXECUTOR is 'celery' but the Celery broker did not answer ({exc}): no run can be queued.",
                        hint="Check CELERY_BROKER_URL and that the broker runs.", id="robotlab.W006")]
    if workers:
        return []
    return [Warning(f"EXECUTOR is 'celery' but no Celery worker consumes the queue {queue!r}: queued runs will "
                    "wait until one does.", hint=hint, id="robotlab.W006")]


def check_broker_transport(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """``robotlab.W009`` (``check --deploy``): the celery executor, a Redis broker, kombu's own Redis transport.

    Reads the current Celery app's ``broker_url`` and ``broker_transport`` (see :func:`check_workers`).
    """
    if app_settings.EXECUTOR != "celery":
        return []
    from celery import current_app

    return broker_transport_warnings(current_app.conf.broker_url, current_app.conf.broker_transport)


def broker_transport_warnings(broker_url: object, transport: object) -> list[CheckMessage]:
    """The ``robotlab.W009`` warning of a broker URL and transport (see :mod:`robotlab_django.workers.redis_broker`).

    Args:
        broker_url: Celery's ``broker_url``: a URL, ``;``-separated URLs, a list of them, or ``None``.
        transport: Celery's ``broker_transport``: ``None``, an alias, a dotted path or a transport class.
    """
    from kombu.transport import resolve_transport

    first = broker_url[0] if isinstance(broker_url, list | tuple) and broker_url else broker_url
    scheme = str(first).split(";")[0].partition("://")[0] if isinstance(first, str) and "://" in first else ""
    try:
        chosen = transport if isinstance(transport, type) else resolve_transport(str(transport or scheme) or None)
    except Exception:  # an unknown or broken transport is Celery's to report, when it connects
        return []
    if chosen is not resolve_transport("redis"):
        return []  # another broker, robotlab_django.workers.redis_broker's transport, or a site's own
    return [Warning(
        "EXECUTOR is 'celery' with a Redis broker on kombu's own Redis transport: when the broker's Redis "
        "restarts while a run is in flight, a Celery 5.7 worker node exits (AttributeError in kombu's Redis "
        "channel) and no run is taken until it is started again.",
        hint='Set CELERY_BROKER_TRANSPORT = "robotlab_django.workers.redis_broker:Transport" (docs: Live '
             "runs, Survive a broker restart), and run workers under a supervisor.", id="robotlab.W009")]


def _default_model() -> str | None:
    if app_settings.DEFAULT_MODEL:
        return str(app_settings.DEFAULT_MODEL)
    from robotlab.config import get_config

    try:
        return get_config().default_model()
    except Exception:  # a broken RobotLab config file is reported when a robot runs
        return None


def check_model_endpoint(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """``robotlab.W008`` when the default model reaches no server (see the module docstring)."""
    if not isinstance(app_settings.raw, Mapping) or app_settings.LLM:
        return []
    model = _default_model()
    if not model:
        return []
    from robotlab.llm import litellm_places
    from robotlab.llm.transport import PROVIDERS, SERVER_PROVIDER

    api_base = app_settings.API_BASE
    prefix, slash, _name = model.partition("/")
    if prefix in PROVIDERS or prefix in _OPENAI_SPEAKERS:
        return []  # OpenAI's API at API_BASE, or at the provider's own URL
    if api_base is None:
        if (slash and prefix in _KNOWN_PROVIDERS) or litellm_places(model):
            return []
        return [Warning(
            f"ROBOTLAB['DEFAULT_MODEL'] = {model!r} names no provider litellm knows, and no API_BASE says which "
            "server serves it: every run would fail with litellm's \"LLM Provider NOT provided\".",
            hint="For a model on your own server (vLLM, LM Studio, Ollama), set ROBOTLAB['API_BASE'] to the "
                 "server's /v1 URL: the id is then sent to it as written. For a hosted model, start it with its "
                 "provider (openai/..., anthropic/...). Recipe: docs/django/local-models.md.",
            id="robotlab.W008")]
    if slash and (prefix in _KNOWN_PROVIDERS or litellm_places(model, api_base)):
        return [Warning(
            f"ROBOTLAB['DEFAULT_MODEL'] = {model!r} starts with litellm's provider {prefix!r}: requests go to "
            f"API_BASE = {api_base!r} in {prefix}'s own API, which only a proxy of {prefix} answers.",
            hint=f"If API_BASE is an OpenAI-compatible server (vLLM, LM Studio, Ollama's /v1) whose model id is "
                 f"{model!r}, write {SERVER_PROVIDER + '/' + model!r}. Recipe: docs/django/local-models.md.",
            id="robotlab.W008")]
    return []
def check_database_connections(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[CheckMessage]:
    """``robotlab.W007``: a PostgreSQL database whose reused connections are never checked.

    A connection the server dropped (a restart, a failover, ``pg_terminate_backend``) stays in psycopg's
    pool, or in a thread with ``CONN_MAX_AGE``, and fails the next request that takes it: one 500 per pooled
    connection. Django's ``CONN_HEALTH_CHECKS`` (for the pool: psycopg's ``check_connection``) replaces it first.
    """
    from django.conf import settings

    return database_warnings(getattr(settings, "DATABASES", {}))


def database_warnings(databases: Mapping[str, Mapping[str, Any]]) -> list[CheckMessage]:
    """The ``robotlab.W007`` warnings of a ``DATABASES`` setting (see :func:`check_database_connections`)."""
    messages: list[CheckMessage] = []
    for alias, database in databases.items():
        if "postgresql" not in str(database.get("ENGINE", "")):
            continue
        pool = (database.get("OPTIONS") or {}).get("pool")
        if pool:
            # Django builds the pool with check=ConnectionPool.check_connection when CONN_HEALTH_CHECKS is on,
            # else check=None: a "check" among the pool's options is then passed twice (a TypeError at the
            # first query)
            if isinstance(pool, Mapping) and "check" in pool:
                messages.append(Warning(
                    f"DATABASES['{alias}'] gives psycopg's pool a 'check' of its own: Django passes the pool's "
                    "check itself, so every connection fails (ConnectionPool() got multiple values for 'check').",
                    hint=f"Remove 'check' from OPTIONS['pool'] and set DATABASES['{alias}']['CONN_HEALTH_CHECKS'] "
                         "= True.",
                    id="robotlab.W007"))
            elif not database.get("CONN_HEALTH_CHECKS"):
                messages.append(Warning(
                    f"DATABASES['{alias}'] uses psycopg's pool without CONN_HEALTH_CHECKS: a connection the server "
                    "dropped is handed out again and fails its request (a 500 for each pooled connection).",
                    hint=f"Set DATABASES['{alias}']['CONN_HEALTH_CHECKS'] = True: Django then gives the pool "
                         "psycopg_pool.ConnectionPool.check_connection.",
                    id="robotlab.W007"))
        elif database.get("CONN_MAX_AGE", 0) != 0 and not database.get("CONN_HEALTH_CHECKS"):
            messages.append(Warning(
                f"DATABASES['{alias}'] keeps connections between requests (CONN_MAX_AGE) without "
                "CONN_HEALTH_CHECKS: a connection the server dropped fails the next request of each thread.",
                hint=f"Set DATABASES['{alias}']['CONN_HEALTH_CHECKS'] = True, or use psycopg's pool with a check.",
                id="robotlab.W007"))
    return messages
