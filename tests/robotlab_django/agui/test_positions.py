"""SSE ids: a position is written and read back, and anything else is refused with what an id looks like."""

from __future__ import annotations

import pytest

from robotlab_django.agui.positions import END, EVENT, START, Position

RUN = "0" * 31 + "a"


def test_a_position_reads_back_as_it_was_written() -> None:
    for position in (Position(RUN, 0, START, 2), Position(RUN, 41, EVENT, 3, ((7, 52), (5, 50), (9, 51))),
                     Position(RUN, 0, END, 1, ((5, 50),))):
        assert Position.parse(str(position)) == position
    assert Position(RUN, 0, EVENT, 1, ((7, 52), (5, 50))).current == (7, 52)
    assert Position(RUN, 0, END, 1, ((7, 52),)).current is None


@pytest.mark.parametrize("text", ["", "1:2:3", f"{RUN}:0:e1:", f"{RUN}:0:x1:", f"{RUN.upper()}:0:s1:",
                                  f"{RUN}:0:e1:5-1,5-2", f"{RUN}:0:s1:5-1;drop", f"{RUN}:-1:s1:"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Last-Event-ID is not an id of this server's AG-UI events"):
        Position.parse(text)
