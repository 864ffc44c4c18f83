"""`vtop rules export --format prometheus`: promtool accepts it, and a real Prometheus fires the
exported rules on the same simulated servers where vtop's own engine fires its rules.

The proof runs both on one stream of pages. Each scenario's twin renders five minutes of
pages, one every 2 s; vtop's engine reads them (PageReader, Monitor, the shipped catalog, the knobs from the
twin's command line, as the live source would find them), and the same pages, labelled as
Prometheus labels its scrapes, become TSDB blocks (promtool). Then the twins keep running live
behind HTTP servers, Prometheus scrapes them every second and evaluates the exported rules
over the history plus what it scrapes, vtop's monitor reads the same live pages, and after the
rules' `for` the alerts must be the findings. Every scenario of the twin takes part. Prometheus
starts with no alert state, so the fair measure is what vtop's engine would judge first at that
moment: for every instance, the rules whose condition holds at its firing level on the pages
so far are exactly the alerts pending or firing in Prometheus, and
those that fire in vtop with a `for` of 30 s fire in Prometheus too (escalation included).
(A rule that vtop keeps active only by its recovery level, from before, Prometheus cannot know
of; the recovery levels themselves are proved under `promtool test rules`.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.prom import (
    MISSING,
    PROMTOOL,
    DataParallel,
    PrometheusServer,
    Scraped,
    create_blocks,
    history_openmetrics,
    twin_history,
)
from vtop.model import Frame, Knob
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.sim.scenarios import SCENARIOS as TWIN_SCENARIOS
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.triage.engine import Engine
from vtop.triage.measure import Snapshot, holds
from vtop.triage.promql import alert_name

if MISSING:
    if os.environ.get("VTOP_REQUIRE_PROMETHEUS"):
        raise RuntimeError(MISSING)
    pytest.skip(MISSING, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = [*TWIN_SCENARIOS, "data-parallel"]
"""Every scenario of the twin, and `data-parallel`: two engines, one at the memory ceiling, one
lightly loaded (a `DataParallel` of a memory-ceiling twin and a healthy one)."""
HISTORY_S = 300.0
STEP_S = 2.0
"""Five minutes of history (the rules' longest window) at a page every 2 s: 150 polls, more
than any rule's `requires`, and the twins render it in seconds."""
TARGET_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "kv_capacity_tokens",
                "tensor_parallel_size", "gpu_memory_utilization")  # fmt: skip


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vtop", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)  # fmt: skip


