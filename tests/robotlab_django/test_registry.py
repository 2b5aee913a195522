"""The robot registry and autodiscovery."""

from __future__ import annotations

from typing import Any

import pytest

import robotlab
from robotlab.testing import FakeLLM
from robotlab_django.registry import RobotAlreadyRegistered, RobotRegistry, UnknownRobotError, register_robot, registry

pytestmark = pytest.mark.usefixtures("clean_registry")


def test_autodiscovery_registered_the_test_apps_robots() -> None:
    assert {"echo", "calculator"} <= set(registry.names())
    assert registry.get("calculator").description == "Adds numbers"
    assert registry.get("echo").origin == "tests.robotlab_django.robotapp.robots.echo_robot.EchoRobot"


def test_autodiscover_imports_public_submodules_only() -> None:
    imported = RobotRegistry().autodiscover()
    assert "tests.robotlab_django.robotapp.robots" in imported
    assert "tests.robotlab_django.robotapp.robots.echo_robot" in imported
    assert not any(name.endswith("_not_discovered") for name in imported)


def test_a_class_factory_builds_a_fresh_robot_each_time() -> None:
    entry = registry.get("echo")
    first, second = entry.build(llm=FakeLLM()), entry.build(llm=FakeLLM())
    assert isinstance(first, robotlab.Robot) and first is not second
    assert first.name == "echo"


@pytest.mark.parametrize("spelling", ["Echo", "EchoRobot", "echo_robot"])
def test_get_normalises_the_name(spelling: str) -> None:
    assert registry.get(spelling).name == "echo"


def test_unknown_robot_lists_the_registered_ones_and_suggests() -> None:
    with pytest.raises(UnknownRobotError) as raised:
        registry.get("ecko")
    message = str(raised.value)
    assert "Unknown robot 'ecko'" in message and "calculator, echo" in message
    assert "Did you mean 'echo'?" in message
    assert "no robots are registered" in str(UnknownRobotError("x", []))


def test_register_function_and_decorator_forms() -> None:
    local = RobotRegistry()

    def helper(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="helper", **options)

    assert local.register(helper) is helper
    assert local.get("helper").factory is helper
    local.register(helper, name="other", description="Another name")
    assert local.get("other").description == "Another name"
    assert local.names() == ["helper", "other"]
    assert "helper" in local and len(local) == 2 and list(local) == ["helper", "other"]
    local.unregister("other")
    assert local.names() == ["helper"]


def test_register_robot_decorator_uses_the_global_registry() -> None:
    @register_robot(name="decorated")
    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="decorated", **options)

    assert registry.get("decorated").factory is build


def test_a_second_factory_cannot_take_a_name() -> None:
    local = RobotRegistry()

    def one(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="same", **options)

    def two(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="same", **options)

    local.register(one, name="same")
    local.register(one, name="same")  # the same factory again (a re-import) is fine
    with pytest.raises(RobotAlreadyRegistered, match="already registered by"):
        local.register(two, name="same")
    local.register(two, name="same", replace=True)
    assert local.get("same").factory is two


def test_a_robot_instance_or_non_factory_is_refused() -> None:
    local = RobotRegistry()
    with pytest.raises(TypeError, match="not the Robot instance"):
        local.register(robotlab.build(name="stateful"))
    with pytest.raises(TypeError, match="must be callable"):
        local.register(42, name="x")

    class NoBuild:
        name = "nobuild"

    with pytest.raises(TypeError, match="no build"):
        local.register(NoBuild)


def test_a_factory_must_return_a_robot() -> None:
    local = RobotRegistry()
    local.register(lambda **options: "not a robot", name="liar")
    with pytest.raises(TypeError, match="returned str, not a robotlab.Robot"):
        local.build("liar")


def test_robots_from_settings(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB,
                         "ROBOTS": {"adder": "tests.robotlab_django.robotapp.robots.echo_robot.build_calculator"}}
    assert "adder" in registry.names()
    entry = registry.get("adder")
    assert entry.origin == "tests.robotlab_django.robotapp.robots.echo_robot.build_calculator"
    assert entry.build(llm=FakeLLM()).name == "calculator"


def test_resolve_accepts_names_classes_and_registers_new_classes() -> None:
    echo = registry.get("echo")
    assert registry.resolve("echo") == echo
    assert registry.resolve(echo) is echo

    class FreshRobot:
        name = "fresh"

        @classmethod
        def build(cls, **options: Any) -> robotlab.Robot:
            return robotlab.build(name=cls.name, **options)

    assert registry.resolve(FreshRobot).name == "fresh"
    assert "fresh" in registry.names()


