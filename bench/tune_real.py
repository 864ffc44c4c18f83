"""Does vtop's advice find the best setting on the real vLLM CPU server, and does `vtop tune`
get there? A sweep measured by restarts, against the report's choice and tune's trials.

Why: a recommendation is worth what it buys when the server is restarted with it. Per regime:

1. The sweep: the server restarted at each configuration of `Regime.sweep` (at least six
   max_num_seqs values, and FP8 KV ones where the KV pool is the wall) under the same load (vtop's
   own closed-loop clients, `vtop.tune.load`, the regime's shape and seed), `WARMUP_S` of load,
   then `WATCH_S` read from its /metrics through the figures every report uses. Each row
   judged on the default goals (no sustained preemption, the mean ITL at most 1.5x the starting
   configuration's), as `vtop tune` judges its trials (`Goals.missed`).
2. The 45 s report at the bad setting, as a user runs it: the server at `Regime.start` under the
   same load, then `vtop --url URL --report --duration 45 --format json` after `WARMUP_S` of
   load, and beside it `vtop whatif` over the same 45 s predicting every swept configuration
   (the predicted change against the measured one: target within 10 points). The change is
   read against the mean of two runs of the start, at the sweep's beginning and its end: one
   run carries the machine's drift and spread (the same configuration measured 54 to 62 tok/s
   within a day), and every row's change carries it. The configuration
   the report recommends is measured too when the sweep has not (target: at least 95 % of the
   best swept tokens/s that meets the goals). Where the share misses, the report's choice and
   the sweep's best are each measured once more and the share is read on the means: the best
   of a sweep is the highest of noisy runs (two runs of one configuration on 2 cores differ by
   up to 25 % within a day), and one run each cannot tell 92 % from 100 %.
3. `vtop tune --yes --load N --load-shape S -- <the server at the bad setting>`: its trials
   (target: the best within 2 restarts, meeting the goals when measured).

The load runs in this process for the sweep and the report, and in `vtop tune --load` for the
tune (the same shape and seed: `--load-shape` is what `Regime.shape` says). Only one vLLM server
runs at a time (`bench/_realserver.py`). About 20 minutes a regime on 2 cores.

    .venv/bin/python -m bench.tune_real [--regime budget-bound] [--json PATH] [--dtype float32]
    .venv/bin/python -m bench.tune_real --regime budget-bound --tune-only   # tune's trials alone
    .venv/bin/python -m bench.tune_real --rejudge PATH     # a --json run's tables, judged anew
    .venv/bin/python -m bench.tune_real --record-dir DIR   # each measured window as a .vtrace
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._realserver import measured_alone, stop_on_sigterm, wait_alone
from tools.vllm_cpu.server import (
    REPO_ROOT,
    VENV_PYTHON,
    VllmServer,
    VllmServerError,
    free_port,
    make_server,
    server_env,
)
from vtop import fmt, knobs
from vtop.cli.sources import SourceSpec
from vtop.cli.whatif import watch_live
from vtop.knobs import KnobValue
from vtop.sources import cpu
from vtop.sources.vllm import ScrapeOptions
from vtop.tune.load import ClosedLoop, parse_shape
from vtop.tune.loop import NOISE
from vtop.whatif.check import figures
from vtop.whatif.goals import Goals

WARMUP_S = 15.0
WATCH_S = 60.0
REPORT_S = 45.0
INTERVAL_S = 1.0
CHANGE_TARGET = 0.10
"""The predicted change (after/now - 1) within this many points of the measured one."""
CHOICE_TARGET = 0.95
"""The report's choice measured at no less than this share of the best swept tokens/s."""
RESTARTS_TARGET = 2
KV_BYTES_PER_TOKEN = {"bfloat16": 32 * 1024, "float32": 64 * 1024}
"""The engine model's KV cache per token (8 layers x 8 heads x 128 x K and V)."""

Config = dict[str, KnobValue]


@dataclass(frozen=True)
class Regime:
    name: str
    start: Config
    """The bad setting the report and tune start from."""
    pool: str
    """`blocks:N` (a block count override) or `tokens:N` (memory for N tokens, which FP8 KV
    doubles as it would on a GPU)."""
    clients: int
    shape: str
    """PROMPT:OUTPUT mean tokens, as `vtop tune --load-shape` takes it."""
    sweep: tuple[Config, ...]
    seed: int = 0


def _seats(*values: int, **also: KnobValue) -> tuple[Config, ...]:
    return tuple({"max_num_seqs": v, **also} for v in values)


