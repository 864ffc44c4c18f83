"""The seeds' two max_num_seqs experiments keep their direction and rough size on the twin.

Experiment 1 (64 -> 256): the queue collapses, the GPU gets busier and QPS rises 1.3-2.5x.
Experiment 2 (256 -> 512, max_num_batched_tokens unchanged): no preemption at 256, some at 512,
and P99 latency worse at 512 than at 256. bench/seed_experiments.py prints the figures.
"""

from __future__ import annotations

from functools import cache

from tests.simtools import seed_experiments as experiments


@cache
def results() -> experiments.Results:
    return experiments.run_all(seed=0)


def test_experiment_1_raising_max_num_seqs_to_256() -> None:
    r = results()
    a, b = r.at64.window, r.at256.window
    assert a.waiting_mean > 200 and b.waiting_mean < 0.1 * a.waiting_mean
    assert b.gpu_util_mean > a.gpu_util_mean + 0.05
    assert 1.3 <= r.qps_ratio <= 2.5
    assert b.queue_mean_s < 0.1 * a.queue_mean_s


def test_experiment_2_raising_max_num_seqs_to_512() -> None:
    r = results()
    assert r.at256.preemptions == 0
    assert r.at512.preemptions > 0
    assert r.at512.window.kv_max >= 0.99
    assert r.at512.e2e_p99_s > r.at256.e2e_p99_s
    assert r.at512.window.running_max > 256


def test_report_prints_both_columns() -> None:
    text = experiments.report(results())
    assert "200+ -> ~0" in text and "+30%" in text and "x1.7" in text
    assert f"x{results().qps_ratio:.2f}" in text
