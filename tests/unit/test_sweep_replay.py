"""The twin against eight real sweeps, offline: what a 45 s report predicted and chose at the bad
setting, beside what the real server did when restarted at each configuration.

tests/fixtures/sweeps holds bench/tune_real.py's recordings (`--record-dir`) of 2026-12-07 on a
2-core x86 CPU without AVX-512 (vLLM in float32; three on a CPU with AVX-512 in bfloat16): the
report's window at the bad setting and each swept configuration's 60 s under the same load (see
its README). The twin is fitted to the report's window as `vtop whatif --replay` fits it; each
configuration's measured change is read from its own trace by the same `figures`. The bounds
are what the twin does today (the later sweeps were not among the points its CPU's preset was
fitted to), so a change that makes it worse fails here, in seconds, instead of in a 25-minute
live run.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from vtop.knobs import KnobValue
from vtop.report.run import replay_document
from vtop.whatif.check import figures
from vtop.whatif.predict import WhatIf, prepare
from vtop.whatif.watched import read_trace

SWEEPS = Path(__file__).resolve().parents[1] / "fixtures" / "sweeps"


@functools.cache
def _fitted(folder: str) -> WhatIf:
    """The twin fitted to the report's window, as `vtop whatif --replay` fits it (5 minutes)."""
    report = next((SWEEPS / folder).glob("*-report.vtrace"))
    return prepare(read_trace(str(report)), 300.0)


def _measured(folder: str, seats: int) -> dict[str, float | None]:
    trace = next((SWEEPS / folder).glob(f"*-seqs{seats}.vtrace"))
    return figures(read_trace(str(trace)).store, None)


START = {"budget-bound": 2, "kv-exhausted": 16}
"""Each regime's bad setting: the measured change is read against the sweep's own run of it (60 s
after the same 15 s of load, as bench/tune_real.py reads it)."""


def _predicted_change(whatif: WhatIf, changes: dict[str, KnobValue]) -> float:
    band = whatif.predict(changes).figures["generation_tokens_per_s"]
    return band.after / band.now - 1


@pytest.mark.parametrize(
    ("folder", "seats", "within"),
    [
        # KV-exhausted (16 seats, a 3,072-token pool, 40 clients), the later sweep: every row
        # within 7 points; the morning's within 15 (6 seats: -7 % predicted, +8 % measured)
        *(("kv-exhausted-no-avx512-later", s, 0.075) for s in (4, 6, 7, 8, 10, 12)),
        *(("kv-exhausted-no-avx512", s, 0.155) for s in (4, 6, 8, 10, 12)),
        # budget-bound (2 seats, 24 clients): the rows around the goals' edge within 13 points;
        # wider batches under by up to 23 (48 while the window's dearer prompt token priced
        # every decode seat too: a decode seat costs less than a prompt token on this CPU)
        *(("budget-bound-no-avx512", s, 0.135) for s in (4, 8, 9)),
        *(("budget-bound-no-avx512", s, 0.25) for s in (12, 16, 24, 32)),
        # the two sweeps recorded live after the prompt-token law (the KV one 10-12 points
        # under on every row: its start's single run, 103 tok/s, is a high one; tune's read 101)
        *(("budget-bound-no-avx512-later", s, 0.10) for s in (4, 5, 8)),
        *(("budget-bound-no-avx512-later", s, 0.15) for s in (12, 16, 24)),
        *(("kv-exhausted-no-avx512-latest", s, 0.13) for s in (4, 6, 7, 8, 10, 12)),
    ],
)
def test_the_predicted_change_is_near_the_measured_one(
    folder: str, seats: int, within: float
) -> None:
    whatif = _fitted(folder)
    assert whatif.step.preset.name == "cpu-engine-no-avx512"  # the host's CPU was read
    tokens = _measured(folder, seats)["generation_tokens_per_s"]
    regime = folder.partition("-no-avx512")[0]
    start = _measured(folder, START[regime])["generation_tokens_per_s"]
    assert tokens is not None and start is not None
    change = _predicted_change(whatif, {"max_num_seqs": seats})
    assert change == pytest.approx(tokens / start - 1, abs=within)


def test_the_kv_reports_twin_is_confident_enough_to_choose() -> None:
    """30 requests wait at every poll of the KV-exhausted report's window, yet its queue p50
    reads 0.2 s: the requests that finished in it were the load's first, admitted at once.
    The twin's 58 s steady queue is not held against that (`check.queue_unjudged`), so the
    self-check is no longer "low" for it, and the twin may choose."""
    whatif = _fitted("kv-exhausted-no-avx512")
    assert whatif.check.errors["queue_p50"] is None
    assert whatif.check.confidence in ("medium", "high")


@pytest.mark.parametrize(
    ("folder", "seats"),
    [
        # the sweep's best meeting the default goals (no preemption, ITL mean at most 1.5x the
        # 2-seat start's 31 ms) is 4 seats (44.6 ms, 87 tok/s; 8 seats 61 ms); before the CPU's
        # preset the report recommended 9 (65 ms)
        ("budget-bound-no-avx512", 4),
        # the start read 36.1 ms that hour: 5 seats (50 ms, 97.9 tok/s) meets the bound
        ("budget-bound-no-avx512-later", 5),
    ],
)
def test_the_budget_report_recommends_the_sweeps_best_that_meets_the_goals(
    folder: str, seats: int
) -> None:
    report = next((SWEEPS / folder).glob("*-report.vtrace"))
    doc = replay_document(str(report))
    firing = [f for f in doc["findings"] if f["state"] == "firing" and f["recommendations"]]
    assert firing, doc["reason"]
    assert {r["knob"]: r["to"] for r in firing[0]["recommendations"]} == {"max_num_seqs": seats}
    itl = _measured(folder, seats)["itl_mean"]
    start = _measured(folder, 2)["itl_mean"]
    assert itl is not None and start is not None and itl <= 1.5 * start


