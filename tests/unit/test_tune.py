"""`vtop tune`'s parts without a process: the flags edit, and the loop over the simulator.

The loop runs on real reports of the twin (`simulated_document` of a scenario started with the
flags the loop chose, as `vtop sim --max-num-seqs …` starts it), behind a `Server` that records
what it was asked to do. A server that comes back worse than promised is rolled back; Ctrl-C
restores the best configuration measured; a plan not confirmed restarts nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from tests.sim.helpers import with_knobs
from vtop.knobs import KnobValue
from vtop.report.document import Document
from vtop.report.run import simulated_document
from vtop.sim.scenarios import SCENARIOS
from vtop.sim.twin import Twin
from vtop.sources.sim import SimSource
from vtop.tune.flags import edit_file_text, file_flags, with_changes
from vtop.tune.loop import Figures as F
from vtop.tune.loop import Plan, Trial, Tuner, better, between, bound_fraction, overshot, plan
from vtop.whatif.goals import Goals

# -- the flags edit --------------------------------------------------------------------------


def test_a_changed_flag_replaces_every_spelling_of_it_once() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--max-num-seqs",
        "16",
        "--port",
        "8000",
        "--max_num_seqs=8",
        "--enable-prefix-caching",
    ]
    out = with_changes(argv, {"max_num_seqs": 64, "enable_prefix_caching": False})
    assert out == [
        "vllm",
        "serve",
        "m",
        "--port",
        "8000",
        "--max-num-seqs",
        "64",
        "--no-enable-prefix-caching",
    ]
    assert with_changes(out, {"enable_prefix_caching": True})[-1] == "--enable-prefix-caching"


def test_a_flags_file_keeps_its_comments_and_other_lines() -> None:
    text = "# tuned by hand\n--max-num-seqs 16 --port 8000\n--kv-cache-dtype auto\n"
    out = edit_file_text(text, {"max_num_seqs": 12, "kv_cache_dtype": "fp8"})
    assert out == "# tuned by hand\n--port 8000\n--max-num-seqs 12\n--kv-cache-dtype fp8\n"
    assert file_flags(out) == ["--port", "8000", "--max-num-seqs", "12", "--kv-cache-dtype", "fp8"]


# -- the loop, on the simulator --------------------------------------------------------------


class SimServer:
    """The budget-bound scenario, restarted with the flags asked for (`sabotage`: what it
    really starts with instead, as a server whose restart went wrong would)."""

    def __init__(self, scenario: str, sabotage: Mapping[str, KnobValue] | None = None) -> None:
        self.scenario = SCENARIOS[scenario]
        self.sabotage = dict(sabotage or {})
        self.asked: list[dict[str, KnobValue]] = []
        self.goals: list[Goals] = []
        self.running: dict[str, KnobValue] = {}

    def restart(self, changes: Mapping[str, KnobValue]) -> None:
        self.asked.append(dict(changes))
        self.running = {**changes, **self.sabotage} if changes else {}

    def describe(self) -> str:
        return f"{self.scenario.name} {self.running}"

    def observe(self, goals: Goals) -> Document:
        self.goals.append(goals)
        args = with_knobs(self.scenario.args, self.running)
        twin = Twin(dataclasses.replace(self.scenario, args=args), seed=len(self.asked))
        twin.warm_up()
        source = SimSource([twin], interval_s=1.0)
        return simulated_document(source, name=self.scenario.name, duration_s=30.0, goals=goals)


def test_the_loop_applies_the_twins_choice_and_stops_when_nothing_is_left() -> None:
    server = SimServer("budget-too-small")
    outcome = Tuner(server, server.observe, Goals(), max_restarts=3).run()
    start = outcome.trials[0]
    assert start.verdict.endswith("budget-too-small") and start.changes == {}
    assert server.asked, "no restart asked for"
    seats = server.asked[0]["max_num_seqs"]
    assert isinstance(seats, int) and seats > 16, server.asked
    # trial 0 under the user's goals; every later one with the ITL bound fixed at the start's
    assert server.goals[0] == Goals()
    start_itl = start.measured.itl_mean_s
    assert start_itl is not None
    assert all(g.max_itl_s == pytest.approx(1.5 * start_itl) for g in server.goals[1:])
    assert "the start's" in server.goals[-1].describe()
    best = outcome.best
    assert best is not None and best.number >= 1
    tokens = best.measured.tokens_per_s
    assert tokens is not None and tokens > 1.3 * (start.measured.tokens_per_s or 0)
    assert best.predicted is not None and best.error() is not None
    assert outcome.restarts == len(server.asked) <= 3
    assert outcome.stopped, outcome


def test_no_restart_when_the_twin_expects_no_change_to_meet_the_goals() -> None:
    # an ITL bound of 1 ms: today's misses it, and every raise the budget finding may make too
    server = SimServer("budget-too-small")
    outcome = Tuner(server, server.observe, Goals(max_itl_s=0.001), max_restarts=3).run()
    assert server.asked == [] and len(outcome.trials) == 1, server.asked
    assert outcome.stopped.startswith("the twin expects no change to meet the goals: none of")
    assert "ITL mean" in outcome.stopped, outcome.stopped


def test_a_search_cut_short_rules_nothing_out() -> None:
    # the same bound, but the report's time budget cut the search: the twin ran one or two
    # configurations, not the scan, so it has not found that none meets the goals
    doc = SimServer("budget-too-small").observe(Goals(max_itl_s=0.001))
    whole = plan(doc)
    assert whole is not None and whole.short.startswith("none of"), whole
    for f in doc["findings"]:
        if (p := f.get("prediction")) is not None and (search := p.get("search")) is not None:
            search["cut_short"] = True
    cut = plan(doc)
    assert cut is not None and cut.short == "" and cut.changes == whole.changes


def test_a_restart_that_comes_back_worse_is_rolled_back() -> None:
    # The seats asked for, but a KV pool of 200 blocks beside them (a GPU shared with another
    # process): preemption, and the goals missed.
    server = SimServer(
        "budget-too-small", sabotage={"num_gpu_blocks_override": 200, "max_model_len": 2048}
    )
    outcome = Tuner(server, server.observe, Goals(), max_restarts=3).run()
    assert len(outcome.trials) == 2 and "rolled back" in outcome.trials[1].note
    assert server.asked[-1] == {} and server.running == {}, server.asked  # as started again
    assert outcome.best is outcome.trials[0]
    assert "measured worse" in outcome.stopped


def test_a_restart_that_did_not_apply_the_flags_stops_and_restores() -> None:
    server = SimServer("budget-too-small", sabotage={"max_num_seqs": 16})  # the old value
    outcome = Tuner(server, server.observe, Goals(), max_restarts=3).run()
    assert (
        len(outcome.trials) == 2 and "not applied: max_num_seqs 16, not " in outcome.trials[1].note
    )
    assert "the restart did not apply the flags" in outcome.stopped
    assert server.asked[-1] == {} and outcome.best is outcome.trials[0]


class KneeServer(SimServer):
    """The budget-bound scenario on a machine whose step time is flat up to `knee` seats and
    twice as long past it, as the real CPU server's is (bench/tune_real: flat to 8 seats, then
    ~1.7x): the twin, fitted below the knee, cannot see it coming."""

    def __init__(self, knee: int) -> None:
        super().__init__("budget-too-small")
        self.knee = knee
        self.itl_at_start: float | None = None

    def observe(self, goals: Goals) -> Document:
        doc = super().observe(goals)
        itl = doc["latency"]["itl"]
        if self.itl_at_start is None:
            self.itl_at_start = itl["mean"]
        seats = self.running.get("max_num_seqs", self.scenario.args.max_num_seqs)
        assert isinstance(seats, int) and self.itl_at_start is not None
        itl["mean"] = self.itl_at_start * (2.0 if seats > self.knee else 1.0)
        return doc


def test_a_step_past_a_latency_bound_is_halved_back_toward_the_best() -> None:
    server = KneeServer(knee=24)
    outcome = Tuner(server, server.observe, Goals(), max_restarts=4).run()
    first = outcome.trials[1]
    seats = [t.changes.get("max_num_seqs") for t in outcome.trials]
    assert isinstance(seats[1], int) and seats[1] > 24, seats  # the twin's step: past the knee
    assert "past a latency bound" in first.note and first.misses
    assert all(t.note.startswith("between trials") for t in outcome.trials[2:]), outcome.trials
    # every halving lies strictly between the best so far and the nearest miss above it
    assert all(16 < s < seats[1] for s in seats[2:] if isinstance(s, int)), seats
    best = outcome.best
    assert best is not None and best.number >= 2 and best.meets, outcome.trials
    best_seats = best.changes["max_num_seqs"]
    assert isinstance(best_seats, int) and 16 < best_seats <= 24, seats
    assert outcome.restarts == len(server.asked) <= 5
    assert server.running == best.changes, (server.running, best.changes)  # left at the best


class SlopeServer(KneeServer):
    """ITL flat up to `knee` seats, then rising by the start's ITL every `per` seats: the 1.5x
    bound lies at knee + per / 2 seats, and a straight line through one trial below the knee
    and one past the bound finds it (or a value below it)."""

    def __init__(self, knee: int, per: int) -> None:
        super().__init__(knee)
        self.per = per

    def observe(self, goals: Goals) -> Document:
        doc = SimServer.observe(self, goals)
        itl = doc["latency"]["itl"]
        if self.itl_at_start is None:
            self.itl_at_start = itl["mean"]
        seats = self.running.get("max_num_seqs", self.scenario.args.max_num_seqs)
        assert isinstance(seats, int) and self.itl_at_start is not None
        itl["mean"] = self.itl_at_start * (1 + max(0, seats - self.knee) / self.per)
        return doc


def test_a_step_past_a_latency_bound_closes_in_on_it_in_one_restart() -> None:
    server = SlopeServer(knee=16, per=8)  # the bound: 20 seats
    outcome = Tuner(server, server.observe, Goals(), max_restarts=4).run()
    seats = [t.changes.get("max_num_seqs") for t in outcome.trials]
    assert isinstance(seats[1], int) and seats[1] > 20, seats  # the twin's step: past the bound
    assert "past a latency bound" in outcome.trials[1].note
    assert seats[2:] == [20], seats  # where the line through trials 0 and 1 meets the bound
    best = outcome.best
    assert best is not None and best.number == 2 and best.meets, outcome.trials
    assert outcome.restarts == 2 and "no value between" in outcome.stopped, outcome.stopped


def test_between_moves_numbers_from_the_trial_that_met_the_goals() -> None:
    start: dict[str, KnobValue] = {"max_num_seqs": 16, "kv_cache_dtype": "auto"}
    assert between({}, {"max_num_seqs": 36}, start) == {"max_num_seqs": 26}
    assert between({"max_num_seqs": 6}, {"max_num_seqs": 13}, start) == {"max_num_seqs": 9}
    assert between({"gpu_memory_utilization": 0.9}, {"gpu_memory_utilization": 0.95}, {}) == {
        "gpu_memory_utilization": 0.93
    }
    assert between({"max_num_seqs": 9}, {"max_num_seqs": 6}, start) == {"max_num_seqs": 8}
    assert between({"max_num_seqs": 8}, {"max_num_seqs": 9}, start) is None  # nothing between
    both: dict[str, KnobValue] = {"max_num_seqs": 12, "kv_cache_dtype": "fp8"}
    assert between({}, both, start) is None  # a dtype has no value between
    assert between({"max_num_seqs": 6}, {"max_num_seqs": 13}, {}) == {"max_num_seqs": 9}
    assert between({}, {"max_num_seqs": 13}, {}) is None  # the start's value not known
    # a fraction of the way, whole numbers rounded toward the good end
    two: dict[str, KnobValue] = {"max_num_seqs": 2}
    assert between({}, {"max_num_seqs": 9}, two, 0.88) == {"max_num_seqs": 8}
    assert between({}, {"max_num_seqs": 9}, two, 0.1) is None
    assert between({"max_num_seqs": 16}, {"max_num_seqs": 4}, {}, 0.25) == {"max_num_seqs": 13}


def test_the_bound_lies_where_the_line_through_two_trials_meets_it() -> None:
    goals = Goals(max_itl_s=0.0312)
    # 2 seats at 20.8 ms, 9 at 32.6 ms (bench/tune_real, 2026-12-06): 88 % of the way, 8 seats
    assert bound_fraction(goals, F(95, 0, 1.0, 0.0208), F(272, 0, 1.0, 0.0326)) == pytest.approx(
        0.881, abs=0.001
    )
    assert bound_fraction(goals, F(95, 0, 1.0, 0.0312), F(272, 0, 1.0, 0.0326)) == 0.0  # no room
    assert bound_fraction(goals, F(95, 0, 1.0, None), F(272, 0, 1.0, 0.0326)) == 0.5  # unknown
    # two bounds missed: the nearer decides
    both = Goals(max_itl_s=0.03, max_ttft_s=2.0)
    assert bound_fraction(both, F(95, 0, 1.0, 0.02), F(272, 0, 5.0, 0.04)) == pytest.approx(0.25)


def test_an_overshoot_is_more_tokens_with_only_a_latency_bound_missed() -> None:
    goals = Goals(max_itl_s=0.03)
    start = F(100, 0.0, 1.0, 0.02)
    best = _trial(300)
    past = Trial(2, {"max_num_seqs": 13}, None, F(380, 0.0, 1.0, 0.034), "OK", ("ITL",))
    assert overshot(goals, past, best, start)
    preempting = Trial(2, {"max_num_seqs": 13}, None, F(380, 1.0, 1.0, 0.034), "OK", ("x",))
    assert not overshot(goals, preempting, best, start)
    fewer = Trial(2, {"max_num_seqs": 13}, None, F(305, 0.0, 1.0, 0.034), "OK", ("ITL",))
    assert not overshot(goals, fewer, best, start)  # within the noise of the best


def test_ctrl_c_restores_the_best_configuration_measured() -> None:
    server = SimServer("budget-too-small", sabotage={"max_num_seqs": 4})
    calls = 0

    def observe(goals: Goals) -> Document:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return server.observe(goals)

    tuner = Tuner(server, observe, Goals(), max_restarts=3)
    with pytest.raises(KeyboardInterrupt):
        tuner.run()
    assert tuner.outcome.stopped == "interrupted"
    assert len(server.asked) == 2 and server.asked[-1] == {}


def test_nothing_restarts_without_a_yes() -> None:
    server = SimServer("budget-too-small")
    asked: list[Plan] = []

    def refuse(plan: Plan) -> bool:
        asked.append(plan)
        return False

    outcome = Tuner(server, server.observe, Goals(), confirm=refuse).run()
    assert asked, "no restart proposed"
    seats = asked[0].changes.get("max_num_seqs")
    assert isinstance(seats, int) and seats > 16, asked[0]
    assert server.asked == [] and outcome.stopped == "the restart was not confirmed"


def test_a_healthy_server_is_left_alone() -> None:
    server = SimServer("healthy")
    outcome = Tuner(server, server.observe, Goals()).run()
    assert server.asked == [] and len(outcome.trials) == 1
    assert outcome.stopped == "no finding left that a knob the twin sets would fix"


class StillPendingServer(SimServer):
    """Past its first restart, the window ends with only the start's finding, pending (a rule
    that has not yet held for its `for`), as a short watch of a real server can."""

    def observe(self, goals: Goals) -> Document:
        doc = super().observe(goals)
        if not self.asked:
            self.start_findings = [dict(f) for f in doc["findings"]]
            return doc
        pending = [{**f, "state": "pending", "counts": False} for f in self.start_findings]
        doc["findings"] = pending  # type: ignore[typeddict-item]
        return doc


def test_a_stop_for_want_of_a_verdict_keeps_a_trial_that_met_the_goals() -> None:
    server = StillPendingServer("budget-too-small")
    outcome = Tuner(server, server.observe, Goals(), max_restarts=3).run()
    assert len(server.asked) == 1 and outcome.best is outcome.trials[1], outcome
    assert outcome.best.meets, outcome.best
    assert outcome.stopped.startswith("trial 1 meets the goals and is kept; no verdict"), outcome
    assert "(budget-too-small, " in outcome.stopped and "still pending" in outcome.stopped


def _trial(tokens: float, preempt: float = 0.0, itl: float = 0.02) -> Trial:
    m = F(tokens, preempt, 1.0, itl)
    misses = ("preempts",) if preempt > 0.05 else ()
    return Trial(1, {"max_num_seqs": 8}, None, m, "OK", misses)


def test_better_means_the_goals_first_then_tokens_beyond_the_noise() -> None:
    assert better(_trial(100), _trial(100, preempt=1.0))  # meets where the best did not
    assert not better(_trial(200, preempt=1.0), _trial(100))  # more tokens, goals missed
    assert better(_trial(98), _trial(100))  # within the noise: as good
    assert not better(_trial(90), _trial(100))