REGIMES = {
    r.name: r
    for r in (
        Regime(
            "budget-bound",
            {"max_num_seqs": 2},
            "blocks:160",
            24,
            "40:96",
            _seats(2, 4, 8, 12, 16, 24, 32),
        ),
        Regime(
            "kv-exhausted",
            {"max_num_seqs": 16},
            "tokens:3072",
            40,
            "72:250",
            _seats(4, 6, 8, 10, 12, 16) + _seats(12, 16, 24, kv_cache_dtype="fp8"),
        ),
        Regime(
            "well-tuned",
            {"max_num_seqs": 16},
            "blocks:160",
            16,
            "40:96",
            _seats(4, 8, 12, 16, 24, 32),
        ),
    )
}


def _pool(regime: Regime, dtype: str) -> tuple[int | None, list[str]]:
    """The block count override (None: sized from memory) and the flags that size the pool."""
    kind, _, amount = regime.pool.partition(":")
    if kind == "blocks":
        return int(amount), ["--dtype", dtype]
    size = int(amount) * KV_BYTES_PER_TOKEN[dtype]
    return None, ["--dtype", dtype, "--kv-cache-memory-bytes", str(size)]


def configured(regime: Regime, config: Config, dtype: str, port: int | None = None) -> VllmServer:
    """The server of one configuration, as a user would start it (not started yet)."""
    flags = {**regime.start, **config}
    seats = flags.pop("max_num_seqs", 16)
    assert isinstance(seats, int)
    blocks, extra = _pool(regime, dtype)
    server = make_server(
        "engine",
        port=port,
        max_num_seqs=seats,
        num_gpu_blocks=blocks,
        extra_args=extra + knobs.flags(flags, sep=" ").split(),
    )
    server.niceness = 0  # as a user starts it, and as `vtop tune` launches it
    return server


@dataclass
class Measured:
    config: Config
    figures: dict[str, float | None]
    misses: tuple[str, ...] = ()
    predicted_change: float | None = None

    @property
    def tokens(self) -> float | None:
        return self.figures.get("generation_tokens_per_s")


@dataclass
class Outcome:
    regime: Regime
    sweep: list[Measured] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    whatif: list[dict[str, Any]] = field(default_factory=list)
    choice: Config = field(default_factory=dict)
    choice_measured: Measured | None = None
    again: list[Measured] = field(default_factory=list)
    """Second runs of the report's choice and the sweep's best (`rematch`)."""
    tune: dict[str, Any] = field(default_factory=dict)

    def runs(self) -> list[Measured]:
        """The sweep's runs and the report's choice's, where the sweep had not run it."""
        return self.sweep + ([self.choice_measured] if self.choice_measured else [])


class Started:
    """One configuration's server (the engine model) with the load on it."""

    def __init__(self, regime: Regime, config: Config, dtype: str) -> None:
        wait_alone()
        self.server = configured(regime, config, dtype)
        began = time.monotonic()
        self.server.start()
        print(f"    (vLLM up in {time.monotonic() - began:.0f} s: {_label(config)})", flush=True)
        shape = parse_shape(regime.shape)
        self.load = ClosedLoop(
            self.server.url, regime.clients, shape, ScrapeOptions(), seed=regime.seed
        )
        self.load.start()

    def close(self) -> None:
        self.load.stop()
        self.server.stop()


def _label(config: Mapping[str, KnobValue]) -> str:
    return knobs.flags(dict(config), sep=" ") or "(as started)"


def measure(regime: Regime, config: Config, dtype: str, record: Path | None = None) -> Measured:
    """One configuration measured; `record`: a folder its watched window is recorded into
    (`<regime>-<flags>.vtrace`, by a `vtop --record` polling beside the measurement), so a
    twin fitted to one configuration can be checked against the others offline."""
    started = Started(regime, config, dtype)
    try:

        def watch() -> dict[str, float | None]:
            time.sleep(WARMUP_S)
            recorder = None
            if record is not None:
                trace = record / f"{regime.name}-{_slug(config)}.vtrace"
                recorder = _recording(started.server.url, trace, WATCH_S)
            try:
                watched = watch_live(
                    SourceSpec(urls=(started.server.url,), interval=INTERVAL_S), WATCH_S
                )
                if recorder is not None:
                    try:
                        recorder.wait(timeout=WATCH_S)
                    except subprocess.TimeoutExpired:  # the recording is a by-product
                        print(f"    (the recorder of {trace.name} hung; killed)", flush=True)
            finally:  # a failed measurement does not leave its recorder polling the next server
                if recorder is not None and recorder.poll() is None:
                    recorder.kill()
            return figures(watched.store, WATCH_S)

        got = measured_alone(started.server, watch)
    finally:
        started.close()
    print(f"    measured {_label(config)}: {_line(got)}", flush=True)
    return Measured(config, got)


