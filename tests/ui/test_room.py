"""How the dashboard's rows are shared out (`vtop.ui.room`), without a terminal: the plan
never takes more rows than the screen has where its smallest layout fits, and what gives way
goes in the order docs/tui.md writes down."""

from __future__ import annotations

import pytest

from vtop.ui import room
from vtop.ui.room import Needs, fitting, plan


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("height", [24, 30, 40, 60])
@pytest.mark.parametrize("fleet", [0, 5, 7, 12])
@pytest.mark.parametrize(("gpus", "notes"), [(1, 0), (1, 1), (8, 1)])
@pytest.mark.parametrize("fixed", [2, 3])  # the replay's timeline: one row more
def test_the_plan_fits_the_screen(
    width: int, height: int, fleet: int, gpus: int, notes: int, fixed: int
) -> None:
    needs = Needs(width, height, fixed, fleet, gpus, notes)
    p = plan(needs)
    assert p.rows(needs) <= height, p
    assert p.triage >= room.TRIAGE_FLOOR and (not fleet or p.fleet >= room.FLEET_FLOOR)
    if not p.compact:
        assert width >= room.ROOMY_MIN_W and p.gpu == "box" and p.across == 1


def test_one_endpoint_at_80x24_gives_nothing_up() -> None:
    p = plan(Needs(80, 24, 2, 0, 1, 0))
    assert (p.compact, p.across, p.gpu) == (True, 1, "box") and p.triage == 8


def test_what_gives_way_goes_in_order() -> None:
    two = plan(Needs(80, 24, 2, 2 + 1 + 2, 1, 1))  # two endpoints, a GPU note
    assert (two.gpu, two.across) == ("line", 1) and two.triage >= room.TRIAGE_MIN
    four = plan(Needs(80, 24, 2, 2 + 1 + 4, 1, 1))
    assert (four.gpu, four.across, four.fleet) == ("line", 2, 7)
    assert four.triage >= room.TRIAGE_MIN
    nine = plan(Needs(80, 24, 2, 2 + 1 + 9, 1, 0))  # the fleet gives way last
    assert (nine.gpu, nine.across, nine.triage) == ("line", 2, room.TRIAGE_FLOOR)
    assert nine.fleet < 12 and nine.rows(Needs(80, 24, 2, 12, 1, 0)) <= 24


def test_a_roomy_screen_keeps_the_boxes_and_a_short_one_the_rows() -> None:
    assert not plan(Needs(100, 30, 2, 0, 1, 0)).compact  # the boxes just fit
    assert plan(Needs(100, 26, 2, 0, 1, 0)).compact
    assert plan(Needs(120, 40, 2, 2 + 1 + 9, 8, 1)).compact  # 9 endpoints and 8 GPUs


def test_fitting_picks_the_longest_form_that_fits() -> None:
    forms = ("cap: max_num_seqs (default, assumed)", "max_num_seqs (assumed)")
    assert fitting(forms, 40) == forms[0]
    assert fitting(forms, 26) == forms[1]
    assert fitting(forms, 5) == forms[1]  # none fits: the shortest, for the field to cut
