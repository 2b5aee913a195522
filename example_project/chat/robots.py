"""The example robots: ``chat`` (with the time and calculator tools) and the ``support`` network.

Both are registered with RobotLab, so the chat page offers them. ``support_network()`` builds a
network that sends a customer message to a classifier, then to the billing, technical or general
specialist it names (``robotlab.network.create_network``); only that specialist runs. Pick
``support`` when starting a conversation, or run ``manage.py support "I was charged twice"``.

With no LLM configured every robot uses :func:`demo_llm`, the offline demo model, and the classifier
uses :class:`DemoClassifier`, which answers with the category that :data:`KEYWORDS` picks, so the
offline demo routes deterministically: "invoice" or "refund" go to billing, "error" or "crash" to
technical, anything else to general.
"""

from __future__ import annotations

import os
import re
from typing import Any

from example_tools import calculate, current_time

import robotlab
from robotlab.llm import LLMRequest, LLMResponse
from robotlab.network import Network, create_network
from robotlab.testing import DemoLLM
from robotlab_django.registry import register_network, register_robot

__all__ = ["CATEGORIES", "KEYWORDS", "ChatRobot", "ConciergeRobot", "DemoClassifier", "classify", "demo_llm",
           "route_support", "support_network"]

#: The specialists of the support network, by the category the classifier answers.
CATEGORIES = {
    "billing": "You are the billing specialist: charges, refunds, invoices and plans. Be concise.",
    "technical": "You are the technical specialist: errors, crashes, setup and how-tos. Give numbered steps.",
    "general": "You are the general support agent. Answer kindly and briefly.",
}


def demo_llm() -> DemoLLM:
    """The offline demo model, streaming a word every 20 ms (``ROBOTLAB["LLM"]`` without a real model).

    ``ROBOTLAB_DEMO_DELAY`` sets another pace, in seconds a word (a slow reply shows what a second message does).
    """
    return DemoLLM(delay=float(os.environ.get("ROBOTLAB_DEMO_DELAY") or 0.02))


demo_llm.is_demo_model = True  # type: ignore[attr-defined]  # the chat page announces it


@register_robot
class ChatRobot:
    """A friendly assistant with the time and a calculator."""

    name = "chat"
    description = "A friendly assistant that can tell the time and calculate"

    @classmethod
    def build(cls, **options: Any) -> robotlab.Robot:
        """A fresh chat robot."""
        return robotlab.build(name=cls.name, description=cls.description,
                              system_prompt="You are a friendly assistant. Be concise. Use your tools.",
                              local_tools=[current_time, calculate], **options)


@register_robot
class ConciergeRobot:
    """An assistant that asks you before it answers (``AskUser``): the chat page shows its question as a
    small form, and the run waits parked, holding no worker, until you answer."""

    name = "concierge"
    description = "An assistant that asks you a question before it answers"

    @classmethod
    def build(cls, **options: Any) -> robotlab.Robot:
        """A fresh concierge robot."""
        return robotlab.build(name=cls.name, description=cls.description,
                              system_prompt="When anything is unclear, ask the user with your ask_user tool.",
                              local_tools=[robotlab.AskUser], **options)


#: Words of a customer message that pick a specialist when the classifier's reply names no category
#: (the offline demo model answers in sentences, not with a category).
KEYWORDS = {
    "billing": ("charge", "refund", "invoice", "bill", "payment", "price", "plan", "subscription"),
    "technical": ("error", "crash", "bug", "install", "setup", "broken", "login", "password", "slow"),
}


def classify(message: str) -> str:
    """The category with a word of ``message`` starting with one of its :data:`KEYWORDS` (billing first:
    "refunds", "charged"), else ``general``."""
    words = re.findall(r"[a-z]+", message.lower())
    picked = (name for name, keys in KEYWORDS.items() if any(word.startswith(keys) for word in words))
    return next(picked, "general")


class DemoClassifier(DemoLLM):
    """The offline demo model of the classifier: it answers with :func:`classify` of the last user message."""

    def _answer(self, request: LLMRequest) -> LLMResponse:
        users = [m for m in request.messages if m.get("role") == "user"]
        return LLMResponse(content=classify(str(users[-1].get("content") or "") if users else ""),
                           finish_reason="stop")


def route_support(result: Any) -> str | None:
    """The specialist: the category the classifier names, else one picked by keywords, else general."""
    if "classifier" not in result.context:
        return None
    reply = str(result.context["classifier"].reply or "").lower()
    named = [name for name in CATEGORIES if name in reply]
    if len(named) == 1:
        return named[0]
    return classify(str(result.context.get("run_params", {}).get("message") or ""))


@register_network(name="support", description="A classifier routes your message to the billing, technical or "
                  "general specialist")
def support_network(*, llm: Any = None) -> Network:
    """The support network: ``classifier`` -> one of ``billing``, ``technical``, ``general``.

    Args:
        llm: The LLM of every robot; the demo model when ``None`` and no real model is configured. With
            a demo model the classifier gets :class:`DemoClassifier` (the same pace).
    """
    if llm is None and robotlab.get_config().default_model() is None:
        llm = demo_llm()
    options: dict[str, Any] = {} if llm is None else {"llm": llm}
    classifier_llm = DemoClassifier(delay=llm.delay) if isinstance(llm, DemoLLM) else llm
    network = create_network(name="support", router=route_support)
    network.task("classifier", robotlab.build(
        name="classifier", system_prompt="Classify the customer's message. Answer with one word: billing, "
        "technical or general.", **({} if classifier_llm is None else {"llm": classifier_llm})))
    for category, prompt in CATEGORIES.items():
        network.task(category, robotlab.build(name=f"{category}_agent", system_prompt=prompt, **options),
                     depends_on="optional")
    return network