def test_the_whole_catalog_exports_and_promtool_accepts_it(tmp_path: Path) -> None:
    out = tmp_path / "vtop.rules.yml"
    result = vtop("rules", "export", "--format", "prometheus", "--no-user", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert PROMTOOL is not None
    check = subprocess.run([PROMTOOL, "check", "rules", str(out)], capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    doc = yaml.safe_load(out.read_text())
    rules = {r["labels"]["vtop_rule"] for r in doc["groups"][0]["rules"]}
    shipped = {r.id for r in Engine.from_catalog(user=False).rules}
    skipped = {line.split(": ")[2] for line in result.stderr.splitlines()
               if "not exported:" in line}  # fmt: skip
    assert rules | skipped == shipped and not rules & skipped
    for alert in doc["groups"][0]["rules"]:
        ann = alert["annotations"]
        assert "{{ $labels.instance }}" in ann["summary"]
        assert any(k.startswith("recommend_") for k in ann) or not _advice(alert)


def test_knobs_from_targets_and_flags_and_rules_that_cannot_be_exported(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("http://10.0.0.5:8000 max_num_seqs=16 kv_capacity_tokens=293648\n"
                     "10.0.0.6:8000 max_num_seqs=128\n")  # fmt: skip
    mine = tmp_path / "rules"
    mine.mkdir()
    (mine / "gpu-memory.yaml").write_text(
        "id: gpu-memory-full\ntitle: GPU memory full\nseverity: warning\norder: 200\n"
        "source: a test\nsummary: full\nwhen:\n  avg_over_time: gpu_mem_total\n"
        "  window: 1m\n  above: 0\n"
    )
    out = tmp_path / "vtop.rules.yml"
    result = vtop("rules", "export", "--no-user", "--targets", str(fleet), "--rules", str(mine),
                  "--knob", "tensor_parallel_size=2", "--resolution", "15s", "-o", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    why = "uses gpu_mem_total: only vtop's NVML reader measures GPU memory in all"
    assert f"vtop rules export: not exported: gpu-memory-full: {why}" in result.stderr
    text = out.read_text()
    assert f"#   gpu-memory-full: {why}" in text  # and in the file's header
    assert PROMTOOL is not None
    check = subprocess.run([PROMTOOL, "check", "rules", str(out)], capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert 'label_replace(vector(16), "instance", "10.0.0.5:8000", "", "")' in text
    assert 'label_replace(vector(128), "instance", "10.0.0.6:8000", "", "")' in text
    assert "[2m:15s]" in text
    budget = next(r for r in yaml.safe_load(text)["groups"][0]["rules"]
                  if r["labels"]["vtop_rule"] == "budget-too-small")  # fmt: skip
    assert "max_num_seqs: vtop_knob_max_num_seqs{instance=…} if published, 2 instance(s) from" in (
        budget["annotations"]["vtop_knobs"])  # fmt: skip


def _advice(alert: dict[str, Any]) -> bool:
    rid = alert["labels"]["vtop_rule"]
    return bool(Engine.from_catalog(user=False).by_id[rid].recommend)


def test_the_alertmanager_inhibit_rules_are_the_root_causes(tmp_path: Path) -> None:
    result = vtop("rules", "export", "--format", "alertmanager", "--no-user")
    assert result.returncode == 0, result.stderr
    inhibits = yaml.safe_load(result.stdout)["inhibit_rules"]
    memory = next(i for i in inhibits if i["source_matchers"] == ['vtop_rule="memory-ceiling"'])
    assert "budget-too-small" in memory["target_matchers"][0]
    assert memory["equal"] == ["job", "instance"]


def test_bad_export_arguments_are_one_line(tmp_path: Path) -> None:
    r = vtop("rules", "export", "--knob", "max_seqs=3")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("vtop rules export: --knob 'max_seqs=3': expected NAME=VALUE")
    bad = tmp_path / "fleet.txt"
    bad.write_text("127.0.0.1:1 max_num_seqs=x\n")
    r = vtop("rules", "export", "--targets", str(bad))
    assert (r.returncode, r.stderr) == (
        2, f"vtop rules export: {bad}:1: max_num_seqs=x: expected a whole number from 1 to 1048576\n")  # fmt: skip


# -- the same scenario, vtop's engine and a real Prometheus -------------------------------------


@dataclasses.dataclass
class Instance:
    scenario: str
    twin: Any
    pages: list[Scraped]
    vtop: dict[str, str]
    """rule -> state as vtop's engine has it (`_states`): at the end of the history, then as
    the live pages move it on."""
    knobs: dict[str, Knob]
    monitor: Monitor
    """vtop's monitor of the whole fleet (one for all instances)."""
    reader: PageReader
    server: SimServer | None = None
    name: str = ""
    """`instance` label: host:port of its server."""


def _vtop_findings(
    twins: dict[str, Any], end: float
) -> tuple[Monitor, dict[str, PageReader], dict[str, tuple[list[Scraped], dict[str, Knob]]]]:
    """Every twin's pages read by vtop, the fleet watched by one monitor (as `--url` a few
    times would), so rules that compare replicas of a model see them all, as Prometheus does.
    The monitor and its page readers go on with the live pages (`_watch_live`)."""
    monitor = Monitor(engine=Engine.from_catalog(user=False))
    readers = {s: PageReader() for s in twins}
    pages: dict[str, list[Scraped]] = {s: [] for s in twins}
    histories = [twin_history(tw, start=end - HISTORY_S, end=end, step_s=STEP_S)
                 for tw in twins.values()]  # fmt: skip
    for polls in zip(*histories, strict=True):
        scrapes = []
        for s, (scraped, tw) in zip(twins, polls, strict=True):
            scrape = readers[s].read(scraped.page, endpoint=s, t=scraped.t,
                                     latency_s=scraped.duration_s)  # fmt: skip
            if not pages[s]:
                process = {
                    k: Knob(k, v, "process", "sim command line") for k, v in tw.knobs.items()
                }
                knobs = discovery.merge(cache_info=scrape.info, endpoint=tw.endpoint_info(),
                                        process=process)  # fmt: skip
                scrape = dataclasses.replace(scrape, knobs=knobs, server=tw.endpoint_info())
            scrapes.append(scrape)
            pages[s].append(scraped)
        monitor.feed(Frame(max(x.t for x in scrapes), tuple(scrapes)))
    return monitor, readers, {s: (pages[s], dict(monitor.endpoints[s].knobs)) for s in twins}


def _states(monitor: Monitor, endpoint: str) -> dict[str, str]:
    """rule -> state of one endpoint as vtop's engine has it now, plus `RULE fresh` for each
    rule whose condition holds at its firing level: Prometheus starts with no alert state, so
    its first evaluations compare at the firing levels; vtop's engine started at that moment
    would too (no hysteresis carried over)."""
    view = monitor.endpoints[endpoint]
    states = {f.rule: str(f.state) for f in view.findings}
    states.update({f"{f.rule} critical": "firing" for f in view.findings
                   if f.state == "firing" and f.severity.name == "CRITICAL"})  # fmt: skip
    snap = Snapshot(view.store, view.knobs, None)
    for rule in monitor.engine.rules:
        if holds(rule.when, snap, active=False):
            states.setdefault(rule.id, "holds")
            states[f"{rule.id} fresh"] = "holds"
    return states


def _watch_live(instances: dict[str, Instance]) -> None:
    """One more poll of every live twin, read and judged by the monitor that read the history,
    so vtop's verdicts move on with the pages Prometheus goes on scraping."""
    scrapes = []
    for inst in instances.values():
        t0 = time.time()
        page = httpx.get(f"http://{inst.name}/metrics", timeout=10).text
        scrapes.append(inst.reader.read(page, endpoint=inst.scenario, t=time.time(),
                                        latency_s=time.time() - t0))  # fmt: skip
    monitor = next(iter(instances.values())).monitor
    monitor.feed(Frame(max(x.t for x in scrapes), tuple(scrapes)))
    for inst in instances.values():
        inst.vtop = _states(monitor, inst.scenario)


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PrometheusServer, dict[str, Instance], set[str]]]:
    """Prometheus evaluating the exported rules on the live twins, the instances, and the ids
    of the rules exported (a rule whose window signals have no PromQL is left out, and says so)."""
    tmp = tmp_path_factory.mktemp("export")
    end = time.time()
    instances: dict[str, Instance] = {}
    twins: dict[str, Any] = {}
    for i, scenario in enumerate(SCENARIOS):
        if scenario == "data-parallel":
            twins[scenario] = DataParallel([Twin("memory-ceiling", seed=i + 1, epoch=0.0),
                                            Twin("healthy", seed=i + 2, epoch=0.0)])  # fmt: skip
        else:
            twins[scenario] = Twin(scenario, seed=i + 1, epoch=0.0)
    monitor, readers, read = _vtop_findings(twins, end)
    for scenario, (pages, knobs) in read.items():
        instances[scenario] = Instance(scenario, twins[scenario], pages,
                                       _states(monitor, scenario), knobs, monitor,
                                       readers[scenario])  # fmt: skip
    # the twins go on live, each on its own port; their history is Prometheus's past
    name: dict[str, str] = {}
    for scenario, inst in instances.items():
        inst.server = server = serve(inst.twin)
        name[scenario] = f"127.0.0.1:{server.port}"
    try:
        om = tmp / "history.om"
        history_openmetrics({("vllm", name[s]): inst.pages for s, inst in instances.items()}, om)
        create_blocks(om, tmp / "data")
        # what the user knows of each server (its command line), as a targets file
        targets = tmp / "fleet.txt"
        targets.write_text("".join(
            f"http://{name[s]} " + " ".join(f"{k}={inst.knobs[k].value}" for k in TARGET_KNOBS
                                             if k in inst.knobs) + "\n"
            for s, inst in instances.items()))  # fmt: skip
        rules = tmp / "vtop.rules.yml"
        result = vtop(
            "rules",
            "export",
            "--no-user",
            "--targets",
            str(targets),
            "--resolution",
            "1s",
            "-o",
            str(rules),
        )
        assert result.returncode == 0, result.stderr
        doc = yaml.safe_load(rules.read_text())
        exported = {r["labels"]["vtop_rule"] for g in doc["groups"] for r in g["rules"]}
        with PrometheusServer.start(tmp / "prom", jobs={"vllm": list(name.values())},
                                    rule_files=[rules], data=tmp / "data") as prom:  # fmt: skip
            for inst in instances.values():
                inst.name = name[inst.scenario]
            yield prom, instances, exported
    finally:
        for inst in instances.values():
            if inst.server is not None:
                inst.server.close()


def _alerts(prom: PrometheusServer) -> dict[str, dict[str, str]]:
    """instance -> {rule: state} of the pending and firing alerts (the worst severity's state)."""
    out: dict[str, dict[str, str]] = {}
    for a in prom.alerts():
        rid = a["labels"]["vtop_rule"]
        states = out.setdefault(a["labels"]["instance"], {})
        if a["labels"]["severity"] == "critical":
            if a["state"] == "firing":
                states[f"{rid} critical"] = "firing"
        elif states.get(rid) != "firing":
            states[rid] = a["state"]
    return out


def test_exported_rules_fire_in_prometheus_where_vtop_fires(
    fleet: tuple[PrometheusServer, dict[str, Instance], set[str]],
) -> None:
    prom, instances, exported = fleet
    engine = Engine.from_catalog(user=False)
    fast = {r.id for r in engine.rules if r.for_s <= 30}

    def wanted() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        # the rules whose condition holds at its firing level on the pages so far (what a
        # fresh rule engine judges first) are the alerts pending or firing in Prometheus; those
        # of them that fire in vtop with a `for` of 30 s fire there too, escalation included
        # (only the rules exported: those whose window signals have PromQL)
        holds = {i.name: {r.removesuffix(" fresh") for r in i.vtop if r.endswith(" fresh")
                          and r.split()[0] in exported}
                 for i in instances.values()}  # fmt: skip
        firing = {
            i.name: {r for r, s in i.vtop.items() if s in ("firing", "suppressed")
                     and r.split()[0] in fast and r.split()[0] in holds[i.name]}
            for i in instances.values()
        }  # fmt: skip
        return holds, firing

    # every shipped rule is exported but the one whose held-back proof has no PromQL yet
    assert {r.id for r in engine.rules} - exported == {"client-static-batching"}
    want_holds, _ = wanted()
    # the scenarios show what they are meant to, in vtop (the premise of the comparison)
    for scenario, twin_scenario in TWIN_SCENARIOS.items():
        if twin_scenario.rule is None:
            # (beside the other scenarios' loads a healthy server is a replica of the same
            # model; the imbalance between them is the fleet's, compared below like the rest)
            assert not want_holds[instances[scenario].name] - {"replica-imbalance"}, scenario
        else:
            assert instances[scenario].vtop.get(twin_scenario.rule) == "firing", scenario
    assert instances["data-parallel"].vtop.get("engine-imbalance") == "firing"

    # an escalation fires in Prometheus as a second alert, severity critical
    assert "memory-ceiling critical" in instances["memory-ceiling"].vtop

    def settled() -> bool:
        # vtop reads the pages Prometheus goes on scraping, and both are compared on them
        _watch_live(instances)
        want_holds, want_firing = wanted()
        got = _alerts(prom)
        holds = {i: {r for r in got.get(i, {}) if not r.endswith(" critical")}
                 for i in want_holds}  # fmt: skip
        firing = {i: {r for r, s in got.get(i, {}).items() if s == "firing"} for i in want_holds}
        return holds == want_holds and all(want_firing[i] <= firing[i] for i in want_firing)

    # An alert's `for` restarts whenever its expression is empty at an evaluation, as it is for
    # a moment after a scrape that timed out (the two-engine twin's page, on a loaded CI host):
    # room for the 30 s to run through again.
    ok = prom.wait_for(settled, timeout_s=150, step_s=1.0)
    health = [h for h in prom.rule_health() if h[1] != "ok"]
    assert not health, health
    got = _alerts(prom)
    detail = json.dumps({"vtop": {i.name: i.vtop for i in instances.values()},
                         "prometheus": got}, indent=1, sort_keys=True)  # fmt: skip

    assert ok, detail


def test_every_recommendation_formula_is_valid_promql(
    fleet: tuple[PrometheusServer, dict[str, Instance], set[str]],
) -> None:
    prom, instances, _exported = fleet
    doc = yaml.safe_load((Path(str(prom.workdir)).parent / "vtop.rules.yml").read_text())
    formulas = [v for r in doc["groups"][0]["rules"] for k, v in r["annotations"].items()
                if k.endswith("_promql") and not v.startswith("(computed by vtop only")]  # fmt: skip
    assert len(formulas) >= 5
    for f in formulas:
        prom.query(f)  # a parse error is an HTTP 400 and fails the query's assertion
    # max_num_seqs for budget-too-small: raised, and from the per-instance knob 16
    rule = next(
        r for r in doc["groups"][0]["rules"] if r["alert"] == alert_name("budget-too-small")
    )
    inst = instances["budget-too-small"].name
    result = prom.query(f'({rule["annotations"]["recommend_1_max_num_seqs_promql"]})'
                        f' and on (instance) up{{instance="{inst}"}}')  # fmt: skip
    assert result and float(result[0]["value"][1]) > 16
