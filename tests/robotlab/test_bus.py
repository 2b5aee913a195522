from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.bus import BusPoller, Delivery, MessageBus, RobotMessage
from robotlab.config import reload_config
from robotlab.errors import BusError, ConfigurationError
from robotlab.robot import Robot, build
from robotlab.testing.fake import FakeLLM
from robotlab.tools import tool

WAIT = 5


@pytest.fixture(autouse=True)
def fresh_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ROBOT_LAB_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


@pytest.fixture
def bus() -> MessageBus:
    return MessageBus()


def robot(name: str, bus: MessageBus | None = None, **options: Any) -> Robot:
    return build(name=name, bus=bus, model="fake/model", llm=options.pop("llm", FakeLLM()), **options)


async def publish(bus: MessageBus, channel: str, content: str) -> list[Delivery]:
    """``apublish`` that fails instead of hanging when a delivery is not queued as it should be."""
    message = RobotMessage.build(id=1, sender="t", content=content)
    return await asyncio.wait_for(bus.apublish(channel, message), WAIT)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- RobotMessage ------------------------------------------------------------------------

def test_robot_message_build_key_and_is_reply() -> None:
    message = RobotMessage.build(id=1, sender="alice", content="Hello")
    reply = RobotMessage.build(id=2, sender="bob", content="Hi", in_reply_to="alice:1")
    assert message.in_reply_to is None and not message.is_reply
    assert message.key == "alice:1"
    assert reply.is_reply and reply.in_reply_to == message.key and reply.key == "bob:2"
    built = RobotMessage.build(id=3, sender="carol", content={"task": "x"})
    assert RobotMessage(3, "carol", {"task": "x"}) == built


def test_robot_message_to_dict_has_all_four_fields() -> None:
    message = RobotMessage.build(id=1, sender="alice", content="Hello")
    assert message.to_dict() == {"id": 1, "from": "alice", "content": "Hello", "in_reply_to": None}
    reply = RobotMessage.build(id=2, sender="bob", content={"ok": True}, in_reply_to="alice:1")
    assert reply.to_dict() == {"id": 2, "from": "bob", "content": {"ok": True}, "in_reply_to": "alice:1"}


def test_robot_message_is_immutable() -> None:
    message = RobotMessage.build(id=1, sender="alice", content="Hello")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


# -- Delivery and MessageBus -------------------------------------------------------------

def test_delivery_settles_once() -> None:
    delivery = Delivery("m", channel="c", subscriber_id=1)
    assert delivery.status == "pending" and delivery.is_pending
    delivery.ack()
    assert delivery.status == "acked" and delivery.is_acked and not delivery.is_pending
    with pytest.raises(BusError, match="^Delivery already resolved as acked$"):
        delivery.nack()
    rejected = Delivery("m", channel="c", subscriber_id=2)
    rejected.nack()
    assert rejected.is_nacked
    with pytest.raises(BusError, match="^Delivery already resolved as nacked$"):
        rejected.ack()


def test_publish_calls_sync_and_async_handlers_and_returns_their_deliveries(bus: MessageBus) -> None:
    seen: list[tuple[str, Any]] = []

    def plain(delivery: Delivery) -> None:
        seen.append(("plain", delivery.message))
        delivery.ack()

    async def coroutine(delivery: Delivery) -> None:
        await asyncio.sleep(0)
        seen.append(("async", delivery.message))
        delivery.nack()

    first = bus.subscribe("news", plain)
    second = bus.subscribe("news", coroutine)
    assert first != second and bus.subscriber_count("news") == 2 and bus.has_channel("news")
    deliveries = bus.publish("news", "hello")
    assert sorted(seen) == [("async", "hello"), ("plain", "hello")]
    assert {d.subscriber_id: d.status for d in deliveries} == {first: "acked", second: "nacked"}
    assert all(d.channel == "news" and d.message == "hello" for d in deliveries)


