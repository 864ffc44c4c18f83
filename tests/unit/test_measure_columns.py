"""The per-poll measures (`share_over_time`, derived columns) against their definitions,
written the plain way: what the evaluation computes in bulk must be what the catalog says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.model import Knob, Scrape, SeriesKey
from vtop.signals.store import Store
from vtop.triage.measure import Snapshot, compare, compare_column, holds
from vtop.triage.schema import (
    OPS,
    All,
    AnyOf,
    Cond,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Operand,
    Sample,
)

EP = "http://127.0.0.1:8000"
gauge = st.sampled_from([None, 0.0, 0.0, 0.0, 1.0, 2.0])  # empty most of the time
counter = st.sampled_from([None, 5.0, 5.0, 6.0])  # often unchanged between two polls
column = st.lists(st.one_of(st.none(), st.floats(-10, 10), st.sampled_from([0.0, 3.0])))
threshold = st.one_of(st.none(), st.integers(-3, 3), st.floats(-5, 5), st.just("text"),
                      st.booleans())  # fmt: skip


@given(column, st.sampled_from(OPS), threshold)
def test_a_column_compares_as_each_of_its_samples(values: list[float | None], op: str,
                                                  thr: float | str | None) -> None:  # fmt: skip
    assert compare_column(values, op, thr) == [compare(v, op, thr) for v in values]


def store_of(rows: list[tuple[float | None, float | None, float | None]]) -> Store:
    store = Store(EP)
    for i, (running, waiting, gen) in enumerate(rows):
        scalars = {SeriesKey(name, "m", "0", ""): v
                   for name, v in (("running", running), ("waiting", waiting),
                                   ("generation_tokens", gen)) if v is not None}  # fmt: skip
        store.ingest(Scrape(EP, float(i), latency_s=0.01, size_bytes=1, scalars=scalars))
    return store


rows = st.lists(st.tuples(gauge, gauge, counter), min_size=1, max_size=40)


@settings(max_examples=150)
@given(rows)
def test_gauges_lie_is_an_empty_scheduler_that_generated_tokens(
    data: list[tuple[float | None, float | None, float | None]],
) -> None:
    store = store_of(data)
    snap = Snapshot(store, {}, None)
    run, wait = store.values("running"), store.values("waiting")
    gen = store.values("generation_tokens")
    expected: list[float | None] = [None] * len(run)
    for i in range(1, len(run)):
        generated, before = gen[i], gen[i - 1]
        seen = (run[i - 1], wait[i - 1], run[i], wait[i])
        if None not in seen and generated is not None and before is not None:
            empty = run[i - 1] == wait[i - 1] == run[i] == wait[i] == 0
            expected[i] = float(empty and generated > before)
    assert snap.column(Operand("gauges_lie"), 3600) == expected


def plain_truth(cond: Cond, store: Store, i: int) -> bool | None:
    """One poll's truth of a share_over_time condition, by the catalog's definition."""
    if isinstance(cond, Sample):
        assert isinstance(cond.threshold, float), "the generated conditions compare with numbers"
        return compare(store.values(cond.operand.name)[i], cond.op, cond.threshold)
    if isinstance(cond, Not):
        inner = plain_truth(cond.item, store, i)
        return None if inner is None else not inner
    assert isinstance(cond, All | AnyOf)
    parts = [plain_truth(c, store, i) for c in cond.items]
    decisive = not isinstance(cond, All)  # False decides an All, True an AnyOf
    if any(p is decisive for p in parts):
        return decisive
    return None if any(p is None for p in parts) else not decisive


samples = st.builds(Sample, st.sampled_from([Operand("running"), Operand("waiting")]),
                    st.sampled_from(OPS), st.sampled_from([0.0, 1.0, 2.0]))  # fmt: skip
conds = st.recursive(samples, lambda inner: st.one_of(
    st.builds(Not, inner),
    st.builds(All, st.lists(inner, min_size=1, max_size=3).map(tuple)),
    st.builds(AnyOf, st.lists(inner, min_size=1, max_size=3).map(tuple)),
), max_leaves=6)  # fmt: skip


@settings(max_examples=150)
@given(rows, conds)
def test_share_over_time_is_the_share_of_known_polls_where_the_condition_held(
    data: list[tuple[float | None, float | None, float | None]], cond: Cond
) -> None:
    store = store_of(data)
    truths = [plain_truth(cond, store, i) for i in range(len(data))]
    known = [t for t in truths if t is not None]
    expected = sum(known) / len(known) if known else None
    got = Snapshot(store, {}, None).measure(Measure("share_over_time", None, 3600, sub=cond))
    assert got == expected


def plain_holds(cond: Cond, knobs: dict[str, Knob]) -> bool | None:
    """A condition's three-valued truth by the catalog's definition: every item judged."""
    if isinstance(cond, KnobIs):
        knob = knobs.get(cond.knob)
        return None if knob is None else compare(knob.value, cond.op, cond.value)
    if isinstance(cond, Not):
        inner = plain_holds(cond.item, knobs)
        return None if inner is None else not inner
    if isinstance(cond, IfKnown):
        return plain_holds(cond.item, knobs) is not False
    assert isinstance(cond, All | AnyOf)
    parts = [plain_holds(c, knobs) for c in cond.items]
    decisive = not isinstance(cond, All)
    if any(p is decisive for p in parts):
        return decisive
    return None if any(p is None for p in parts) else not decisive


knob_leaves = st.builds(KnobIs, st.sampled_from(["a", "b", "c"]), st.just("above"),
                        st.just(0))  # fmt: skip
knob_conds = st.recursive(knob_leaves, lambda inner: st.one_of(
    st.builds(Not, inner),
    st.builds(IfKnown, inner),
    st.builds(All, st.lists(inner, min_size=1, max_size=4).map(tuple)),
    st.builds(AnyOf, st.lists(inner, min_size=1, max_size=4).map(tuple)),
), max_leaves=10)  # fmt: skip
knob_values = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from([1, -1]))


@settings(max_examples=300)
@given(knob_conds, knob_values)
def test_a_condition_stops_at_its_deciding_item_with_the_truth_of_all_its_items(
    cond: Cond, values: dict[str, int]
) -> None:
    knobs = {name: Knob(name, v, "default") for name, v in values.items()}
    snap = Snapshot(Store(EP), knobs, None)
    assert holds(cond, snap, active=False) == plain_holds(cond, knobs)
