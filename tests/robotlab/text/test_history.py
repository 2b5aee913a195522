from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from robotlab.errors import DependencyError
from robotlab.text import analysis as text_analysis
from robotlab.text.compression import HistoryCompressor
from robotlab.text.history_search import MIN_SCORE_LENGTH, HistoryResult, search_history

Message = dict[str, Any]


def system(content: str = "You are a helpful assistant.") -> Message:
    return {"role": "system", "content": content}


def user(content: Any) -> Message:
    return {"role": "user", "content": content}


def assistant(content: Any, **extra: Any) -> Message:
    return {"role": "assistant", "content": content, **extra}


def tool(content: str = '{"result": 42}', call_id: str = "call_1") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tool_call(call_id: str = "call_1", content: Any = None) -> Message:
    call = {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return assistant(content, tool_calls=[call])


def compressor(
    messages: list[Any],
    *,
    recent_turns: int = 2,
    keep: float = 0.6,
    drop: float = 0.2,
    summarizer: Any = None,
) -> HistoryCompressor:
    return HistoryCompressor(
        messages=messages, recent_turns=recent_turns, keep_threshold=keep, drop_threshold=drop, summarizer=summarizer
    )


def contains(result: list[Any], message: Any) -> bool:
    return any(item is message for item in result)


@pytest.fixture
def missing_stemmer(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise ImportError("No module named 'snowballstemmer'")

    monkeypatch.setattr(text_analysis, "load_classifier", fail)


RAILS_TURN = "Ruby on Rails is a web framework using the MVC architecture and ActiveRecord ORM"
RAILS_ANSWER = "Rails uses MVC and has ActiveRecord for database access"
OCEAN_TURN = "The Pacific Ocean is the largest body of water covering most of the Earth surface"
OCEAN_ANSWER = "The ocean is vast and deep with coral reefs"
RECENT = [
    user("How does Rails routing work with ActiveRecord associations?"),
    assistant("Rails routing maps URLs to controller actions via routes.rb"),
    user("What is the Rails convention over configuration principle?"),
    assistant("Convention over configuration means sensible defaults"),
]


def conversation(*older: Message) -> list[Message]:
    return [system(), *older, *RECENT]


# --- constructor ---------------------------------------------------------------------------------


def test_min_score_length() -> None:
    assert HistoryCompressor.MIN_SCORE_LENGTH == MIN_SCORE_LENGTH == 20


@pytest.mark.parametrize(
    ("keep", "drop", "message"),
    [
        (0.3, 0.5, "keep_threshold (0.3) must be greater than drop_threshold (0.5)"),
        (0.5, 0.5, "keep_threshold (0.5) must be greater than drop_threshold (0.5)"),
        (1, 1, "keep_threshold (1) must be greater than drop_threshold (1)"),
    ],
)
def test_keep_threshold_must_exceed_drop_threshold(keep: float, drop: float, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        compressor([], keep=keep, drop=drop)
    assert str(caught.value) == message


def test_all_arguments_are_required_keywords() -> None:
    with pytest.raises(TypeError):
        HistoryCompressor(messages=[], recent_turns=3, keep_threshold=0.6, drop_threshold=0.2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        HistoryCompressor([], 3, 0.6, 0.2, None)  # type: ignore[misc]


def test_negative_recent_turns_is_rejected() -> None:
    with pytest.raises(ValueError, match="^recent_turns must not be negative, got -1$"):
        compressor([], recent_turns=-1)


# --- returned unchanged --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [system()],
        [system(), tool_call(), tool()],
        [system(), user("Hello"), assistant("Hi")],
        conversation(),  # exactly the recent window
        # every recent text is shorter than MIN_SCORE_LENGTH: nothing to score against
        [
            system(),
            user(OCEAN_TURN),
            assistant(OCEAN_ANSWER),
            user("ok"),
            assistant("sure"),
            user("and?"),
            assistant("done"),
        ],
    ],
)
def test_unchanged_cases(messages: list[Message], missing_stemmer: None) -> None:
    result = compressor(messages, recent_turns=2).call()  # the stemmer is not even needed
    assert result == messages
    assert result is not messages
    assert all(a is b for a, b in zip(result, messages, strict=True))


def test_recent_turns_larger_than_history_returns_unchanged() -> None:
    messages = [system(), user(OCEAN_TURN), assistant(OCEAN_ANSWER)]
    assert compressor(messages, recent_turns=10)() == messages


def test_input_list_is_not_changed() -> None:
    messages = conversation(user(OCEAN_TURN), assistant(OCEAN_ANSWER))
    before = list(messages)
    compressor(messages, keep=0.5, drop=0.1)()
    assert messages == before


# --- scoring -------------------------------------------------------------------------------------


def test_relevant_old_turns_are_kept() -> None:
    old_q, old_a = user(RAILS_TURN), assistant(RAILS_ANSWER)
    messages = conversation(old_q, old_a)
    result = compressor(messages, keep=0.1, drop=0.05)()
    assert result == messages
    assert contains(result, old_q) and contains(result, old_a)


def test_irrelevant_old_turns_are_dropped() -> None:
    messages = conversation(user(OCEAN_TURN), assistant(OCEAN_ANSWER))
    result = compressor(messages, keep=0.5, drop=0.1)()
    assert result == [system(), *RECENT]


def test_recent_window_is_always_kept() -> None:
    messages = conversation(user(OCEAN_TURN), assistant(OCEAN_ANSWER))
    result = compressor(messages, keep=0.99, drop=0.98)()
    for message in RECENT:
        assert contains(result, message)


def test_short_old_messages_are_kept_unscored() -> None:
    short = user("Thanks, got it!")  # 15 characters
    blank_user = user(None)
    messages = conversation(short, blank_user, user(OCEAN_TURN), assistant(OCEAN_ANSWER))
    result = compressor(messages, keep=0.5, drop=0.1)()
    assert result == [system(), short, blank_user, *RECENT]


def test_pinned_messages_survive_whatever_their_score() -> None:
    old_system = system(OCEAN_TURN)
    developer = {"role": "developer", "content": OCEAN_TURN}
    dispatcher = tool_call("call_1")
    texted_dispatcher = tool_call("call_2", content="Let me look up the ocean depth for you right now.")
    result_1, result_2 = tool(OCEAN_TURN, "call_1"), tool(OCEAN_TURN, "call_2")
    legacy = {"role": "tool_result", "content": OCEAN_TURN}
    blank = assistant("   ")
    messages = [
        old_system,
        developer,
        user(OCEAN_TURN),
        dispatcher,
        result_1,
        texted_dispatcher,
        result_2,
        legacy,
        blank,
        assistant(OCEAN_ANSWER),
        *RECENT,
    ]
    result = compressor(messages, keep=0.99, drop=0.98)()
    assert result == [old_system, developer, dispatcher, result_1, texted_dispatcher, result_2, legacy, blank, *RECENT]


def test_is_pinned() -> None:
    assert HistoryCompressor.is_pinned(system())
    assert HistoryCompressor.is_pinned(tool())
    assert HistoryCompressor.is_pinned(tool_call())
    assert HistoryCompressor.is_pinned(assistant(""))
    assert HistoryCompressor.is_pinned(assistant([{"type": "image_url", "image_url": {"url": "x"}}]))
    assert not HistoryCompressor.is_pinned(assistant("An answer."))
    assert not HistoryCompressor.is_pinned(user(None))
    assert not HistoryCompressor.is_pinned(user(""))


def test_order_is_preserved() -> None:
    old = [user(RAILS_TURN), assistant(OCEAN_ANSWER), user(OCEAN_TURN), assistant(RAILS_ANSWER)]
    messages = conversation(*old)
    result = compressor(messages, keep=0.1, drop=0.05)()
    assert result == [system(), old[0], old[3], *RECENT]


# Two recent messages with disjoint four-word vocabularies: each has unit vector entries of exactly
# 0.5, so an old copy of one scores exactly 0.5 against their mean.
ALPHA = "alpha bravo charlie delta"
HOTEL = "foxtrot hotel india juliet"


def exact_conversation() -> tuple[Message, list[Message]]:
    old = user(ALPHA)
    return old, [system(), old, assistant(ALPHA), user(HOTEL)]


def test_reference_is_the_mean_of_normalized_recent_vectors() -> None:
    old, messages = exact_conversation()
    assert compressor(messages, recent_turns=1, keep=0.5, drop=0.2)() == messages  # 0.5 >= keep


def test_score_between_thresholds_is_summarized_keeping_the_role() -> None:
    old, messages = exact_conversation()
    calls: list[str] = []

    def summarizer(text: str) -> str:
        calls.append(text)
        return "  The alphabet, briefly.\n"

    result = compressor(messages, recent_turns=1, keep=0.6, drop=0.5, summarizer=summarizer)()  # 0.5 == drop
    assert calls == [ALPHA]
    assert result == [system(), {"role": "user", "content": "The alphabet, briefly."}, *messages[2:]]
    assert result[2] is messages[2]


def test_score_below_drop_threshold_is_dropped() -> None:
    old, messages = exact_conversation()
    calls: list[str] = []
    result = compressor(messages, recent_turns=1, keep=0.7, drop=0.51, summarizer=calls.append)()
    assert result == [system(), *messages[2:]]
    assert calls == []


@pytest.mark.parametrize("summary", [None, "", "   \n"])
def test_blank_summary_drops_the_message(summary: Any) -> None:
    old, messages = exact_conversation()
    result = compressor(messages, recent_turns=1, keep=0.6, drop=0.2, summarizer=lambda text: summary)()
    assert result == [system(), *messages[2:]]


def test_no_summarizer_drops_the_middle_tier() -> None:
    old, messages = exact_conversation()
    assert compressor(messages, recent_turns=1, keep=0.6, drop=0.2)() == [system(), *messages[2:]]


def test_summaries_keep_user_assistant_alternation() -> None:
    messages = [
        system(),
        user("Rails has some ocean-themed routing metaphors perhaps"),
        assistant("Some Rails patterns relate loosely to various concepts"),
        *RECENT,
    ]
    result = compressor(messages, keep=0.9, drop=0.01, summarizer=lambda text: f"Brief: {text[:20]}")()
    roles = [message["role"] for message in result[1:]]
    assert roles == ["user", "assistant"] * 3
    assert result[1] == {"role": "user", "content": "Brief: Rails has some ocean"}
    assert result[2] == {"role": "assistant", "content": "Brief: Some Rails patterns"}


def test_list_content_is_scored_and_summarized_by_its_text() -> None:
    parts = [
        {"type": "text", "text": "alpha bravo"},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "charlie delta"},
    ]
    old = user(parts)
    messages = [system(), old, assistant(ALPHA), user(HOTEL)]
    calls: list[str] = []
    result = compressor(messages, recent_turns=1, keep=0.6, drop=0.2, summarizer=lambda t: calls.append(t) or "S")()
    assert calls == ["alpha bravo charlie delta"]
    assert result[1] == {"role": "user", "content": "S"}


def test_zero_recent_turns_scores_everything_against_everything() -> None:
    # As in RobotLab, recent_turns=0 makes every scorable message both reference and candidate.
    messages = [system(), user(ALPHA), assistant(ALPHA), user(HOTEL)]
    assert compressor(messages, recent_turns=0, keep=0.6, drop=0.2)() == [system(), user(ALPHA), assistant(ALPHA)]


def test_call_and_dunder_call_agree() -> None:
    messages = conversation(user(OCEAN_TURN), assistant(OCEAN_ANSWER))
    instance = compressor(messages, keep=0.5, drop=0.1)
    assert instance.call() == instance()


def test_attribute_messages_work_too() -> None:
    @dataclasses.dataclass
    class Msg:
        role: str
        content: Any
        tool_calls: Any = None

    messages = [
        Msg("system", "Be nice."),
        Msg("user", OCEAN_TURN),
        Msg("assistant", OCEAN_ANSWER),
        *(Msg(m["role"], m["content"]) for m in RECENT),
    ]
    result = compressor(messages, keep=0.5, drop=0.1)()
    assert [m.content for m in result] == ["Be nice.", *(m["content"] for m in RECENT)]


def test_compression_requires_the_stemmer(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError, match="snowballstemmer"):
        compressor(conversation(user(OCEAN_TURN), assistant(OCEAN_ANSWER)))()


# --- search_history ------------------------------------------------------------------------------

FINANCE = [
    assistant("Quarterly revenue growth was 12%: revenue grew faster this quarter than in any quarter since 2021."),
    assistant("Revenue kept rising this year, and analysts expect further growth."),
    user("What should I cook for dinner tonight? Something with pasta maybe."),
    assistant("Customer acquisition cost fell to $41 per customer, so acquiring each new customer costs less."),
    assistant("Each new customer now costs less to acquire through paid ads."),
    assistant("A tomato and basil pasta with garlic bread would make a nice dinner."),
]


def test_search_finds_and_ranks_relevant_messages() -> None:
    results = search_history(FINANCE, "quarterly revenue growth")
    assert [r.index for r in results] == [0, 1]
    assert results[0] == HistoryResult(text=FINANCE[0]["content"], role="assistant", score=results[0].score, index=0)


@pytest.mark.parametrize(
    ("query", "direct", "same_topic"), [("quarterly revenue growth", 0, 1), ("customer acquisition cost", 3, 4)]
)
def test_search_typical_scores(query: str, direct: int, same_topic: int) -> None:
    scores = {r.index: r.score for r in search_history(FINANCE, query, limit=10)}
    assert 0.5 <= scores[direct] <= 0.8
    assert 0.2 <= scores[same_topic] < 0.5
    unrelated = [scores.get(i, 0.0) for i in (2, 5)]
    assert all(score < 0.1 for score in unrelated)


def test_search_results_are_sorted_and_limited() -> None:
    messages = [user(f"Ruby on Rails web framework question number {i} about development tools") for i in range(8)]
    messages.append(assistant("Ruby on Rails development: Rails, Rails and more Rails development"))
    results = search_history(messages, "Ruby on Rails development")
    assert len(results) == 5
    assert results[0].index == 8
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    assert [r.index for r in results[1:]] == [0, 1, 2, 3]  # equal scores keep their order
    assert len(search_history(messages, "Ruby on Rails development", limit=2)) == 2
    assert search_history(messages, "Ruby on Rails development", limit=0) == []


def test_search_skips_short_texts_zero_scores_and_textless_messages() -> None:
    messages = [
        user("Rails"),  # too short
        assistant(None),
        tool_call(),
        user("Nothing in common with the query at all here."),
        user("Ruby on Rails enables rapid web application development."),
    ]
    results = search_history(messages, "Ruby web Rails development")
    assert [r.index for r in results] == [4]


def test_search_includes_every_role_and_list_content() -> None:
    messages = [
        system("You answer questions about Ruby on Rails."),
        user([{"type": "text", "text": "Tell me about Rails"}, {"type": "text", "text": "and its routing."}]),
        tool('{"docs": "Rails routing guide: resources and routes"}'),
    ]
    results = search_history(messages, "rails routing")
    assert {(r.role, r.index) for r in results} == {("system", 0), ("user", 1), ("tool", 2)}
    assert next(r for r in results if r.index == 1).text == "Tell me about Rails and its routing."


def test_search_with_a_termless_query_finds_nothing() -> None:
    assert search_history(FINANCE, "a an the") == []
    assert search_history(FINANCE, "") == []
    assert search_history([], "revenue") == []


def test_search_scores_are_floats_in_the_unit_interval() -> None:
    for result in search_history(FINANCE, "revenue customer pasta", limit=10):
        assert isinstance(result.score, float)
        assert 0.0 < result.score <= 1.0
        assert FINANCE[result.index]["content"] == result.text


def test_history_result_is_frozen() -> None:
    result = HistoryResult(text="t", role="user", score=0.5, index=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 1.0  # type: ignore[misc]


def test_search_rejects_a_negative_limit() -> None:
    with pytest.raises(ValueError, match="^limit must not be negative, got -1$"):
        search_history(FINANCE, "revenue", limit=-1)


def test_search_requires_the_stemmer(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError, match="snowballstemmer"):
        search_history(FINANCE, "revenue")
