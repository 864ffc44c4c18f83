"""How an endpoint's connection stands, as a value the screens read by its fields.

It used to be one line of words that the header and the fleet rows matched by prefix
(`startswith("reconnecting")`), so a source that worded it differently drew the wrong mark.
Now a source says the state, the attempt and the delay; `text` writes the words users have
always read, and the screens decide by `state` (`healthy`, `lost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ConnectionState = Literal[
    "connected", "connecting", "reconnecting", "simulated", "replay", "down", "unknown"
]


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """How one endpoint's connection stands, for the header and the fleet rows.

    The screens decide by `state` (healthy, lost, or on its way) and print `text`, the words
    users have always read: `connected`, `connecting`, `reconnecting (attempt 2, next in 4 s)`.
    """

    state: ConnectionState
    attempt: int = 0
    """Failed attempts in a row (while reconnecting)."""
    retry_in_s: float | None = None
    """Seconds until the next attempt (while reconnecting)."""
    detail: str = ""
    """The whole line when the state's name is not enough to say it: a replay's
    `replay paused ×2`, why a target is down."""

    @property
    def text(self) -> str:
        if self.detail:
            return self.detail
        if self.state == "reconnecting":
            wait = max(0.0, self.retry_in_s or 0.0)
            return f"reconnecting (attempt {self.attempt}, next in {wait:.0f} s)"
        return self.state

    @property
    def healthy(self) -> bool:
        """As good as it gets: connected, simulated, or a trace being replayed."""
        return self.state in ("connected", "simulated", "replay")

    @property
    def lost(self) -> bool:
        """It was reached and is no longer: vtop is trying again."""
        return self.state == "reconnecting"


CONNECTED = ConnectionStatus("connected")
CONNECTING = ConnectionStatus("connecting")
SIMULATED = ConnectionStatus("simulated")
UNKNOWN = ConnectionStatus("unknown")