def test_plain_handlers_run_off_the_event_loop(bus: MessageBus) -> None:
    threads: list[str] = []
    bus.subscribe("c", lambda delivery: threads.append(threading.current_thread().name))
    bus.publish("c", "x")
    assert threads[0].startswith("robotlab-bus")


def test_unsubscribe_by_id_or_handler(bus: MessageBus) -> None:
    calls: list[str] = []

    def a(delivery: Delivery) -> None:
        calls.append("a")

    def b(delivery: Delivery) -> None:
        calls.append("b")

    first = bus.subscribe("c", a)
    bus.subscribe("c", b)
    assert bus.unsubscribe("c", first) is True
    assert bus.unsubscribe("c", first) is False
    bus.publish("c", 1)
    assert calls == ["b"]
    assert bus.unsubscribe("c", b) is True
    assert bus.unsubscribe("nowhere", b) is False
    assert bus.subscriber_count("c") == 0 and bus.subscriber_count("nowhere") == 0


def test_channels_are_named_and_typed(bus: MessageBus) -> None:
    bus.add_channel("typed", type=RobotMessage)
    bus.add_channel("typed")  # a no-op: the type stays
    assert bus.channel_names == ["typed"]
    with pytest.raises(BusError, match="^Unknown channel: nowhere$"):
        bus.publish("nowhere", "x")
    with pytest.raises(TypeError, match="^Expected RobotMessage, got str on channel 'typed'$"):
        bus.publish("typed", "not a robot message")
    bus.remove_channel("typed")
    assert not bus.has_channel("typed")


