"""Networks: DAG scheduling, routing, shared memory, results, validation, introspection, per-run events and hooks,
and nested networks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from robotlab import hooks
from robotlab.errors import ConfigurationError, InferenceError
from robotlab.llm import LLM, LLMClient, LLMRequest, LLMResponse
from robotlab.memory import Memory
from robotlab.network import BROADCAST_KEY, Network, create_network
from robotlab.robot import Robot, build
from robotlab.run_config import RunConfig
from robotlab.streaming import Chunk, Event
from robotlab.task import FlowResult, Task
from robotlab.testing.fake import FakeLLM, FunctionLLM, raise_, tool_call
from robotlab.testing.server import FakeLLMServer, call, reply
from robotlab.tools import AskUser, Tool
from robotlab.tools.ask import QueueChannel

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(autouse=True)
def fresh_hooks() -> Iterator[None]:
    hooks.clear_hooks()
    yield
    hooks.clear_hooks()


class RememberCategory(Tool):
    description = "Remember the category of the request."

    def execute(self, category: str) -> str:
        assert self.robot is not None
        self.robot.run_memory.set("category", category)
        return f"remembered {category}"


class RecallCategory(Tool):
    description = "Recall the category of the request."

    def execute(self) -> str:
        assert self.robot is not None
        return f"category={self.robot.run_memory.get('category')}"


class Classifier(Robot):
    """Routes to the specialist its reply names, handing it the customer's own message."""

    async def call(self, result: FlowResult) -> FlowResult:
        routed = await super().call(result)
        category = str(routed.value.reply).strip().lower()
        return routed.continue_(result.context["run_params"]["message"]).activate(category)


def support_network(llms: Mapping[str, LLM]) -> Network:
    """classifier -> one of billing / technical / general (optional); robot names differ from task names."""
    classifier = Classifier(name="classifier_bot", system_prompt="You are classifier", llm=llms["classifier"],
                            model=MODEL, local_tools=[RememberCategory])
    network = create_network(name="support")
    network.task("classifier", classifier, depends_on="none")
    for name in ("billing", "technical", "general"):
        robot = build(name=f"{name}_bot", system_prompt=f"You are {name}", llm=llms[name], model=MODEL,
                      local_tools=[RecallCategory])
        network.task(name, robot, depends_on="optional")
    return network


def check_support_result(network: Network, result: FlowResult) -> None:
    assert list(result.context) == ["run_params", "classifier_bot", "billing_bot"]  # by ROBOT name
    assert list(network.robots) == ["classifier", "billing", "technical", "general"]  # by TASK name
    assert result.value is result.context["billing_bot"]
    assert result.activated_steps == ["billing"]
    assert result.context["run_params"]["message"] == "I was charged twice"
    assert network.memory.get("category") == "billing"


# -- acceptance 1: the support network -----------------------------------------------------------
def test_support_network_on_fake_llm_runs_only_the_activated_branch_and_shares_memory() -> None:
    llms = {
        "classifier": FakeLLM([tool_call("remember_category", category="billing"), "billing"]),
        "billing": FakeLLM([tool_call("recall_category"), "Refund on its way (billing)."]),
        "technical": FakeLLM(),
        "general": FakeLLM(),
    }
    network = support_network(llms)
    result = network.run("I was charged twice")
    check_support_result(network, result)
    assert result.value.reply == "Refund on its way (billing)."
    assert llms["technical"].requests == [] and llms["general"].requests == []
    billing_request = llms["billing"].requests[-1].messages
    assert billing_request[1] == {"role": "user", "content": "I was charged twice"}
    assert billing_request[-1]["content"] == "category=billing"  # read what the classifier's tool wrote


def test_support_network_over_real_litellm_http() -> None:
    def responder(body: dict[str, Any]) -> Any:
        system, last = body["messages"][0]["content"], body["messages"][-1]
        if system == "You are classifier":
            return call("remember_category", category="billing") if last["role"] == "user" else reply("billing")
        if system == "You are billing":
            return call("recall_category") if last["role"] == "user" else reply(f"Billing: {last['content']}")
        return reply("wrong branch")

    with FakeLLMServer(responder=responder) as server:
        client = LLMClient(api_base=server.base_url, api_key="sk-fake", num_retries=0)
        network = support_network(dict.fromkeys(("classifier", "billing", "technical", "general"), client))
        result = network.run("I was charged twice")
        check_support_result(network, result)
        assert result.value.reply == "Billing: category=billing"
        systems = [r["messages"][0]["content"] for r in server.requests]
        assert systems == ["You are classifier"] * 2 + ["You are billing"] * 2  # no other branch ran


def test_router_callable_activates_a_task_that_sees_the_original_message() -> None:
    seen: list[FlowResult] = []

    def router(result: FlowResult) -> str | None:
        seen.append(result)
        return str(result.context["classifier"].reply) if "classifier" in result.context else None

    classifier = build(name="classifier", llm=FakeLLM(["technical"]))
    technical = build(name="technical", llm=FakeLLM(["Try a restart."]))
    billing = build(name="billing", llm=FakeLLM())
    network = create_network(name="support", router=router)
    network.task("classifier", classifier).task("technical", technical, depends_on="optional")
    network.task("billing", billing, depends_on="optional")
    result = network.run("My app crashes")
    assert result.value.reply == "Try a restart." and result.activated_steps == ["technical"]
    assert technical.messages[0] == {"role": "user", "content": "My app crashes"}
    assert billing.messages == []
    assert len(seen) == 2 and "technical" in seen[1].context  # asked again after the branch; None ends the run


