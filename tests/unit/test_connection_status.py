"""A connection's status is a value the screens read by its fields; its `text` is the words
users have always read."""

from __future__ import annotations

from vtop.sources.status import (
    CONNECTED,
    CONNECTING,
    SIMULATED,
    UNKNOWN,
    ConnectionStatus,
)

RECONNECTING = ConnectionStatus("reconnecting", 3, 4.4)


def test_text_is_the_words_the_screens_always_printed() -> None:
    assert (CONNECTED.text, CONNECTING.text, SIMULATED.text) == (
        "connected",
        "connecting",
        "simulated",
    )
    assert RECONNECTING.text == "reconnecting (attempt 3, next in 4 s)"
    assert ConnectionStatus("reconnecting", 1, -0.2).text == "reconnecting (attempt 1, next in 0 s)"
    assert ConnectionStatus("replay", detail="replay paused ×2").text == "replay paused ×2"


def test_the_state_says_healthy_lost_or_neither() -> None:
    assert CONNECTED.healthy and SIMULATED.healthy and ConnectionStatus("replay").healthy
    assert RECONNECTING.lost and not RECONNECTING.healthy
    for neither in (CONNECTING, UNKNOWN, ConnectionStatus("down", detail="up == 0")):
        assert not neither.healthy and not neither.lost