# -- networks ----------------------------------------------------------------------------
def _triage(**options: Any) -> robotlab.Network:
    network = robotlab.create_network(name="triage")
    network.task("first", robotlab.build(name="first", **options))
    return network


def test_network_factories_register_like_robot_factories() -> None:
    local = RobotRegistry()
    assert local.register_network(_triage) is _triage
    local.register_network(_triage, name="desk", description="A help desk")

    class Routed:
        name = "routed"
        description = "Routes things"

        @classmethod
        def build(cls, **options: Any) -> robotlab.Network:
            return _triage(**options)

    local.register_network(Routed)
    assert local.network_names() == ["_triage", "desk", "routed"]
    assert local.names() == []  # networks are not robots
    assert local.get_network("desk").description == "A help desk"
    assert local.get_network("routed").origin.endswith("Routed")
    built = local.build_network("routed", llm=FakeLLM())
    assert isinstance(built, robotlab.Network) and built is not local.build_network("routed", llm=FakeLLM())
    assert local.is_network("desk") and not local.is_network("nothing")
    assert local.lookup("desk").kind == "network"
    local.unregister("desk")
    assert "desk" not in local.network_names()


def test_register_network_decorator_uses_the_global_registry() -> None:
    from robotlab_django.registry import register_network

    @register_network
    def front_desk(**options: Any) -> robotlab.Network:
        return _triage(**options)

    @register_network(name="other_desk", description="Another one")
    def build_other(**options: Any) -> robotlab.Network:
        return _triage(**options)

    assert registry.get_network("front_desk").factory is front_desk
    assert registry.get_network("other_desk").description == "Another one"
    assert {"front_desk", "helpdesk", "other_desk"} <= set(registry.network_names())


def test_unknown_network_lists_the_registered_ones_and_suggests() -> None:
    from robotlab_django.registry import UnknownNetworkError

    local = RobotRegistry()
    with pytest.raises(UnknownNetworkError) as raised:
        local.get_network("triage")
    assert str(raised.value).startswith("Unknown network 'triage': no networks are registered. Register a "
                                        "factory with @register_network")
    assert "ROBOTLAB['NETWORKS']" in str(raised.value)
    local.register_network(_triage, name="triage")
    with pytest.raises(UnknownNetworkError, match=r"Unknown network 'triag'\. Registered networks: triage\. "
                                                  r"Did you mean 'triage'\?"):
        local.get_network("triag")
    assert issubclass(UnknownNetworkError, UnknownRobotError)  # one except clause catches both


def test_lookup_of_an_unknown_name_lists_robots_and_networks() -> None:
    with pytest.raises(UnknownRobotError) as raised:
        registry.lookup("nothing")
    message = str(raised.value)
    assert message.startswith("Unknown robot 'nothing'. Registered robots: calculator, echo.")
    assert "Registered networks: helpdesk." in message
    assert registry.lookup("echo").kind == "robot"


def test_robots_and_networks_share_one_namespace() -> None:
    local = RobotRegistry()

    def echo(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="echo", **options)

    local.register(echo)
    with pytest.raises(RobotAlreadyRegistered, match=r"Robot 'echo' is already registered by .*; the network "
                                                     r".* cannot take the name"):
        local.register_network(_triage, name="echo")
    local.register_network(_triage, name="echo", replace=True)
    assert local.names() == [] and local.network_names() == ["echo"]
    with pytest.raises(RobotAlreadyRegistered, match=r"Network 'echo' is already registered"):
        local.register(echo)


def test_a_network_instance_or_non_factory_is_refused() -> None:
    local = RobotRegistry()
    with pytest.raises(TypeError, match="not the Network instance 'triage'"):
        local.register_network(_triage())
    with pytest.raises(TypeError, match="network factory must be callable"):
        local.register_network(42, name="x")

    class NoBuild:
        name = "nobuild"

    with pytest.raises(TypeError, match="no build"):
        local.register_network(NoBuild)
    local.register_network(lambda **options: robotlab.build(name="solo"), name="liar")
    with pytest.raises(TypeError, match=r"factory of network 'liar' .* returned Robot, not a robotlab\.Network"):
        local.build_network("liar")


def test_networks_from_settings(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "NETWORKS": {"desk": "tests.robotlab_django.test_registry._triage"}}
    assert "desk" in registry.network_names()
    entry = registry.get_network("desk")
    assert entry.origin == "tests.robotlab_django.test_registry._triage"
    assert entry.build(llm=FakeLLM()).name == "triage"
    assert registry.is_network("desk")