def test_activated_task_gets_the_activator_value_as_its_message() -> None:
    class Router(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            return (await super().call(result)).activate("next")

    downstream = build(name="next_bot", llm=FakeLLM(["ok"]))
    network = create_network(name="n")
    network.task("first", Router(name="first", llm=FakeLLM(["the first reply"])))
    network.task("next", downstream, depends_on="optional")
    network.run("hello")
    assert downstream.messages[0]["content"] == "the first reply"  # section 2.7: value -> message


def test_unknown_routed_task_is_a_clear_error() -> None:
    class Misroute(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            return (await super().call(result)).activate("refunds")

    network = create_network(name="support")
    network.task("classifier", Misroute(name="classifier", llm=FakeLLM(["x"])))
    network.task("billing", build(name="billing", llm=FakeLLM()), depends_on="optional")
    with pytest.raises(ConfigurationError, match=r"Task 'classifier' activated unknown task 'refunds' in network "
                                                 r"'support' \(tasks: classifier, billing\)"):
        network.run("hi")
    routed = create_network(name="r", router=lambda result: ["nope"])
    routed.task("only", build(name="only", llm=FakeLLM(["x"])))
    with pytest.raises(ConfigurationError, match="The router activated unknown task 'nope'"):
        routed.run("hi")
    bad = create_network(name="b", router=lambda result: 42)
    bad.task("only", build(name="only", llm=FakeLLM(["x"])))
    with pytest.raises(TypeError, match="must return a task name, a list or None"):
        bad.run("hi")


# -- scheduling ------------------------------------------------------------------------------------
class GatedLLM:
    """Answers ``reply``; records starts and in-flight counts; optionally waits for ``gate``."""

    def __init__(self, name: str, state: dict[str, Any], gate: tuple[asyncio.Event, int] | None = None) -> None:
        self.name, self.state, self.gate = name, state, gate

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        state = self.state
        state["log"].append(f"start {self.name}")
        state["in_flight"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        if self.gate is not None:
            event, needed = self.gate
            state["started"] += 1
            if state["started"] >= needed:
                event.set()
            await asyncio.wait_for(event.wait(), timeout=5)
        for _ in range(5):
            await asyncio.sleep(0)  # yield, so other tasks may start
        state["in_flight"] -= 1
        state["log"].append(f"end {self.name}")
        return LLMResponse(content=f"{self.name} says: {request.messages[-1]['content']}", tool_calls=[],
                           input_tokens=1, output_tokens=1, cost=0.0, finish_reason="stop", model="fake")


def fan_network(state: dict[str, Any], *, workers: int = 4, gate: bool = False, **options: Any) -> Network:
    barrier = (asyncio.Event(), workers) if gate else None
    network = create_network(name="fan", **options)
    network.task("planner", build(name="planner", llm=GatedLLM("planner", state)))
    for i in range(workers):
        network.task(f"w{i}", build(name=f"worker{i}", llm=GatedLLM(f"worker{i}", state, barrier)),
                     depends_on="planner")
    network.task("reducer", build(name="reducer", llm=GatedLLM("reducer", state)),
                 depends_on=[f"w{i}" for i in range(workers)])
    return network


def new_state() -> dict[str, Any]:
    return {"log": [], "in_flight": 0, "peak": 0, "started": 0}


async def test_independent_tasks_run_concurrently_and_dependents_wait() -> None:
    state = new_state()
    result = await fan_network(state, gate=True).arun("plan it")  # each worker waits until all four started
    log = state["log"]
    assert log[:2] == ["start planner", "end planner"] and log[-2:] == ["start reducer", "end reducer"]
    assert sorted(log[2:6]) == [f"start worker{i}" for i in range(4)]
    assert state["peak"] == 4
    assert all("Error" not in str(r) for r in result.replies.values()), result.replies
    assert result.value.robot_name == "reducer"
    # fan-in: the message is the reply of the last declared dependency; every reply is in the context
    assert result.value.reply == "reducer says: worker3 says: planner says: plan it"
    assert list(result.replies) == ["planner", "worker0", "worker1", "worker2", "worker3", "reducer"]


@pytest.mark.parametrize(("options", "peak"), [({"config": {"max_concurrent_robots": 2}}, 2),
                                               ({"concurrency": 1}, 1),
                                               ({"concurrency": 3, "config": RunConfig(max_concurrent_robots=2)}, 2),
                                               ({}, 4)])
async def test_concurrency_is_limited(options: dict[str, Any], peak: int) -> None:
    state = new_state()
    await fan_network(state, **options).arun("x")
    assert state["peak"] == peak


def test_independent_tasks_run_concurrently() -> None:
    # The four middle tasks only finish when all four are in flight at once; run one after another they
    # would hit the barrier's timeout. (Wall time against the critical path is measured in benchmarks/network.py.)
    barrier = asyncio.Barrier(4)

    async def meet(request: Any) -> str:
        await asyncio.wait_for(barrier.wait(), timeout=5)
        return "met"

    network = create_network(name="parallel")
    network.task("a", build(name="a", llm=FakeLLM(["start"])))
    for i in range(4):
        network.task(f"b{i}", build(name=f"b{i}", llm=FunctionLLM(meet)), depends_on="a")
    network.task("c", build(name="c", llm=FakeLLM(["done"])), depends_on=[f"b{i}" for i in range(4)])
    result = network.run("go")
    assert [result.context[f"b{i}"].reply for i in range(4)] == ["met"] * 4
    assert result.value.reply == "done"


def test_a_failing_robot_becomes_an_error_result_and_the_network_goes_on() -> None:
    after = build(name="after", llm=FakeLLM(["recovered"]))
    network = create_network(name="n")
    network.task("ok", build(name="ok", llm=FakeLLM(["fine"])))
    network.task("broken", build(name="broken", llm=FakeLLM([raise_(InferenceError("provider down"))])))
    network.task("after", after, depends_on=["ok", "broken"])
    result = network.run("go")
    assert result.context["broken"].reply == "Error: InferenceError: provider down"
    assert result.context["ok"].reply == "fine" and result.value.reply == "recovered"
    assert after.messages[0]["content"] == "Error: InferenceError: provider down"


def test_halt_stops_the_tasks_that_have_not_started() -> None:
    class Gate(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            routed = await super().call(result)
            return routed.halt() if "INVALID" in str(routed.value.reply) else routed

    later = build(name="later", llm=FakeLLM())
    network = create_network(name="n")
    network.task("gate", Gate(name="gate", llm=FakeLLM(["INVALID input"])))
    network.task("later", later, depends_on="gate")
    result = network.run("x")
    assert not result.is_continue and result.value.reply == "INVALID input"
    assert later.messages == [] and list(result.context) == ["run_params", "gate"]


def test_a_join_after_routing_runs_once_the_activated_branch_is_done() -> None:
    class Pick(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            return (await super().call(result)).activate("b")

    summary = build(name="summary", llm=FakeLLM(["summed"]))
    network = create_network(name="n")
    network.task("pick", Pick(name="pick", llm=FakeLLM(["b"])))
    network.task("a", build(name="a", llm=FakeLLM()), depends_on="optional")
    network.task("b", build(name="b", llm=FakeLLM(["from b"])), depends_on="optional")
    network.task("summary", summary, depends_on=["a", "b"])
    network.task("never", build(name="never", llm=FakeLLM()), depends_on=["a"])
    result = network.run("x")
    assert result.value.reply == "summed" and summary.messages[0]["content"] == "from b"
    assert "never" not in result.context and "a" not in result.context


def test_run_params_reach_every_task_and_task_context_stays_with_its_task() -> None:
    seen: dict[str, Any] = {}

    class Spy(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            seen[self.name] = dict(result.context["run_params"])
            return await super().call(result)

    network = create_network(name="n", config={"temperature": 0.3})
    network.task("one", Spy(name="one", llm=FakeLLM(["1"])), context={"department": "billing"})
    network.task("two", Spy(name="two", llm=FakeLLM(["2"])), depends_on="one")
    result = network.run("hi", customer_id=7)
    assert seen["one"]["department"] == "billing" and "department" not in seen["two"]
    assert seen["two"]["customer_id"] == 7 and seen["two"]["network"] is network
    assert seen["two"]["network_memory"] is network.memory and seen["two"]["network_config"] is network.config
    assert result.context["run_params"]["customer_id"] == 7 and "task" not in result.context["run_params"]


async def test_shared_memory_and_a_task_memory_override() -> None:
    private = Memory()
    network = create_network(name="mem", memory={"tier": "gold"})
    writer = build(name="writer", llm=FakeLLM([tool_call("remember_category", category="vip"), "saved"]),
                   local_tools=[RememberCategory])
    reader = build(name="reader", llm=FakeLLM([tool_call("recall_category"), "read"]), local_tools=[RecallCategory])
    loner = build(name="loner", llm=FakeLLM([tool_call("remember_category", category="own"), "mine"]),
                  local_tools=[RememberCategory])
    network.task("writer", writer).task("reader", reader, depends_on="writer")
    network.task("loner", loner, memory=private)
    await network.arun("go")
    assert network.memory.get("tier") == "gold" and network.memory.get("category") == "vip"
    assert network.memory.network_name == "mem" and private.get("category") == "own"
    assert reader.messages[-2]["content"] == "category=vip"
    assert network.reset_memory() is network and network.memory.get("category") is None


def test_network_hooks_fire_around_the_run_and_each_task() -> None:
    seen: list[str] = []

    class Tracer(hooks.Hook):
        def before_network_run(cls, ctx: Any) -> None:
            seen.append(f"network {ctx.network.name} {ctx.context['message']}")

        def after_task(cls, ctx: Any) -> None:
            seen.append(f"task {ctx.task_name} -> {ctx.result.value.reply}")

        def after_network_run(cls, ctx: Any) -> None:
            seen.append(f"done {ctx.result.value.reply}")

    network = create_network(name="traced")
    network.on(Tracer)
    network.task("a", build(name="a", llm=FakeLLM(["A"]))).task("b", build(name="b", llm=FakeLLM(["B"])),
                                                                depends_on="a")
    network.run("hi")
    assert seen == ["network traced hi", "task a -> A", "task b -> B", "done B"]


def test_poller_groups_are_registered_and_robots_share_the_network_poller() -> None:
    slow = build(name="slow", llm=FakeLLM())
    network = create_network(name="n").task("fast", build(name="fast", llm=FakeLLM()))
    network.task("slow", slow, poller_group="slow")
    assert network.bus_poller.groups == ["default", "slow"]
    assert slow.mailbox.poller is network.bus_poller and slow.mailbox.poller_group == "slow"


def test_parallel_groups_can_be_depended_on() -> None:
    merge = build(name="merge", llm=FakeLLM(["merged"]))
    network = create_network(name="p").task("fetch", build(name="fetch", llm=FakeLLM(["data"])))
    network.parallel("analysis", {"sentiment": build(name="s", llm=FakeLLM(["pos"])),
                                  "entities": build(name="e", llm=FakeLLM(["ada"]))}, depends_on="fetch")
    network.task("merge", merge, depends_on="analysis")
    assert network.dependencies()["merge"] == ["sentiment", "entities"]
    assert network.run("x").value.reply == "merged" and merge.messages[0]["content"] == "ada"
    with pytest.raises(ConfigurationError, match="already has a task or group named 'analysis'"):
        network.parallel("analysis", [build(name="z", llm=FakeLLM())])


# -- acceptance 3: bad input --------------------------------------------------------------------
def robot(name: str) -> Robot:
    return build(name=name, llm=FakeLLM(["ok"]))


def test_a_dependency_cycle_is_rejected_naming_the_tasks() -> None:
    def builder(network: Network) -> None:
        network.task("a", robot("a"), depends_on="c").task("b", robot("b"), depends_on="a")
        network.task("c", robot("c"), depends_on=["b"])

    with pytest.raises(ConfigurationError, match=r"Network 'loop' has a dependency cycle: a -> c -> b -> a"):
        create_network(builder, name="loop")
    lazy = create_network(name="self").task("a", robot("a"), depends_on="a")
    with pytest.raises(ConfigurationError, match="dependency cycle: a -> a"):
        lazy.run("x")  # rejected at the first run when not built with a builder


def test_an_unknown_dependency_is_rejected_naming_the_tasks() -> None:
    with pytest.raises(ConfigurationError, match=r"Task 'writer' in network 'n' depends on unknown task\(s\): "
                                                 r"'editor', 'ghost'"), create_network(name="n") as network:
        network.task("writer", robot("w"), depends_on=["editor", "ghost"])
    late = create_network(name="n").task("writer", robot("w"), depends_on="editor")
    with pytest.raises(ConfigurationError, match="depends on unknown task"):
        late.run("x")
    late.task("editor", robot("e"))  # declared afterwards: fine
    assert late.run("x").value.robot_name == "w"


def test_other_build_errors() -> None:
    network = create_network(name="n").task("a", robot("a"))
    with pytest.raises(ConfigurationError, match="Network 'n' already has a task or group named 'a'"):
        network.task("a", robot("a2"))
    with pytest.raises(ConfigurationError, match="cannot be combined"):
        network.task("b", robot("b"), depends_on=["a", "optional"])
    with pytest.raises(ConfigurationError, match="is not a robot"):
        network.task("c", object())
    with pytest.raises(TypeError, match="depends_on must be"):
        network.task("d", robot("d"), depends_on=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Invalid concurrency option: 'fibers'\. Valid options: 'auto', "
                                         r"'threads', 'async' or a positive int"):
        create_network(name="x", concurrency="fibers")
    with pytest.raises(ValueError, match="Invalid concurrency option: 0"):
        create_network(name="x", concurrency=0)
    with pytest.raises(ConfigurationError, match="Network 'empty' has no tasks"):
        create_network(name="empty").run("x")
    only_optional = create_network(name="o").task("a", robot("a"), depends_on="optional")
    with pytest.raises(ConfigurationError, match="every task is optional and there is no router"):
        only_optional.run("x")


# -- acceptance 2: Runnable and introspection ------------------------------------------------------
def test_runnable_crew_chief_and_robot_lookup() -> None:
    network = create_network(name="support")
    network.task("classifier", robot("classifier_bot")).task("billing", robot("billing_bot"), depends_on="optional")
    assert network.is_network and not network.is_single and network.robot_count == 2
    assert [r.name for r in network.crew] == ["classifier_bot", "billing_bot"]
    assert list(network.robots) == ["classifier", "billing"]  # crew names differ from robots' keys
    assert network.chief is network.robots["classifier"]
    assert network.robot("billing") is network["billing"] is network.robots["billing"]
    assert network.robot("billing_bot") is None
    extra = robot("helper")
    assert network.add_robot(extra) is network and network["helper"] is extra  # added by robot name
    with pytest.raises(ValueError, match="Robot 'helper' already exists in network 'support'"):
        network.add_robot(robot("helper"))
    assert network.available_robots[-1] is extra
    assert network.remove_robot("billing") is not None and network.remove_robot("billing") is None
    assert "billing" in network.tasks  # the task stays


def test_to_dict_mermaid_dot_plan_and_visualize(capsys: pytest.CaptureFixture[str]) -> None:
    network = create_network(name="support", config=RunConfig(max_concurrent_robots=4))
    network.task("classifier", robot("classifier_bot")).task("billing", robot("billing"), depends_on="optional")
    network.task("a", robot("a"), depends_on="classifier").task("b", robot("b"), depends_on="classifier")
    network.task("join", robot("join"), depends_on=["a", "b"])
    assert network.to_dict() == {"name": "support", "robots": ["classifier", "billing", "a", "b", "join"],
                                 "tasks": ["classifier", "billing", "a", "b", "join"],
                                 "optional_tasks": ["billing"], "config": {"max_concurrent_robots": 4}}
    assert create_network(name="bare").to_dict() == {"name": "bare", "robots": [], "tasks": [], "optional_tasks": []}
    mermaid = network.to_mermaid()
    assert mermaid.splitlines()[:3] == ["flowchart TD", '    classifier["classifier (classifier_bot)"]',
                                        '    billing["billing"]']
    assert "    classifier --> a" in mermaid and "    b --> join" in mermaid
    assert mermaid.endswith("    classDef optional stroke-dasharray: 5 5\n    class billing optional")
    dot = network.to_dot()
    assert dot.startswith('digraph "support" {') and '"billing" [label="billing", style=dashed];' in dot
    assert '"a" -> "join";' in dot and dot.endswith("}")
    assert network.execution_plan == (
        "Execution plan for network 'support':\n  Phase 1: classifier\n  Phase 2 (parallel): a, b\n"
        "  Phase 3: join\n  Optional (activated by routing): billing"
    )
    assert network.phases() == [["classifier"], ["a", "b"], ["join"]]
    network.visualize()
    assert capsys.readouterr().out == mermaid + "\n"


def test_broadcast_reaches_handlers_and_memory() -> None:
    network = create_network(name="news")
    received: list[dict[str, Any]] = []
    changes: list[Any] = []
    network.memory.subscribe(BROADCAST_KEY, callback=changes.append)

    @network.on_broadcast
    def handler(envelope: dict[str, Any]) -> None:
        received.append(envelope)

    def failing(envelope: dict[str, Any]) -> None:
        raise RuntimeError("handler broke")

    network.on_broadcast(failing)
    assert network.broadcast({"event": "deploy"}) is network
    envelope = received[0]
    assert envelope["payload"] == {"event": "deploy"} and envelope["network"] == "news" and envelope["timestamp"]
    assert network.memory.get(BROADCAST_KEY) == envelope and changes[0].value == envelope
    with pytest.raises(ValueError, match="Block required for on_broadcast"):
        network.on_broadcast(None)  # type: ignore[arg-type]


async def test_async_broadcast_handlers_run_on_the_loop() -> None:
    network = create_network(name="news")
    done = asyncio.Event()

    async def handler(envelope: dict[str, Any]) -> None:
        assert envelope["payload"] == 1
        done.set()

    network.on_broadcast(handler)
    network.broadcast(1)
    await asyncio.wait_for(done.wait(), timeout=5)


def test_sync_broadcast_runs_async_handlers_to_completion() -> None:
    network = create_network(name="news")
    seen: list[Any] = []

    async def handler(envelope: dict[str, Any]) -> None:
        seen.append(envelope["payload"])

    network.on_broadcast(handler)
    network.broadcast("x")
    assert seen == ["x"]


def test_builder_and_context_manager_forms() -> None:
    built = create_network(lambda n: n.task("a", robot("a")), name="built")
    assert list(built.tasks) == ["a"]
    with create_network(name="ctx") as network:
        network.task("a", robot("a"))
    assert network.run("hi").value.reply == "ok"
    assert repr(network) == "<Network 'ctx' tasks=['a']>"


# -- per-run on_event, on_content and hooks ----------------------------------------------------------
def summarize(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.kind, e.data.get("task")) for e in events]


def test_on_event_streams_the_network_and_every_robot_with_one_run_id_and_seq() -> None:
    events: list[Event] = []
    network = create_network(name="pipe")
    network.task("draft", build(name="writer", llm=FakeLLM(default="A draft.")))
    network.task("review", build(name="editor", llm=FakeLLM(default="Reviewed.")), depends_on="draft")
    result = network.run("Write it", on_event=events.append, run_id="net-1")
    assert result.value.reply == "Reviewed."
    assert {e.run_id for e in events} == {"net-1"} and [e.seq for e in events] == list(range(1, len(events) + 1))
    robot_kinds = ["run.started", "text.delta", "usage.updated", "run.completed"]
    assert [(k, t) for k, t in summarize(events) if k != "text.delta"] == [
        ("run.started", None),
        ("step.started", "draft"), *[(k, "draft") for k in robot_kinds if k != "text.delta"],
        ("step.completed", "draft"),
        ("step.started", "review"), *[(k, "review") for k in robot_kinds if k != "text.delta"],
        ("step.completed", "review"),
        ("run.completed", None), ("stream.ended", None),
    ]
    first, last = events[0], events[-2]
    assert first.data == {"network": "pipe", "message": "Write it"}
    assert last.data == {"network": "pipe", "reply": "Reviewed.", "tasks": ["draft", "review"]}
    deltas = [e for e in events if e.kind == "text.delta"]
    assert "".join(e.data["text"] for e in deltas if e.data["task"] == "draft") == "A draft."
    assert all(e.data["robot"] == "writer" and e.data["network"] == "pipe" for e in deltas if e.data["task"] == "draft")
    step = next(e for e in events if e.kind == "step.completed")
    assert step.data == {"network": "pipe", "task": "draft", "robot": "writer", "reply": "A draft."}
    assert [e.kind for e in events].count("stream.ended") == 1  # the robots' own are left out
    assert network.run("again").value.reply == "Reviewed."  # no listener: nothing is sent, nothing breaks


async def test_on_event_marks_parallel_tasks_and_failures() -> None:
    events: list[Event] = []
    network = create_network(name="fan")
    network.task("ok", build(name="ok", llm=FakeLLM(["fine"])))
    network.task("broken", build(name="broken", llm=FakeLLM([raise_(InferenceError("provider down"))])))
    network.task("after", build(name="after", llm=FakeLLM(["recovered"])), depends_on=["ok", "broken"])
    await network.arun("go", on_event=events.append)
    failed = next(e for e in events if e.kind == "run.failed")
    assert failed.data["task"] == "broken" and failed.data["error_type"] == "InferenceError"
    completed = next(e for e in events if e.kind == "step.failed" and e.data["task"] == "broken")
    assert completed.data["reply"] == "Error: InferenceError: provider down"  # the network goes on
    assert events[-2].kind == "run.completed" and events[-2].data["reply"] == "recovered"

    class Explodes(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            raise RuntimeError("step broke")

    events.clear()
    broken = create_network(name="b").task("x", Explodes(name="x", llm=FakeLLM()))
    with pytest.raises(RuntimeError, match="step broke"):
        await broken.arun("go", on_event=events.append)
    assert [e.kind for e in events] == ["run.started", "step.started", "step.failed", "run.failed", "stream.ended"]
    assert events[2].data == {"network": "b", "task": "x", "robot": "x", "error": "step broke",
                              "error_type": "RuntimeError"}
    assert events[3].data == {"network": "b", "error": "step broke", "error_type": "RuntimeError"}


async def test_a_task_whose_robot_failed_ends_with_step_failed_carrying_its_reply_and_error() -> None:
    events: list[Event] = []
    network = create_network(name="fan")
    network.task("broken", build(name="broken", llm=FakeLLM([raise_(InferenceError("provider down"))])))
    network.task("after", build(name="after", llm=FakeLLM(["recovered"])), depends_on="broken")
    await network.arun("go", on_event=events.append)
    steps = [(e.kind, e.data["task"]) for e in events if e.kind.startswith("step.")]
    assert steps == [("step.started", "broken"), ("step.failed", "broken"), ("step.started", "after"),
                     ("step.completed", "after")]
    failed = next(e for e in events if e.kind == "step.failed")
    robot_failed = next(e for e in events if e.kind == "run.failed")
    assert failed.data == {"network": "fan", "task": "broken", "robot": "broken",
                           "reply": "Error: InferenceError: provider down",
                           **{key: robot_failed.data[key] for key in ("error", "error_type", "error_kind")
                              if key in robot_failed.data}}
    assert failed.data["error"] == "provider down" and failed.data["error_type"] == "InferenceError"


async def test_a_task_is_not_failed_by_a_run_of_another_robot_it_started() -> None:
    class Retries(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            on_event = (result.context.get("run_params") or {})["on_event"]
            flaky = build(name="flaky", llm=FakeLLM([raise_(InferenceError("provider down"))]))
            with pytest.raises(InferenceError):
                await flaky.arun("go", on_event=on_event)
            return result.continue_("fallback")

    events: list[Event] = []
    network = create_network(name="n").task("x", Retries(name="x", llm=FakeLLM()))
    await network.arun("go", on_event=events.append)
    assert "run.failed" in [e.kind for e in events if e.data.get("robot") == "flaky"]
    assert [e.kind for e in events if e.kind.startswith("step.")] == ["step.started", "step.completed"]


async def test_a_nested_network_that_failed_ends_its_outer_step_with_step_failed() -> None:
    class Explodes(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            raise RuntimeError("inner broke")

    events: list[Event] = []
    inner = create_network(name="inner").task("x", Explodes(name="x", llm=FakeLLM()))
    outer = create_network(name="outer").task("nested", inner).task(
        "after", build(name="after", llm=FakeLLM(["recovered"])), depends_on="nested")
    await outer.arun("go", on_event=events.append)
    steps = [(e.kind, e.data["network"], e.data["task"]) for e in events if e.kind.startswith("step.")]
    assert steps == [("step.started", "outer", "nested"), ("step.started", "inner", "x"),
                     ("step.failed", "inner", "x"), ("step.failed", "outer", "nested"),
                     ("step.started", "outer", "after"), ("step.completed", "outer", "after")]
    failed = next(e for e in events if e.kind == "step.failed" and e.data["network"] == "outer")
    assert failed.data == {"network": "outer", "task": "nested", "robot": "inner",
                           "reply": "Error: RuntimeError: inner broke", "error": "inner broke",
                           "error_type": "RuntimeError"}


def test_on_content_reaches_every_robot_of_the_run() -> None:
    chunks: list[Chunk] = []
    network = create_network(name="pipe")
    network.task("a", build(name="a", llm=FakeLLM(["one"]))).task("b", build(name="b", llm=FakeLLM(["two"])),
                                                                  depends_on="a")
    network.run("go", on_content=chunks.append)
    assert "".join(c.content for c in chunks) == "onetwo"


def test_per_run_hooks_see_the_network_run_each_task_and_each_robot_run() -> None:
    seen: list[str] = []

    class PerRun(hooks.Hook):
        @classmethod
        def before_network_run(cls, ctx: Any) -> None:
            seen.append(f"network {ctx.network.name}")

        @classmethod
        def before_task(cls, ctx: Any) -> None:
            seen.append(f"task {ctx.task_name}")

        @classmethod
        def before_run(cls, ctx: Any) -> None:
            seen.append(f"run {ctx.robot.name}")

        @classmethod
        def after_network_run(cls, ctx: Any) -> None:
            seen.append(f"done {ctx.result.value.reply}")

    class Registered(hooks.Hook):
        @classmethod
        def before_task(cls, ctx: Any) -> None:
            seen.append(f"registered {ctx.task_name}")

    network = create_network(name="traced")
    network.on(Registered)
    network.task("a", build(name="a_bot", llm=FakeLLM(default="A")))
    network.task("b", build(name="b_bot", llm=FakeLLM(default="B")), depends_on="a")
    network.run("hi", hooks=PerRun)
    assert seen == ["network traced", "registered a", "task a", "run a_bot", "registered b", "task b", "run b_bot",
                    "done B"]  # per-run hooks after the registries
    seen.clear()
    network.run("hi")
    assert seen == ["registered a", "registered b"]  # only for the run they were given to
    with pytest.raises(TypeError, match="must be a robotlab.Hook subclass"):
        network.run("hi", hooks=[object])


# -- hitl.* events from a robot inside a network ---------------------------------------------------
def test_ask_user_inside_a_network_reaches_the_network_stream() -> None:
    channel = QueueChannel(timeout=5)
    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which plan?", choices=["Basic", "Pro"]),
                   "Upgrading you to Pro."])
    concierge = build(name="concierge", llm=llm, local_tools=[AskUser])
    concierge.ask_channel = channel
    network = create_network(name="signup")
    network.task("triage", build(name="triage", llm=FakeLLM(["needs a plan"])))
    network.task("ask", concierge, depends_on="triage")
    events: list[Event] = []

    def on_event(event: Event) -> None:  # a page answers the question it sees, from another thread
        events.append(event)
        if event.kind == "hitl.requested":
            threading.Thread(target=channel.answer, args=(event.data["request_id"], "2")).start()

    result = network.run("Sign me up", on_event=on_event)
    assert result.value.reply == "Upgrading you to Pro."
    hitl = [e for e in events if e.kind.startswith("hitl.")]
    assert [e.kind for e in hitl] == ["hitl.requested", "hitl.resolved"]
    assert all(e.data["task"] == "ask" and e.data["network"] == "signup" for e in hitl)
    assert hitl[0].data["question"] == "Which plan?" and hitl[0].data["robot"] == "concierge"
    assert hitl[1].data["answer"] == "Pro" and hitl[1].data["request_id"] == hitl[0].data["request_id"]
    kinds = [e.kind for e in events if e.data.get("task") == "ask"]
    assert kinds.index("tool_call.started") < kinds.index("hitl.requested") < kinds.index("hitl.resolved") \
        < kinds.index("tool_call.completed")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


# -- nested networks --------------------------------------------------------------------------------
def research_network(**options: Any) -> Network:
    inner = create_network(name="research", **options)
    inner.task("search", build(name="searcher", llm=FakeLLM(default="three sources"),
                               local_tools=[RememberCategory]))
    inner.task("digest", build(name="digester", llm=FakeLLM(default="the digest")), depends_on="search")
    return inner


def test_a_nested_network_runs_as_one_step_keyed_by_its_name() -> None:
    inner = research_network()
    writer = build(name="writer", llm=FakeLLM(default="the article"))
    outer = create_network(name="newsroom")
    outer.task("plan", build(name="planner", llm=FakeLLM(default="research solar"))).task(
        "research", inner, depends_on="plan").task("write", writer, depends_on="research")
    result = outer.run("Write about solar")
    assert list(result.context) == ["run_params", "planner", "research", "writer"]  # by the NETWORK's name
    nested = result.context["research"]
    assert isinstance(nested, FlowResult) and list(nested.context) == ["run_params", "searcher", "digester"]
    assert nested.context["run_params"]["network"] is inner and "task" not in nested.context["run_params"]
    assert inner.robots["search"].messages[0]["content"] == "research solar"  # the upstream reply
    assert writer.messages[0]["content"] == "the digest"  # the inner network's final reply
    assert result.replies == {"planner": "research solar", "research": "the digest", "writer": "the article"}
    assert result.value.reply == "the article"


async def test_a_nested_network_keeps_its_own_memory_unless_its_task_shares_one() -> None:
    inner = research_network()
    inner.robots["search"].llm.push(tool_call("remember_category", category="solar"), "found")  # type: ignore[attr-defined]
    outer = create_network(name="newsroom").task("research", inner)
    await outer.arun("go")
    assert inner.memory.get("category") == "solar" and outer.memory.get("category") is None
    shared = research_network()
    shared.robots["search"].llm.push(tool_call("remember_category", category="wind"), "found")  # type: ignore[attr-defined]
    outer = create_network(name="newsroom")
    outer.task("research", shared, memory=outer.memory)  # every robot inside uses the outer memory
    await outer.arun("go")
    assert outer.memory.get("category") == "wind" and shared.memory.get("category") is None


def test_a_nested_network_streams_into_the_outer_run_and_gets_its_hooks() -> None:
    seen: list[str] = []

    class PerRun(hooks.Hook):
        @classmethod
        def before_network_run(cls, ctx: Any) -> None:
            seen.append(ctx.network.name)

    events: list[Event] = []
    outer = create_network(name="newsroom").task("research", research_network())
    outer.task("write", build(name="writer", llm=FakeLLM(default="done")), depends_on="research")
    outer.run("go", on_event=events.append, hooks=[PerRun], run_id="r")
    assert seen == ["newsroom", "research"]
    assert {e.run_id for e in events} == {"r"} and [e.seq for e in events] == list(range(1, len(events) + 1))
    steps = [(e.kind, e.data["network"], e.data["task"]) for e in events if e.kind.startswith("step.")]
    assert steps == [("step.started", "newsroom", "research"),
                     ("step.started", "research", "search"), ("step.completed", "research", "search"),
                     ("step.started", "research", "digest"), ("step.completed", "research", "digest"),
                     ("step.completed", "newsroom", "research"),
                     ("step.started", "newsroom", "write"), ("step.completed", "newsroom", "write")]
    inner_run = [e for e in events if e.kind == "run.completed" and e.data.get("network") == "research"
                 and "tasks" in e.data]
    assert inner_run[0].data["task"] == "research" and inner_run[0].data["tasks"] == ["search", "digest"]
    assert [e.kind for e in events].count("stream.ended") == 1 and events[-1].kind == "stream.ended"


def test_a_failing_nested_network_becomes_an_error_result() -> None:
    inner = create_network(name="inner", router=lambda result: "ghost")
    inner.task("only", build(name="only", llm=FakeLLM(default="x")))
    after = build(name="after", llm=FakeLLM(default="carried on"))
    outer = create_network(name="outer").task("inner", inner).task("after", after, depends_on="inner")
    result = outer.run("go")
    message = "Error: ConfigurationError: The router activated unknown task 'ghost' in network 'inner' (tasks: only)"
    assert result.context["inner"].value.reply == message and result.errors == {"inner": [message]}
    assert after.messages[0]["content"] == message and result.value.reply == "carried on"


def test_a_network_cannot_contain_itself() -> None:
    a = create_network(name="a").task("x", robot("x"))
    with pytest.raises(ConfigurationError, match=r"Network 'a' cannot contain itself: a -> a"):
        a.task("self", a)
    b = create_network(name="b").task("a", a)
    c = create_network(name="c").task("b", b)
    with pytest.raises(ConfigurationError, match=r"Network 'a' cannot contain itself: a -> c -> b -> a"):
        a.task("c", c)
    assert list(a.tasks) == ["x"]  # nothing was added
    a.tasks["sneaky"] = Task(name="sneaky", robot=c, network=a)  # behind task()'s back
    with pytest.raises(ConfigurationError, match="cannot contain itself: a -> c -> b -> a"):
        a.run("go")


def test_runnable_api_of_nested_networks() -> None:
    inner = research_network()
    outer = create_network(name="newsroom").task("plan", robot("planner")).task("research", inner)
    assert [r.name for r in outer.crew] == ["planner", "searcher", "digester"]  # the inner crew in its place
    assert outer.robot_count == 3 and outer.chief is outer.robots["plan"]
    assert outer.is_network and not outer.is_single
    assert outer["research"] is inner and list(outer.robots) == ["plan", "research"]
    assert outer.to_dict()["tasks"] == ["plan", "research"]
    assert '    research["research"]' in outer.to_mermaid()
    leading = create_network(name="lead").task("research", research_network())
    assert leading.chief.name == "searcher"  # the first robot doing the work


async def test_astream_and_stream_yield_the_network_events() -> None:
    network = create_network(name="pipe").task("a", build(name="a", llm=FakeLLM(default="one")))
    network.task("b", build(name="b", llm=FakeLLM(default="two")), depends_on="a")
    kinds = [event.kind async for event in network.astream("go")]
    assert kinds[0] == "run.started" and kinds[-2:] == ["run.completed", "stream.ended"]
    assert kinds.count("step.completed") == 2
    synced = list(network.stream("go", run_id="s"))
    assert [e.kind for e in synced] == kinds and {e.run_id for e in synced} == {"s"}
    broken = create_network(name="b", router=lambda result: "ghost").task("a", build(name="a", llm=FakeLLM(["x"])))
    seen: list[str] = []
    with pytest.raises(ConfigurationError, match="unknown task 'ghost'"):
        for event in broken.stream("go"):
            seen.append(event.kind)
    assert seen[-2:] == ["run.failed", "stream.ended"]


async def test_a_task_cancelled_by_another_tasks_failure_closes_its_step_before_the_run_ends() -> None:
    started = asyncio.Event()

    async def hang(request: Any) -> str:
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return "never"

    class FailsOnceTheOtherRuns(Robot):
        async def call(self, result: FlowResult) -> FlowResult:
            await asyncio.wait_for(started.wait(), timeout=5)
            raise RuntimeError("step broke")

    events: list[Event] = []
    network = create_network(name="n").task("slow", build(name="slow", llm=FunctionLLM(hang)))
    network.task("bad", FailsOnceTheOtherRuns(name="bad", llm=FakeLLM()))
    with pytest.raises(RuntimeError, match="step broke"):
        await network.arun("go", on_event=events.append)
    steps = [(e.kind, e.data["task"], e.data.get("error_type")) for e in events if e.kind.startswith("step.")]
    assert sorted(steps[2:]) == [("step.failed", "bad", "RuntimeError"), ("step.failed", "slow", "CancelledError")]
    assert [e.kind for e in events][-2:] == ["run.failed", "stream.ended"]
