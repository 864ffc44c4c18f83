"""Always concrete, never silent: a change a rule asks for but its own bounds rule out is said.

After past-sweet-spot's advice is applied (max_num_seqs 128 -> 112) the simulator's bursts
still queue, so ttft-queueing fires; its raise of max_num_seqs is capped by what the KV pool
fits, at the current value. The finding must say that the raise is withheld and why, and
offer the remedy that does apply (more KV), not a bare WARNING with no advice.
"""

from __future__ import annotations

import dataclasses
import textwrap

from tests.rules.test_triage_on_sim import run
from tests.unit.test_triage_engine import engine_of
from tests.unit.test_triage_engine import run as run_rules
from vtop.sim.scenarios import SCENARIOS


def test_past_sweet_spot_after_its_advice_says_why_max_num_seqs_is_not_raised() -> None:
    scenario = SCENARIOS["past-sweet-spot"]
    applied = dataclasses.replace(
        scenario, args=dataclasses.replace(scenario.args, max_num_seqs=112)
    )
    final = {f.rule: f for f in run(applied, seconds=480.0)[-1]}
    ttft = final["ttft-queueing"]
    assert ttft.state == "firing"
    notes = [v for label, v in ttft.evidence if label == "withheld"]
    assert len(notes) == 1, ttft.evidence
    assert notes[0].startswith("raising max_num_seqs is withheld: the KV pool fits only ")
    assert "sequences at 90%" in notes[0]
    flags = [r.flag for r in ttft.recommendations]
    assert flags == ["--kv-cache-dtype fp8"]  # the remedy that applies; no raise of the cap


def test_a_direction_the_value_cannot_keep_is_withheld_with_the_numbers() -> None:
    text = textwrap.dedent("""\
        id: capped
        title: capped
        severity: warning
        requires: {evidence: 1s}
        when: {max_over_time: running, window: 1m, above: 0}
        summary: "capped"
        recommend:
          - {knob: max_num_seqs, direction: raise, value: "min(128, 48)"}
        """)
    (f,) = run_rules(engine_of(text), 5, running=10, kv_usage=0.1)
    assert f.state == "firing" and f.recommendations == ()
    assert ("withheld", "raising max_num_seqs is withheld: the formula gives 48, now 64") in (
        f.evidence
    )
    with_text = text.replace('"min(128, 48)"}', '"48", withheld: "only {max_num_seqs} fit"}')
    (g,) = run_rules(engine_of(with_text), 5, running=10, kv_usage=0.1)
    assert ("withheld", "raising max_num_seqs is withheld: only 64 fit") in g.evidence
