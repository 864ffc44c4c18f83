"""A connection's status is a value the screens read by its fields; its `text` is the words
users have always read, and the one reader of words (`connection_status`, for a source that
still returns them) maps them back to the same value."""

from __future__ import annotations

import pytest

from vtop.sources.status import (
    CONNECTED,
    CONNECTING,
    SIMULATED,
    UNKNOWN,
    ConnectionStatus,
    connection_status,
)

RECONNECTING = ConnectionStatus("reconnecting", 3, 4.4)


def test_text_is_the_words_the_screens_always_printed() -> None:
    assert (CONNECTED.text, CONNECTING.text, SIMULATED.text) == (
        "connected", "connecting", "simulated")  # fmt: skip
    assert RECONNECTING.text == "reconnecting (attempt 3, next in 4 s)"
    assert ConnectionStatus("reconnecting", 1, -0.2).text == "reconnecting (attempt 1, next in 0 s)"
    assert ConnectionStatus("replay", detail="replay paused ×2").text == "replay paused ×2"


def test_the_state_says_healthy_lost_or_neither() -> None:
    assert CONNECTED.healthy and SIMULATED.healthy and ConnectionStatus("replay").healthy
    assert RECONNECTING.lost and not RECONNECTING.healthy
    for neither in (CONNECTING, UNKNOWN, ConnectionStatus("down", detail="up == 0")):
        assert not neither.healthy and not neither.lost


@pytest.mark.parametrize(
    "words", ["connected", "connecting", "simulated", "unknown", RECONNECTING.text,
              "replay: end of trace", "Prometheus at p:9090 reports x down (up == 0)"],
)  # fmt: skip
def test_words_read_back_to_the_same_state_and_text(words: str) -> None:
    status = connection_status(words)
    assert status.text == words
    expected = {"connected": "connected", "connecting": "connecting", "simulated": "simulated",
                "unknown": "unknown", RECONNECTING.text: "reconnecting",
                "replay: end of trace": "replay"}.get(words, "down")  # fmt: skip
    assert status.state == expected
    assert connection_status(RECONNECTING) is RECONNECTING
