"""The Django docs pages keep up with the code: every setting, check id and command is documented."""

from __future__ import annotations

import re
from pathlib import Path

from robotlab_django.conf import SETTINGS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "django"


def test_every_setting_is_documented_with_its_default() -> None:
    page = (DOCS / "settings.md").read_text()
    for key, spec in SETTINGS.items():
        default = repr(spec.default).replace("'", '"')
        row = re.search(rf"^\| `{key}` \| `([^`]*)` \|", page, re.MULTILINE)
        assert row, key
        assert row.group(1) == default, (key, row.group(1), default)


def test_every_check_id_is_documented() -> None:
    package = Path(__file__).resolve().parents[2] / "robotlab_django"
    source = "".join((package / name).read_text() for name in ("checks.py", "evals/checks.py"))
    ids = set(re.findall(r'id="(robotlab\.[EW]\d{3})"', source))
    page = (DOCS / "checks.md").read_text()
    assert ids == set(re.findall(r"`(robotlab\.[EW]\d{3})`", page))


def test_every_command_is_documented() -> None:
    commands = {path.stem for path in (Path(__file__).resolve().parents[2] / "robotlab_django" / "management"
                                       / "commands").glob("[a-z]*.py")}
    text = ((DOCS / "scaffolding.md").read_text() + (DOCS / "models.md").read_text()
            + (DOCS.parent / "guides" / "mcp.md").read_text() + (DOCS / "security.md").read_text()
            + (DOCS / "acp.md").read_text() + (DOCS / "versions-and-evals.md").read_text())
    assert commands == {"robotlab_install", "startrobot", "startrobotjob", "robotlab_prune",
                        "robotlab_requeue_stuck", "robotlab_mcp", "robotlab_erase", "robotlab_token",
                        "robotlab_rollups", "robotlab_eval"}
    for command in commands:
        assert command in text
