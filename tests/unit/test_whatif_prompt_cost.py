"""What a prompt token costs, read from one configuration of the real server, and the law it
steepens: the evidence that lets a twin fitted at 2 seats price a 9-seat step on a CPU whose
compute is slower than its preset's shape says (tests/fixtures/real-regimes, `-slowhost`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from vtop.sim.calibration import StepPoint
from vtop.sim.hardware import CPU_ENGINE, CPU_ENGINE_NO_AVX512
from vtop.whatif.fit import fit, prior_step_s
from vtop.whatif.predict import observe, prepare_from
from vtop.whatif.watched import read_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "real-regimes"
WHOLE_S = 600.0


def prompt_cost_ms(trace: str) -> float | None:
    seen = observe(read_trace(str(TRACES / trace)), WHOLE_S)
    return None if seen.prompt_token_s is None else seen.prompt_token_s * 1e3


@pytest.mark.parametrize(
    ("trace", "low_ms", "high_ms"),
    [
        ("budget2-slowhost.vtrace", 3.2, 4.2),  # float32, no AVX-512
        ("budget9-slowhost.vtrace", 3.2, 4.2),  # the same server at 9 seats: the same cost
        ("budget2-slowhost-later.vtrace", 2.9, 3.9),  # an hour later
        ("budget8-slowhost.vtrace", 2.9, 3.9),
        ("budget2-fp32.vtrace", 1.2, 1.8),  # float32 with AVX-512
        ("budget2.vtrace", 0.4, 0.8),  # bfloat16 with AVX-512
    ],
)
def test_a_prompt_tokens_cost_is_read_from_the_real_servers_prefill_times(
    trace: str, low_ms: float, high_ms: float
) -> None:
    cost = prompt_cost_ms(trace)
    assert cost is not None and low_ms <= cost <= high_ms, (trace, cost)


@pytest.mark.parametrize(
    "trace",
    [
        "kv.vtrace",  # preempts: a recomputed prompt's prefill time spans its wait
        "full-fp32.vtrace",  # prefill times of 0.8 s beside 66 ms steps: not one step each
        "waves.vtrace",  # sixteen prompts prefilled together
        "long.vtrace",  # prompts longer than the step budget, chunked over several steps
    ],
)
def test_a_window_whose_prefill_times_are_not_one_step_each_reads_no_cost(trace: str) -> None:
    assert prompt_cost_ms(trace) is None


AT_TWO = StepPoint("2 seats", 2.8, 1.9, 250.0, 0.040)
"""The slow CPU's 2-seat step as the window shows it (tests/fixtures: budget2-slowhost)."""
NINE_SEATS = StepPoint("9 seats", 9.0, 9.0, 800.0, 0.0)


def test_a_prompt_token_dearer_than_the_scaled_law_steepens_it_and_keeps_the_step_seen() -> None:
    plain = fit([AT_TWO], CPU_ENGINE, "cpu", prefill_chunk=40.0)
    steep = fit([AT_TWO], CPU_ENGINE, "cpu", prefill_chunk=40.0, prompt_token_s=0.0036)
    law, before = steep.preset.fitted, plain.preset.fitted
    assert law is not None and before is not None
    assert before.prompt_token_s < 0.0036
    assert law.per_token_s == law.prompt_token_s == pytest.approx(0.0036, rel=0.02)
    # a seat: the prompt token's compute plus the preset's bookkeeping at the scaled level
    bookkeeping = before.per_token_s + before.per_seq_s - before.prompt_token_s
    assert law.per_seq_s == pytest.approx(bookkeeping, rel=0.05)
    assert prior_step_s(steep.preset, AT_TWO, 40.0) == pytest.approx(AT_TWO.step_s, rel=0.02)
    assert prior_step_s(steep.preset, NINE_SEATS) > 1.2 * prior_step_s(plain.preset, NINE_SEATS)
    assert "3.6 ms a token as a prompt token costs here" in steep.describe()


def test_a_law_whose_decode_seat_costs_less_than_a_prompt_token_keeps_it_so() -> None:
    """The CPU without AVX-512 steps a decode seat for ~2.3 ms and prefills a prompt token for
    ~3.1: a dearer prompt token seen in the window steepens prompt tokens, and a seat keeps its
    price below them (negative bookkeeping), where charging it the prompt token's cost priced a
    24-seat step 48 points too dear in the replayed budget-bound sweep."""
    law = CPU_ENGINE_NO_AVX512.fitted
    assert law is not None and law.per_token_s + law.per_seq_s < law.prompt_token_s
    steep = fit([AT_TWO], CPU_ENGINE_NO_AVX512, "cpu", prefill_chunk=40.0, prompt_token_s=0.006)
    got = steep.preset.fitted
    assert got is not None and got.per_token_s == pytest.approx(0.006, rel=0.05)
    assert got.per_seq_s < 0 < got.per_token_s + got.per_seq_s < got.per_token_s
    assert prior_step_s(steep.preset, AT_TWO, 40.0) == pytest.approx(AT_TWO.step_s, rel=0.02)