WELL_TUNED = "well-tuned-avx512"
"""16 seats, 160 blocks, 16 clients, recorded on a 2-core AVX-512 CPU in bfloat16 (see the
folder's README): the server the report should leave alone."""


@pytest.mark.parametrize(
    ("seats", "within"),
    # 8 seats 11 points over: the preset's line prices an 8-seat step 10 % under the real one
    # on its own machine too (docs/calibration.md); 32 seats measured 11 % under 24, which the
    # same 16 clients fill alike: the server's own spread
    [(4, 0.05), (8, 0.12), (12, 0.06), (24, 0.06), (32, 0.12)],
)
def test_a_well_tuned_servers_twin_predicts_fewer_seats_cost_and_more_gain_nothing(
    seats: int, within: float
) -> None:
    whatif = _fitted(WELL_TUNED)
    assert whatif.step.preset.name == "cpu-engine"  # AVX-512: the law with the flat bottom
    assert whatif.workload.loop == "closed"  # 16 held in the server, no queue
    change = _predicted_change(whatif, {"max_num_seqs": seats})
    if seats > 16:
        assert change == pytest.approx(0.0, abs=0.005)  # 16 clients cannot fill more seats
    tokens = _measured(WELL_TUNED, seats)["generation_tokens_per_s"]
    start = _measured(WELL_TUNED, 16)["generation_tokens_per_s"]
    assert tokens is not None and start is not None
    assert change == pytest.approx(tokens / start - 1, abs=within)


def test_a_well_tuned_servers_report_recommends_nothing() -> None:
    report = next((SWEEPS / WELL_TUNED).glob("*-report.vtrace"))
    doc = replay_document(str(report))
    assert doc["status"] == "OK"
    assert not [f for f in doc["findings"] if f["state"] == "firing" and f["recommendations"]]


KV_AVX512 = "kv-exhausted-avx512"
"""16 seats, a 3,072-token pool, 40 clients, the same evening on the AVX-512 CPU (bfloat16),
where vLLM runs an FP8 KV cache: the rows with FP8 beside those without."""


@pytest.mark.parametrize(
    ("changes", "slug", "within"),
    [
        ({"max_num_seqs": 4}, "seqs4", 0.05),
        ({"max_num_seqs": 12}, "seqs12", 0.05),
        ({"kv_cache_dtype": "fp8", "max_num_seqs": 12}, "fp8-seqs12", 0.06),
        ({"kv_cache_dtype": "fp8"}, "fp8-seqs16", 0.05),
        ({"kv_cache_dtype": "fp8", "max_num_seqs": 24}, "fp8-seqs24", 0.07),
        # 6-10 seats: 11-19 points over (6 seats measured 323 tok/s at an ITL of 18.4 ms, 8
        # seats 415 at 19.2: that run was a slow one, but 8 and 10 are over too)
        ({"max_num_seqs": 8}, "seqs8", 0.13),
    ],
)
def test_the_kv_twin_on_the_avx512_cpu_predicts_fp8_and_fewer_seats(
    changes: dict[str, KnobValue], slug: str, within: float
) -> None:
    whatif = _fitted(KV_AVX512)
    assert whatif.step.preset.name == "cpu-engine"

    def tokens(name: str) -> float | None:
        trace = SWEEPS / KV_AVX512 / f"kv-exhausted-{name}.vtrace"
        return figures(read_trace(str(trace)).store, None)["generation_tokens_per_s"]

    got, start = tokens(slug), tokens("seqs16")
    assert got is not None and start is not None
    assert _predicted_change(whatif, changes) == pytest.approx(got / start - 1, abs=within)


def test_the_kv_report_on_the_avx512_cpu_recommends_fp8_at_the_same_seats() -> None:
    """FP8 KV at 16 seats: the sweep's best that meets the goals (586 tok/s, no preemption;
    12 seats with FP8 525, 24 preempting)."""
    report = next((SWEEPS / KV_AVX512).glob("*-report.vtrace"))
    doc = replay_document(str(report))
    firing = [f for f in doc["findings"] if f["state"] == "firing" and f["recommendations"]]
    assert firing, doc["reason"]
    assert {r["knob"]: r["to"] for r in firing[0]["recommendations"]} == {"kv_cache_dtype": "fp8"}


def test_the_budget_report_on_the_avx512_cpu_recommends_seats_that_meet_the_goals() -> None:
    """2 seats, 24 clients, on the AVX-512 CPU (bfloat16): the report recommends 7 seats, which
    measured 427 tok/s (136 % of 4 seats, the best swept that meets the goals) with an ITL mean
    within the goals' bound (1.5x the start's two runs' mean, 10.8 ms, forgiven 3 %); 8 seats
    (17.2 ms) went past it. The twin's raises there run 10-21 points high (this CPU's step
    grows with every seat from 2 on, where the preset's is flat to five tokens)."""
    folder = "budget-bound-avx512"
    report = next((SWEEPS / folder).glob("*-report.vtrace"))
    doc = replay_document(str(report))
    firing = [f for f in doc["findings"] if f["state"] == "firing" and f["recommendations"]]
    assert firing, doc["reason"]
    assert {r["knob"]: r["to"] for r in firing[0]["recommendations"]} == {"max_num_seqs": 7}
    itl = _measured(folder, 7)["itl_mean"]
    assert itl is not None and itl <= 1.5 * 1.03 * 0.0108