def test_publishing_to_a_channel_without_subscribers_warns(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    bus.add_channel("empty")
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert bus.publish("empty", "x") == []
    assert warnings(caplog) == ["MessageBus: message published on channel 'empty', which has no subscribers"]


def test_a_failing_handler_is_nacked_and_logged_and_the_others_still_run(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[Any] = []

    def broken(delivery: Delivery) -> None:
        raise ValueError("boom")

    bad = bus.subscribe("c", broken)
    bus.subscribe("c", lambda delivery: got.append(delivery.message))
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        deliveries = bus.publish("c", "x")
    assert got == ["x"]
    assert [d.status for d in deliveries if d.subscriber_id == bad] == ["nacked"]
    assert warnings(caplog) == [f"MessageBus: subscriber {bad} on channel 'c' raised ValueError: boom"]


async def test_apublish_waits_for_the_handlers(bus: MessageBus) -> None:
    async def slow(delivery: Delivery) -> None:
        await asyncio.sleep(0)
        delivery.ack()

    bus.subscribe("c", slow)
    deliveries = await bus.apublish("c", "x")
    assert [d.status for d in deliveries] == ["acked"]


async def test_publish_inside_a_running_loop_schedules_the_delivery(bus: MessageBus) -> None:
    delivered = asyncio.Event()

    async def handler(delivery: Delivery) -> None:
        delivery.ack()
        delivered.set()

    bus.subscribe("c", handler)
    deliveries = bus.publish("c", "x")
    assert [d.status for d in deliveries] == ["pending"]  # not delivered yet: publish did not block the loop
    await asyncio.wait_for(delivered.wait(), WAIT)
    assert deliveries[0].is_acked


def test_publish_is_thread_safe(bus: MessageBus) -> None:
    received: list[int] = []
    lock = threading.Lock()

    def handler(delivery: Delivery) -> None:
        with lock:
            received.append(delivery.message)

    bus.subscribe("c", handler)
    def send(n: int) -> None:
        for i in range(20):
            bus.publish("c", n * 100 + i)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(received) == sorted(n * 100 + i for n in range(8) for i in range(20))


# -- BusPoller ---------------------------------------------------------------------------

def test_bus_poller_basics() -> None:
    poller = BusPoller()
    assert BusPoller.QUEUE_CAPACITY == 512
    assert poller.start() is poller and poller.stop() is poller and poller.stop(5, timeout=1) is poller
    assert poller.is_running is True
    assert poller.groups == ["default"]
    poller.add_group("slow")
    poller.add_group("slow")
    poller.add_group("default")
    assert poller.groups == ["default", "slow"]


async def test_bus_poller_serialises_deliveries_per_robot(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    poller = bob.mailbox.poller
    assert poller is not None
    release = asyncio.Event()
    started = asyncio.Event()
    order: list[str] = []

    @bob.on_message
    async def handle(message: RobotMessage) -> None:
        order.append(f"start {message.content}")
        started.set()
        await release.wait()
        order.append(f"end {message.content}")

    first = asyncio.ensure_future(bus.apublish("bob", RobotMessage.build(id=1, sender="t", content="1")))
    await asyncio.wait_for(started.wait(), WAIT)
    assert poller.is_busy(bob)
    second = await publish(bus, "bob", "2")  # queued: returns at once
    assert poller.queue_size(bob) == 1 and second[0].is_pending and order == ["start 1"]
    release.set()
    await asyncio.wait_for(first, WAIT)  # the first delivery's task drains the second
    assert order == ["start 1", "end 1", "start 2", "end 2"]
    assert not poller.is_busy(bob) and poller.queue_size(bob) == 0 and second[0].is_acked


def test_a_handler_publishing_to_its_own_robot_is_queued_not_reentered(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    poller = bob.mailbox.poller
    assert poller is not None
    depth = 0
    seen: list[tuple[Any, int, int]] = []

    @bob.on_message
    def handle(message: RobotMessage) -> None:
        nonlocal depth
        depth += 1
        if message.content == "first":
            bob.send_message(to="bob", content="second")  # returns once queued behind this delivery
        seen.append((message.content, depth, poller.queue_size(bob)))
        depth -= 1

    bob.send_message(to="bob", content="first")
    assert seen == [("first", 1, 1), ("second", 1, 0)]


async def test_robots_sharing_a_name_and_a_poller_do_not_wait_for_each_other(bus: MessageBus) -> None:
    poller = BusPoller()
    one, two = robot("worker", bus), robot("worker", bus)
    one.assign_bus_poller(poller)
    two.assign_bus_poller(poller)
    release = asyncio.Event()
    both = asyncio.Event()
    inside: list[str] = []

    def handler(tag: str) -> Any:
        async def handle(message: RobotMessage) -> None:
            inside.append(tag)
            if len(inside) == 2:
                both.set()
            await release.wait()
        return handle

    one.on_message(handler("one"))
    two.on_message(handler("two"))
    task = asyncio.ensure_future(bus.apublish("worker", RobotMessage.build(id=1, sender="t", content="x")))
    await asyncio.wait_for(both.wait(), WAIT)  # both are inside their handlers at once
    release.set()
    await asyncio.wait_for(task, WAIT)
    assert sorted(inside) == ["one", "two"]


async def test_a_full_queue_nacks_the_delivery(bus: MessageBus, caplog: pytest.LogCaptureFixture) -> None:
    bob = robot("bob", bus)
    poller = bob.mailbox.poller
    assert poller is not None
    poller.QUEUE_CAPACITY = 1  # type: ignore[misc]
    release = asyncio.Event()
    started = asyncio.Event()

    @bob.on_message
    async def handle(message: RobotMessage) -> None:
        started.set()
        await release.wait()

    first = asyncio.ensure_future(bus.apublish("bob", RobotMessage.build(id=1, sender="t", content="1")))
    await asyncio.wait_for(started.wait(), WAIT)
    queued = await publish(bus, "bob", "2")
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        dropped = await publish(bus, "bob", "3")
    assert dropped[0].is_nacked and queued[0].is_pending
    assert warnings(caplog) == ["BusPoller: queue full for robot 'bob' (1 waiting); delivery nacked"]
    release.set()
    await asyncio.wait_for(first, WAIT)
    assert queued[0].is_acked


def test_a_handler_error_is_contained_and_frees_the_robot(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    bob = robot("bob", bus)
    alice = robot("alice", bus)
    handled: list[Any] = []

    @bob.on_message
    def handle(message: RobotMessage) -> None:
        if message.content == "bad":
            raise RuntimeError("boom")
        handled.append(message.content)

    with caplog.at_level(logging.WARNING, logger="robotlab"):
        alice.send_message(to="bob", content="bad")  # does not raise to the sender
    assert warnings(caplog) == ["BusPoller: delivery error: Error handling bus message on robot 'bob': boom"]
    assert bob.mailbox.poller is not None and not bob.mailbox.poller.is_busy(bob)
    alice.send_message(to="bob", content="good")
    assert handled == ["good"]


async def test_deliveries_queued_behind_a_failing_one_still_run(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    release = asyncio.Event()
    started = asyncio.Event()
    handled: list[Any] = []

    @bob.on_message
    async def handle(message: RobotMessage) -> None:
        if message.content == "bad":
            started.set()
            await release.wait()
            raise RuntimeError("boom")
        handled.append(message.content)

    first = asyncio.ensure_future(bus.apublish("bob", RobotMessage.build(id=1, sender="t", content="bad")))
    await asyncio.wait_for(started.wait(), WAIT)
    await publish(bus, "bob", "good")
    release.set()
    await asyncio.wait_for(first, WAIT)
    assert handled == ["good"]


class ExplodingRobot:
    """A robot stand-in whose delivery processing fails with a non-bus error."""

    name = "exploding"

    def __init__(self) -> None:
        self.calls = 0

    async def _process_delivery(self, delivery: Delivery) -> None:
        self.calls += 1
        raise KeyError("kaput")


async def test_an_unexpected_error_is_logged_and_releases_the_robot(caplog: pytest.LogCaptureFixture) -> None:
    poller = BusPoller()
    target = ExplodingRobot()
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        await poller.enqueue(robot=target, delivery=Delivery("x", channel="c", subscriber_id=1), group="slow")
        await poller.enqueue(robot=target, delivery=Delivery("y", channel="c", subscriber_id=1))
    assert target.calls == 2 and not poller.is_busy(target)
    assert warnings(caplog) == ["BusPoller: unexpected error: 'kaput'"] * 2


# -- sending and the outbox --------------------------------------------------------------

def test_sending_without_a_bus_raises() -> None:
    loner = robot("loner")
    with pytest.raises(BusError, match="^No bus configured on robot 'loner'$"):
        loner.send_message(to="bob", content="hi")
    with pytest.raises(BusError, match="^No bus configured on robot 'loner'$"):
        loner.send_reply(to="bob", content="hi", in_reply_to="bob:1")
    assert loner.outbox == {} and loner.bus is None and loner.mailbox.poller is None
    with pytest.raises(BusError) as info:
        loner.send_message(to="bob", content="hi")
    assert info.value.robot_name == "loner"


def test_send_message_records_the_outbox_with_a_per_robot_counter(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)
    first = alice.send_message(to="bob", content="one")
    second = alice.send_message(to="bob", content={"task": "two"})
    third = bob.send_message(to="alice", content="three")
    assert (first.id, second.id, third.id) == (1, 2, 1)
    assert first == RobotMessage(id=1, sender="alice", content="one")
    assert alice.outbox == {
        "alice:1": {"message": first, "status": "sent", "replies": []},
        "alice:2": {"message": second, "status": "sent", "replies": []},
    }
    assert list(bob.outbox) == ["bob:1"]


def test_replies_are_not_stored_and_flip_the_outbox_entry(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)
    inbox: list[RobotMessage] = []
    alice.on_message(inbox.append)
    question = alice.send_message(to="bob", content="ping?")
    reply = bob.send_reply(to="alice", content="pong", in_reply_to=question.key)
    assert reply == RobotMessage(id=1, sender="bob", content="pong", in_reply_to="alice:1") and reply.is_reply
    assert bob.outbox == {}
    entry = alice.outbox[question.key]
    assert entry["status"] == "replied" and entry["replies"] == [reply]
    assert inbox == [reply]  # the handler still sees the reply
    again = bob.send_reply(to="alice", content="pong again", in_reply_to=question.key)
    assert alice.outbox[question.key]["replies"] == [reply, again]
    bob.send_reply(to="alice", content="?", in_reply_to="alice:99")  # unknown key: no entry is made
    assert list(alice.outbox) == [question.key]


def test_a_robot_without_a_handler_acks_and_still_correlates_replies(bus: MessageBus) -> None:
    alice = robot("alice", bus)
    robot("bob", bus)
    question = alice.send_message(to="bob", content="ping?")
    reply = RobotMessage.build(id=5, sender="bob", content="pong", in_reply_to=question.key)
    deliveries = bus.publish("alice", reply)
    assert [d.status for d in deliveries] == ["acked"]
    assert alice.outbox[question.key]["status"] == "replied"


def test_sending_to_an_unknown_robot_raises_and_leaves_no_outbox_entry(bus: MessageBus) -> None:
    alice = robot("alice", bus)
    with pytest.raises(BusError, match="^Unknown channel: nobody$"):
        alice.send_message(to="nobody", content="hi")
    assert alice.outbox == {}


def test_fan_out_every_robot_with_the_name_receives(bus: MessageBus) -> None:
    got: list[tuple[str, Any]] = []
    for tag in ("a", "b", "c"):
        robot("worker", bus).on_message(lambda message, tag=tag: got.append((tag, message.content)))
    alice = robot("alice", bus)
    alice.send_message(to="worker", content="job")
    assert sorted(got) == [("a", "job"), ("b", "job"), ("c", "job")]


def test_concurrent_senders_get_unique_ids(bus: MessageBus) -> None:
    alice = robot("alice", bus)
    robot("bob", bus)
    threads = [threading.Thread(target=lambda: [alice.send_message(to="bob", content="x") for _ in range(25)])
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(entry["message"].id for entry in alice.outbox.values()) == list(range(1, 201))


async def test_asend_message_and_asend_reply(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)

    @bob.on_message
    async def answer(message: RobotMessage) -> None:
        await bob.asend_reply(to=message.sender, content="done", in_reply_to=message.key)

    question = await alice.asend_message(to="bob", content="job")
    assert alice.outbox[question.key]["status"] == "replied"
    with pytest.raises(BusError, match="^Unknown channel: nobody$"):
        await alice.asend_message(to="nobody", content="hi")
    assert list(alice.outbox) == [question.key]
    with pytest.raises(BusError, match="^No bus configured on robot 'loner'$"):
        await robot("loner").asend_message(to="bob", content="x")


# -- handlers and ack modes --------------------------------------------------------------

def test_a_one_argument_handler_is_acked_before_it_runs(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    observed: list[str] = []
    delivery = Delivery(RobotMessage.build(id=1, sender="t", content="x"), channel="bob", subscriber_id=0)

    def handle(message: RobotMessage) -> None:
        observed.append(delivery.status)

    assert bob.on_message(handle) is handle  # usable as a decorator
    assert bob.mailbox.poller is not None
    asyncio.run(bob.mailbox.poller.enqueue(robot=bob, delivery=delivery))
    assert observed == ["acked"]
    [published] = bus.publish("bob", RobotMessage.build(id=2, sender="t", content="y"))
    assert published.is_acked


def test_a_two_argument_handler_settles_the_delivery_itself(bus: MessageBus) -> None:
    bob = robot("bob", bus)

    @bob.on_message
    def handle(delivery: Delivery, message: RobotMessage) -> None:
        assert delivery.message is message and delivery.is_pending
        if message.content == "reject":
            delivery.nack()
        elif message.content == "accept":
            delivery.ack()

    def send(content: str) -> str:
        return bus.publish("bob", RobotMessage.build(id=1, sender="t", content=content))[0].status

    assert (send("accept"), send("reject"), send("ignore")) == ("acked", "nacked", "pending")


def test_async_and_varargs_handlers_get_the_delivery_and_message(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    got: list[tuple[Any, ...]] = []

    @bob.on_message
    async def handle(*args: Any) -> None:
        got.append(args)
        args[0].ack()

    deliveries = bus.publish("bob", RobotMessage.build(id=1, sender="t", content="x"))
    assert got == [(deliveries[0], deliveries[0].message)] and deliveries[0].is_acked


def test_arguments_with_defaults_do_not_make_a_two_argument_handler(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    got: list[Any] = []
    bob.on_message(lambda message, tag="t": got.append((tag, message.content)))
    [delivery] = bus.publish("bob", RobotMessage.build(id=1, sender="t", content="x"))
    assert got == [("t", "x")] and delivery.is_acked


def test_a_handler_without_arguments_is_rejected(bus: MessageBus) -> None:
    expected = r"^on_message handler must take \(message\) or \(delivery, message\), got <function"
    with pytest.raises(TypeError, match=expected):
        robot("bob", bus).on_message(lambda: None)


def test_handler_errors_nack_only_pending_deliveries(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    auto, manual = robot("auto", bus), robot("manual", bus)

    def fail_auto(message: RobotMessage) -> None:
        raise ValueError("auto failed")

    def fail_manual(delivery: Delivery, message: RobotMessage) -> None:
        raise ValueError("manual failed")

    auto.on_message(fail_auto)
    manual.on_message(fail_manual)
    message = RobotMessage.build(id=1, sender="t", content="x")
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        [acked] = bus.publish("auto", message)
        [nacked] = bus.publish("manual", message)
    assert acked.is_acked and nacked.is_nacked  # auto-acked before it ran; manual was still pending
    assert warnings(caplog) == [
        "BusPoller: delivery error: Error handling bus message on robot 'auto': auto failed",
        "BusPoller: delivery error: Error handling bus message on robot 'manual': manual failed",
    ]


# -- respond_to_tasks and serve ----------------------------------------------------------

def test_respond_to_tasks_replies_and_ignores_replies(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)
    calls: list[tuple[str, Any]] = []

    @alice.respond_to_tasks
    def alice_answers(message: RobotMessage) -> str | None:
        calls.append(("alice", message.content))
        return f"alice got {message.content}" if len(calls) < 5 else None  # a ping-pong stops, and fails

    @bob.respond_to_tasks
    def bob_answers(message: RobotMessage) -> str | None:
        calls.append(("bob", message.content))
        return f"bob got {message.content}" if len(calls) < 5 else None

    assert alice_answers.__name__ == "alice_answers"  # the decorator returns the function
    question = alice.send_message(to="bob", content="task")
    assert calls == [("bob", "task")]  # alice ignored bob's reply: no ping-pong
    [reply] = alice.outbox[question.key]["replies"]
    assert reply == RobotMessage(id=1, sender="bob", content="bob got task", in_reply_to="alice:1")
    assert alice.outbox[question.key]["status"] == "replied" and bob.outbox == {}


def test_respond_to_tasks_sends_nothing_for_none_or_without_auto_reply(bus: MessageBus) -> None:
    alice, quiet, muted = robot("alice", bus), robot("quiet", bus), robot("muted", bus)
    seen: list[str] = []

    @quiet.respond_to_tasks
    def nothing(message: RobotMessage) -> None:
        seen.append("quiet")

    @muted.respond_to_tasks(auto_reply=False)
    def answer(message: RobotMessage) -> str:
        seen.append("muted")
        return "unsent"

    first = alice.send_message(to="quiet", content="x")
    second = alice.send_message(to="muted", content="x")
    assert seen == ["quiet", "muted"]
    assert alice.outbox[first.key]["status"] == alice.outbox[second.key]["status"] == "sent"


def test_respond_to_tasks_sends_empty_text_replies(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)
    bob.respond_to_tasks(lambda message: "")
    question = alice.send_message(to="bob", content="x")
    assert [r.content for r in alice.outbox[question.key]["replies"]] == [""]


async def test_respond_to_tasks_accepts_a_coroutine_function(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)

    async def answer(message: RobotMessage) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"echo": message.content}

    bob.respond_to_tasks(answer)
    question = await alice.asend_message(to="bob", content="hi")
    assert alice.outbox[question.key]["replies"][0].content == {"echo": "hi"}


def test_serve_answers_with_the_robots_run_and_flattens_dict_content(bus: MessageBus) -> None:
    llm = FakeLLM(["42", "Paris"])
    bob = robot("bob", bus, llm=llm)
    assert bob.serve() is bob
    alice = robot("alice", bus)
    first = alice.send_message(to="bob", content="What is 6 * 7?")
    second = alice.send_message(to="bob", content={"task": "capital", "country": "France"})
    assert alice.outbox[first.key]["replies"][0].content == "42"
    assert alice.outbox[second.key]["replies"][0].content == "Paris"
    assert llm.requests[0].messages[-1] == {"role": "user", "content": "What is 6 * 7?"}
    assert llm.requests[1].messages[-1]["content"] == "task: capital\ncountry: France"


def test_serve_without_auto_reply_runs_but_does_not_answer(bus: MessageBus) -> None:
    llm = FakeLLM(["ok"])
    robot("bob", bus, llm=llm).serve(auto_reply=False)
    alice = robot("alice", bus)
    question = alice.send_message(to="bob", content="x")
    assert len(llm.requests) == 1 and alice.outbox[question.key]["status"] == "sent"


async def test_serve_from_a_coroutine(bus: MessageBus) -> None:
    robot("bob", bus, llm=FakeLLM(["done"])).serve()
    alice = robot("alice", bus)
    question = await alice.asend_message(to="bob", content="go")
    assert alice.outbox[question.key]["replies"][0].content == "done"


def test_serve_works_when_the_bus_delivers_on_the_robotlab_loop(bus: MessageBus) -> None:
    robot("bob", bus, llm=FakeLLM(["Bob says 42"])).serve()
    alice = robot("alice", bus)

    @tool
    async def ask_bob(question: str) -> str:
        """Ask bob a question."""
        sent = await alice.asend_message(to="bob", content=question)  # on the robotlab background loop
        return alice.outbox[sent.key]["replies"][0].content

    from robotlab.testing.fake import text, tool_call

    alice.with_tool(ask_bob)
    alice.llm = FakeLLM([tool_call("ask_bob", question="6 * 7?"), text("Bob said 42.")])
    assert alice.run("Ask bob").reply == "Bob said 42."
    assert alice.messages[-2]["content"] == "Bob says 42"


def test_serving_robots_do_not_ping_pong(bus: MessageBus) -> None:
    alice_llm, bob_llm = FakeLLM(), FakeLLM(["bob's answer"])
    alice = robot("alice", bus, llm=alice_llm).serve()
    robot("bob", bus, llm=bob_llm).serve()
    question = alice.send_message(to="bob", content="task")
    assert alice.outbox[question.key]["status"] == "replied"
    assert len(bob_llm.requests) == 1 and alice_llm.requests == []


# -- joining, leaving, spawning ----------------------------------------------------------

def test_build_with_bus_joins_its_channel_with_a_private_poller(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    assert bob.bus is bus and bus.subscriber_count("bob") == 1
    assert isinstance(bob.mailbox.poller, BusPoller) and bob.mailbox.poller_group == "default"
    assert bob.to_dict()["bus"] is True
    expected = "^Robot 'bad': bus= takes a robotlab.bus.MessageBus, got 'nope'$"
    with pytest.raises(ConfigurationError, match=expected):
        build(name="bad", bus="nope")


def test_a_template_robot_name_is_the_channel(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, bus: MessageBus
) -> None:
    (tmp_path / "greeter.md").write_text("---\nrobot_name: greeter\n---\nYou greet people.\n")
    monkeypatch.setenv("ROBOT_LAB_TEMPLATE_PATH", str(tmp_path))
    reload_config()
    greeter = build(template="greeter", bus=bus, llm=FakeLLM())
    assert greeter.name == "greeter" and bus.subscriber_count("greeter") == 1


def test_with_bus_is_a_no_op_for_the_same_bus_and_switches_buses(bus: MessageBus) -> None:
    bob = robot("bob", bus)
    poller = bob.mailbox.poller
    message = RobotMessage.build(id=1, sender="t", content="x")
    [before] = bus.publish("bob", message)
    assert bob.with_bus(bus) is bob and bus.subscriber_count("bob") == 1
    [after] = bus.publish("bob", message)
    assert after.subscriber_id == before.subscriber_id  # the same subscription: nothing was torn down
    other = MessageBus()
    bob.with_bus(other)
    assert bob.bus is other and bus.subscriber_count("bob") == 0 and other.subscriber_count("bob") == 1
    assert bob.mailbox.poller is poller
    bob.with_bus()  # rejoins its current bus
    assert bob.bus is other and other.subscriber_count("bob") == 1


def test_with_bus_without_a_bus_creates_one() -> None:
    bob = robot("bob")
    assert bob.with_bus() is bob
    assert isinstance(bob.bus, MessageBus) and bob.bus.subscriber_count("bob") == 1


def test_leave_bus_stops_delivery(bus: MessageBus) -> None:
    alice, bob = robot("alice", bus), robot("bob", bus)
    got: list[Any] = []
    bob.on_message(lambda message: got.append(message.content))
    assert bob.mailbox.leave() is bob.mailbox
    assert bob.bus is None and bus.subscriber_count("bob") == 0
    alice.send_message(to="bob", content="anyone?")  # the channel stays; nobody listens
    assert got == []
    with pytest.raises(BusError, match="^No bus configured on robot 'bob'$"):
        bob.send_message(to="alice", content="x")
    bob.mailbox.leave()  # twice is fine


def test_assign_bus_poller_routes_deliveries_through_the_shared_poller(bus: MessageBus) -> None:
    shared = BusPoller()
    bob = robot("bob", bus)
    bob.assign_bus_poller(shared, group="slow")
    assert bob.mailbox.poller is shared and bob.mailbox.poller_group == "slow"
    assert shared.groups == ["default", "slow"]
    busy: list[bool] = []
    bob.on_message(lambda message: busy.append(shared.is_busy(bob)))
    robot("alice", bus).send_message(to="bob", content="x")
    assert busy == [True]


def test_spawn_builds_a_robot_on_the_same_bus_with_the_parents_model_and_llm() -> None:
    llm = FakeLLM(["child reply"])
    parent = build(name="parent", model="openai/gpt-4o-mini", provider="openai", llm=llm)
    child = parent.spawn(name="child", system_prompt="You help.")
    assert parent.bus is not None and child.bus is parent.bus
    assert parent.bus.subscriber_count("parent") == 1 and parent.bus.subscriber_count("child") == 1
    assert child.model == "openai/gpt-4o-mini" and child.provider == "openai" and child.llm is llm
    assert child.instructions == "You help."
    child.serve()
    question = parent.send_message(to="child", content="help")
    assert parent.outbox[question.key]["replies"][0].content == "child reply"


def test_spawn_options_override_the_inherited_ones() -> None:
    parent = build(name="parent", model="openai/gpt-4o-mini", llm=FakeLLM())
    other = FakeLLM()
    child = parent.spawn(name="child", model="anthropic/claude-3-5-haiku", llm=other, temperature=0.0)
    assert child.model == "anthropic/claude-3-5-haiku" and child.llm is other
    assert child.config.temperature == 0.0
    assert build(name="p").spawn().name == "robot"


def test_spawn_reuses_an_existing_bus(bus: MessageBus) -> None:
    parent = robot("parent", bus)
    child = parent.spawn(name="child")
    assert child.bus is bus and parent.bus is bus and bus.subscriber_count("parent") == 1