def test_a_prompt_token_cheaper_than_the_law_changes_nothing() -> None:
    plain = fit([AT_TWO], CPU_ENGINE, "cpu", prefill_chunk=40.0)
    cheap = fit([AT_TWO], CPU_ENGINE, "cpu", prefill_chunk=40.0, prompt_token_s=0.0005)
    assert cheap == plain
    assert cheap.prompt_token_s is None


def test_a_law_whose_machine_never_had_its_prompt_token_measured_is_not_steepened() -> None:
    assert CPU_ENGINE.fitted is not None
    unmeasured = replace(CPU_ENGINE, fitted=replace(CPU_ENGINE.fitted, prompt_token_s=0.0))
    plain = fit([AT_TWO], unmeasured, "cpu", prefill_chunk=40.0)
    assert fit([AT_TWO], unmeasured, "cpu", prefill_chunk=40.0, prompt_token_s=0.0036) == plain


def gen_change(trace: str, seats: int, *, with_cost: bool = True) -> float:
    seen = observe(read_trace(str(TRACES / trace)), WHOLE_S)
    if not with_cost:
        seen = replace(seen, prompt_token_s=None)
    band = prepare_from(seen).predict({"max_num_seqs": seats}).figures["generation_tokens_per_s"]
    return band.after / band.now - 1


def measured_change(before: str, after: str) -> float:
    rates = [
        observe(read_trace(str(TRACES / t)), WHOLE_S).observed["generation_tokens_per_s"]
        for t in (before, after)
    ]
    assert rates[0] and rates[1]
    return rates[1] / rates[0] - 1


PAIRS = [
    # recorded minutes apart on one server: 2 seats 49.7 tok/s, 9 seats 119 (+140 %)
    ("budget2-slowhost.vtrace", "budget9-slowhost.vtrace", 9),
    # an hour later: 2 seats 46.6, 8 seats 97.6 (+109 %); the 8-seat step cost 1.6x a prompt
    # token a seat more than the 2-seat one, where the pair above cost 1.0x
    ("budget2-slowhost-later.vtrace", "budget8-slowhost.vtrace", 8),
]


@pytest.mark.parametrize(("before", "after", "seats"), PAIRS)
def test_a_prompt_tokens_cost_brings_the_raise_on_the_slow_cpu_closer_to_the_measured(
    before: str, after: str, seats: int
) -> None:
    """The twin fitted at 2 seats without the cost over-promised the raise by 80-100 points;
    with it, it is 17 under and 29 over (this machine's step grew 3.6 ms a seat in one hour
    and 5.1 in the next: no one window foresees that)."""
    measured = measured_change(before, after)
    predicted = gen_change(before, seats)
    blind = gen_change(before, seats, with_cost=False)
    assert blind - measured > 0.6, (blind, measured)  # what the evidence corrects
    assert abs(predicted - measured) < 0.35, (predicted, measured)
    assert abs(predicted - measured) < abs(blind - measured) - 0.3, (predicted, blind, measured)


@pytest.mark.parametrize(
    ("before", "after", "within"),
    [
        # Both under by 10-15 points: these CPUs have no AVX-512 and the traces predate vtop
        # reading the host's flags, so the AVX-512 law's floor, kept where the plain scaling
        # put it from a step seen above it, prices the 2-seat step too dear (kept, because on
        # the machine the law describes it put the well-tuned sweep's 4 seats within 1 point,
        # not 13: test_sweep_replay). The law of this CPU (the flags read) has no floor.
        ("budget9-slowhost.vtrace", "budget2-slowhost.vtrace", 0.12),
        ("budget8-slowhost.vtrace", "budget2-slowhost-later.vtrace", 0.16),
    ],
)
def test_the_twin_fitted_at_8_or_9_seats_predicts_the_cut_to_2(
    before: str, after: str, within: float
) -> None:
    measured = measured_change(before, after)
    predicted = gen_change(before, 2)
    assert abs(predicted - measured) < within, (predicted, measured)


@pytest.mark.parametrize("trace", ["budget2.vtrace", "budget4.vtrace", "full.vtrace"])
def test_the_presets_prompt_token_holds_on_its_own_machine(trace: str) -> None:
    """CPU_ENGINE's `prompt_token_s` (0.71 ms) is what a prompt token cost on the machine its
    law was fitted on (AVX-512, bfloat16), at the law's level: there the evidence and the law
    agree, and the fit barely moves."""
    seen = observe(read_trace(str(TRACES / trace)), WHOLE_S)
    assert seen.prompt_token_s is not None and CPU_ENGINE.fitted is not None
    level = fit(seen.points, CPU_ENGINE, "cpu", prefill_chunk=seen.workload.prompt.mean).scale
    at_level = seen.prompt_token_s / level
    assert at_level == pytest.approx(CPU_ENGINE.fitted.prompt_token_s, rel=0.15), at_level
