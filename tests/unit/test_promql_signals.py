"""Every signal the rules may read has PromQL, or the export says why not.

A signal vtop measures itself (this host's CPU, NVML's power limit) has no wire name: a
translation that went on regardless wrote `avg_over_time((())[2m:])` into an alert, which
Prometheus refuses, so the export must stop at it, naming the signal.
"""

from __future__ import annotations

import pytest

from vtop.signals.catalog import SIGNALS
from vtop.triage.engine import Engine
from vtop.triage.promql.conditions import Translator
from vtop.triage.promql.measures import MEASURED_BY_PROMETHEUS
from vtop.triage.promql.terms import NotExpressible, Options
from vtop.triage.schema import Operand

RULE = Engine.from_catalog(user=False).rules[0]
UNPUBLISHED = sorted(
    s.name for s in SIGNALS if not s.aliases and s.name not in MEASURED_BY_PROMETHEUS
)


def test_some_signals_are_measured_by_vtop_alone() -> None:
    assert "host_cpu" in UNPUBLISHED


@pytest.mark.parametrize("name", UNPUBLISHED)
def test_a_signal_no_server_publishes_is_not_expressible(name: str) -> None:
    translator = Translator(RULE, Options())
    with pytest.raises(NotExpressible, match=name):
        translator.instant(Operand(name))