def _slug(config: Mapping[str, KnobValue]) -> str:
    """`seqs12-fp8`: a configuration as a file name."""
    words = {"max_num_seqs": "seqs", "max_num_batched_tokens": "budget"}
    parts = [
        f"{words[k]}{v}" if k in words else str(v)
        for k, v in sorted(config.items())
        if k != "kv_cache_dtype" or v != "auto"
    ]
    return "-".join(parts) or "start"


def _recording(url: str, trace: Path, seconds: float) -> subprocess.Popen[bytes]:
    """`vtop --record` of `url` for `seconds`, started now (its own process)."""
    command = ["--url", url, "--record", str(trace), "--headless", "--duration", f"{seconds:g}s"]
    command += ["--interval", f"{INTERVAL_S:g}"]
    return subprocess.Popen(
        [sys.executable, "-m", "vtop", *command],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _line(f: Mapping[str, float | None]) -> str:
    def s(x: float | None) -> str:
        return fmt.DASH if x is None else fmt.seconds(x)

    return (
        f"{fmt.num(f.get('generation_tokens_per_s'))} tok/s, "
        f"{fmt.num(f.get('preemptions_per_s'))} preempt/s, ITL mean {s(f.get('itl_mean'))}, "
        f"TTFT p90 {s(f.get('ttft_p90'))}"
    )


def vtop(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def report_and_predictions(
    regime: Regime, dtype: str, outcome: Outcome, record: Path | None = None
) -> None:
    """The 45 s report at the bad setting and, over the same seconds, the twin's predictions
    for every swept configuration (one `vtop whatif` per set of fixed knobs); `record`: a
    folder the report's window is recorded into (`<regime>-report.vtrace`)."""
    started = Started(regime, {}, dtype)
    try:
        time.sleep(WARMUP_S)
        url = started.server.url
        jobs: dict[str, list[str]] = {
            "report": ["--url", url, "--report", "--duration", f"{REPORT_S:g}", "--format", "json"]
        }
        if record is not None:
            jobs["report"] += ["--record", str(record / f"{regime.name}-report.vtrace")]
        for fixed, values in _sweeps(regime).items():
            knob = "max_num_seqs" if "max_num_seqs" not in dict(fixed) else "max_num_batched_tokens"
            sets = [f"--set={k}={v}" for k, v in fixed]
            jobs[f"whatif {fixed}"] = [
                "whatif",
                "--url",
                url,
                "--duration",
                f"{REPORT_S:g}s",
                "--format",
                "json",
                *sets,
                "--sweep",
                f"{knob}={','.join(str(v) for v in values)}",
            ]
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            done = {n: pool.submit(vtop, *a, timeout_s=REPORT_S + 120) for n, a in jobs.items()}
            results = {n: f.result() for n, f in done.items()}
    finally:
        started.close()
    report = results.pop("report")
    outcome.report = json.loads(report.stdout) if report.stdout.strip() else {}
    outcome.choice = _recommended(outcome.report)
    print(f"    report: {outcome.report.get('status')} -> {_label(outcome.choice)}", flush=True)
    for name, done_ in results.items():
        if not done_.stdout.strip():
            print(f"    {name}: no prediction: {done_.stderr.strip()[-300:]}", flush=True)
            continue
        outcome.whatif.append(json.loads(done_.stdout))


def _sweeps(regime: Regime) -> dict[tuple[tuple[str, KnobValue], ...], list[KnobValue]]:
    """The swept configurations grouped by what is fixed beside the swept knob."""
    out: dict[tuple[tuple[str, KnobValue], ...], list[KnobValue]] = {}
    for c in regime.sweep:
        knob = "max_num_batched_tokens" if "max_num_batched_tokens" in c else "max_num_seqs"
        fixed = tuple(sorted((k, v) for k, v in c.items() if k != knob))
        out.setdefault(fixed, []).append(c[knob])
    return out


def _recommended(report: Mapping[str, Any]) -> Config:
    for f in report.get("findings", []):
        if f.get("state") == "firing" and f.get("counts") and f.get("recommendations"):
            return {r["knob"]: r["to"] for r in f["recommendations"]}
    return {}


def predicted_change(outcome: Outcome, config: Config) -> float | None:
    """The twin's after/now - 1 on tokens/s for `config`, from the whatif documents."""
    for doc in outcome.whatif:
        for p in doc.get("predictions", []):
            if {**outcome.regime.start, **p["changes"]} == {**outcome.regime.start, **config}:
                band = (p.get("predicted") or {}).get("generation_tokens_per_s")
                return band["after"] / band["now"] - 1 if band and band["now"] else None
    return None


def tune(regime: Regime, dtype: str, outcome: Outcome, log_dir: Path) -> None:
    wait_alone()
    server = configured(regime, {}, dtype, port=free_port())
    argv = [str(VENV_PYTHON), "-m", "vllm.entrypoints.openai.api_server", *server.args]
    log = log_dir / f"tune-{regime.name}.json"
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    env.update(server_env(argv))
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "tune",
            "--yes",
            "--watch",
            f"{REPORT_S:g}s",
            "--load",
            str(regime.clients),
            "--load-shape",
            regime.shape,
            "--log",
            str(log),
            "--",
            *argv,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    print(done.stdout, flush=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], flush=True)
    outcome.tune = json.loads(log.read_text()) if log.exists() else {}
    outcome.tune["seconds"] = time.monotonic() - began
    pid = outcome.tune.get("server_pid")
    if pid:  # tune leaves the best configuration running; the next regime needs the cores
        subprocess.run(["kill", "--", f"-{pid}"], check=False, capture_output=True)
        time.sleep(5)
        subprocess.run(["kill", "-9", "--", f"-{pid}"], check=False, capture_output=True)


def judge(outcome: Outcome) -> dict[str, Any]:
    """The goals on the sweep, the best that meets them, and the three targets."""
    base = _mean(outcome, {})
    itl_today = _mean(outcome, {}, "itl_mean")
    goals = Goals()
    for m in [*outcome.runs(), *outcome.again]:
        m.misses = goals.missed(
            tokens=m.tokens,
            preemptions=m.figures.get("preemptions_per_s"),
            itl=m.figures.get("itl_mean"),
            itl_today=itl_today,
            ttft=m.figures.get("ttft_p90"),
            unknown="not measured",
            within=1 + NOISE,  # as `vtop tune` judges a measurement
        )
        m.predicted_change = predicted_change(outcome, m.config)
    meeting = [m for m in outcome.sweep if not m.misses and m.tokens is not None]
    best = max(meeting, key=lambda m: m.tokens or 0.0) if meeting else None
    chosen = _measured(outcome, outcome.choice)
    chosen_tokens = _mean(outcome, outcome.choice) if chosen else None
    best_tokens = _mean(outcome, best.config) if best else None
    share = chosen_tokens / best_tokens if chosen_tokens and best_tokens else None
    errors = [
        abs(m.predicted_change - (m.tokens / base - 1))
        for m in outcome.sweep
        if m.predicted_change is not None and base and m.tokens is not None
    ]
    trials = outcome.tune.get("trials", [])
    best_trial = next((t for t in trials if t["trial"] == outcome.tune.get("best")), None)
    tune_share = (
        best_trial["measured"]["tokens_per_s"] / best.tokens
        if best_trial and best and best.tokens and best_trial["measured"]["tokens_per_s"]
        else None
    )
    return {
        "best": best.config if best else None,
        "best_tokens": best_tokens,
        "choice": outcome.choice,
        "choice_share": share,
        "rematched": bool(outcome.again),
        "choice_meets": chosen is not None and not chosen.misses,
        "worst_change_error": max(errors) if errors else None,
        "tune_restarts": outcome.tune.get("restarts"),
        "tune_best": best_trial["changes"] if best_trial else None,
        "tune_share": tune_share,
        "tune_meets": bool(best_trial and best_trial["meets_goals"]),
    }


def _mean(
    outcome: Outcome, config: Config, figure: str = "generation_tokens_per_s"
) -> float | None:
    """The mean of `figure` over every run of `config` (the sweep's, the choice's, `again`)."""
    want = {**outcome.regime.start, **config}
    seen = [
        value
        for m in [*outcome.runs(), *outcome.again]
        if {**outcome.regime.start, **m.config} == want
        and (value := m.figures.get(figure)) is not None
    ]
    return sum(seen) / len(seen) if seen else None


def rematch(regime: Regime, dtype: str, outcome: Outcome) -> None:
    """The report's choice and the sweep's best measured once more each, where the choice's
    share of the best misses `CHOICE_TARGET` on one run each (see the module's docstring)."""
    verdict = judge(outcome)
    share, best = verdict["choice_share"], verdict["best"]
    if share is None or share >= CHOICE_TARGET or best is None:
        return
    for config in (outcome.choice, best):
        try:
            outcome.again.append(measure(regime, config, dtype))
        except VllmServerError as exc:
            print(f"    again {_label(config)}: {str(exc).splitlines()[0]}", flush=True)


def _measured(outcome: Outcome, config: Config) -> Measured | None:
    want = {**outcome.regime.start, **config}
    for m in outcome.runs():
        if {**outcome.regime.start, **m.config} == want:
            return m
    return None


def print_outcome(outcome: Outcome, verdict: Mapping[str, Any]) -> None:
    r = outcome.regime
    print(
        f"\n{r.name}: from {_label(r.start)}, pool {r.pool}, {r.clients} clients, shape {r.shape}"
    )
    print(
        f"  {'configuration':<44} {'tok/s':>7} {'preempt/s':>9} {'ITL mean':>8} "
        f"{'TTFT p90':>8}  {'change':>7} {'predicted':>9}  goals"
    )
    base = _mean(outcome, {})
    for m in [*outcome.runs(), *outcome.again]:
        f = m.figures
        change = m.tokens / base - 1 if base and m.tokens is not None else None
        mark = " <- report" if _same(outcome, m.config, outcome.choice) else ""
        mark += " (again)" if m in outcome.again else ""
        print(
            f"  {_label(m.config):<44} {fmt.num(m.tokens):>7} "
            f"{fmt.num(f.get('preemptions_per_s')):>9} {_s(f.get('itl_mean')):>8} "
            f"{_s(f.get('ttft_p90')):>8}  {_pct(change):>7} {_pct(m.predicted_change):>9}  "
            f"{'meets' if not m.misses else '; '.join(m.misses)}{mark}"
        )
    print(
        f"  report (45 s after 15 s of load): {outcome.report.get('status')}, recommends "
        f"{_label(outcome.choice) if outcome.choice else 'nothing'}"
    )
    for t in outcome.tune.get("trials", []):
        m = t["measured"]
        print(
            f"  tune trial {t['trial']}: {t['flags']:<36} predicted "
            f"{fmt.num((t['predicted'] or {}).get('tokens_per_s'))}, measured "
            f"{fmt.num(m['tokens_per_s'])} tok/s; {t['verdict']}; "
            f"{'meets goals' if t['meets_goals'] else ', '.join(t['misses'])}"
        )
    if outcome.tune:
        print(
            f"  tune stopped: {outcome.tune.get('stopped')} ({outcome.tune.get('restarts')} "
            f"restarts, {outcome.tune.get('seconds', 0):.0f} s)"
        )
    v = verdict
    print(
        f"  => best that meets the goals: {_label(v['best'] or {})} "
        f"{fmt.num(v['best_tokens'])} tok/s; report's choice at {_pct(v['choice_share'], 0)} of "
        f"it (target {CHOICE_TARGET:.0%}{', means of two runs' if v.get('rematched') else ''}), "
        f"meets goals: {v['choice_meets']}"
    )
    print(
        f"     worst predicted change off by {_pct(v['worst_change_error'], 0)} (target "
        f"{CHANGE_TARGET:.0%}); tune: {v['tune_restarts']} restarts to "
        f"{_label(v['tune_best'] or {})} at {_pct(v['tune_share'], 0)} of the best, meets goals: "
        f"{v['tune_meets']}"
    )


def _same(outcome: Outcome, a: Config, b: Config) -> bool:
    return bool(b) and {**outcome.regime.start, **a} == {**outcome.regime.start, **b}


def _s(x: float | None) -> str:
    return fmt.DASH if x is None else fmt.seconds(x)


def _pct(x: float | None, sign: int = 1) -> str:
    if x is None:
        return fmt.DASH
    return f"{x:+.0%}" if sign else f"{x:.0%}"


def run(
    regime: Regime,
    dtype: str,
    log_dir: Path,
    skip_tune: bool,
    tune_only: bool,
    record: Path | None = None,
) -> Outcome:
    print(f"\n[{regime.name}]", flush=True)
    outcome = Outcome(regime)
    if tune_only:
        tune(regime, dtype, outcome, log_dir)
        return outcome
    report_and_predictions(regime, dtype, outcome, record)
    fp8 = cpu.local_cpu_server_knob()
    for config in regime.sweep:
        if fp8 is not None and not fp8.value and str(config.get("kv_cache_dtype")) == "fp8":
            print(f"    skipped {_label(config)}: {fp8.detail}", flush=True)
            continue
        try:
            outcome.sweep.append(measure(regime, config, dtype, record))
        except VllmServerError as exc:  # one configuration that will not start: the rest stand
            print(f"    {_label(config)}: {str(exc).splitlines()[0]}", flush=True)
    try:  # the start again, at the sweep's end: its changes read against the mean of two
        outcome.again.append(measure(regime, {}, dtype))
    except VllmServerError as exc:
        print(f"    the start again: {str(exc).splitlines()[0]}", flush=True)
    if outcome.choice and _measured(outcome, outcome.choice) is None:
        try:
            outcome.choice_measured = measure(regime, outcome.choice, dtype, record)
        except VllmServerError as exc:
            said = str(exc).splitlines()[0]
            print(f"    the report's choice {_label(outcome.choice)}: {said}", flush=True)
    rematch(regime, dtype, outcome)
    if not skip_tune:
        tune(regime, dtype, outcome, log_dir)
    return outcome


def rejudged(path: Path) -> list[tuple[Outcome, dict[str, Any]]]:
    """The outcomes a run wrote with `--json`, judged again by today's goals and code."""
    doc = json.loads(path.read_text())
    out = []
    for r in doc["regimes"]:
        outcome = Outcome(REGIMES[r["name"]])
        outcome.sweep = [Measured(m["config"], m["figures"]) for m in r["sweep"]]
        if r["choice_measured"]:
            m = r["choice_measured"]
            outcome.choice_measured = Measured(m["config"], m["figures"])
        outcome.again = [Measured(m["config"], m["figures"]) for m in r.get("again", [])]
        outcome.report = {"status": r["report_status"]}
        outcome.whatif, outcome.tune = r["whatif"], r["tune"]
        outcome.choice = r["verdict"]["choice"]
        out.append((outcome, judge(outcome)))
    print(f"(a run of {doc['date']}; {doc['machine']}; judged again)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regime", action="append", choices=sorted(REGIMES))
    parser.add_argument("--dtype", choices=sorted(KV_BYTES_PER_TOKEN), default="bfloat16")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--no-tune", action="store_true", help="the sweep and the report only")
    parser.add_argument(
        "--tune-only", action="store_true", help="`vtop tune` alone: no sweep, no report"
    )
    parser.add_argument(
        "--rejudge", metavar="PATH", help="print a --json run's tables again, judged anew"
    )
    parser.add_argument(
        "--record-dir",
        metavar="DIR",
        type=Path,
        help="record the report's window and each swept configuration's as .vtrace files here",
    )
    opts = parser.parse_args()
    if opts.rejudge:
        for outcome, verdict in rejudged(Path(opts.rejudge)):
            print_outcome(outcome, verdict)
        return 0
    stop_on_sigterm()
    began = time.monotonic()
    log_dir = Path(tempfile.mkdtemp(prefix="vtop-tune-real-"))
    names = opts.regime or list(REGIMES)
    results = []
    for name in names:
        if opts.record_dir is not None:
            opts.record_dir.mkdir(parents=True, exist_ok=True)
        outcome = run(
            REGIMES[name], opts.dtype, log_dir, opts.no_tune, opts.tune_only, opts.record_dir
        )
        results.append((outcome, judge(outcome)))
    for outcome, verdict in results:
        print_outcome(outcome, verdict)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, vLLM CPU build, {opts.dtype}"
    print(f"\n({time.monotonic() - began:.0f} s; {datetime.date.today()}; {machine})")
    if opts.json:
        doc = {
            "date": datetime.date.today().isoformat(),
            "machine": machine,
            "regimes": [
                {
                    "name": o.regime.name,
                    "sweep": [vars(m) for m in o.sweep],
                    "choice_measured": vars(o.choice_measured) if o.choice_measured else None,
                    "again": [vars(m) for m in o.again],
                    "report_status": o.report.get("status"),
                    "whatif": o.whatif,
                    "tune": o.tune,
                    "verdict": v,
                }
                for o, v in results
            ],
        }
        Path(opts.json).write_text(json.dumps(doc, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
