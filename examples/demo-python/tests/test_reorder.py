from inventory.reorder import days_of_cover, needs_reorder, reorder_quantity, weekly_demand


def test_needs_reorder_below_threshold():
    assert needs_reorder(3, 5)
    assert not needs_reorder(5, 5)


def test_reorder_quantity_rounds_up_to_packs():
    assert reorder_quantity(3, 20, 6) == 18
    assert reorder_quantity(2, 20, 6) == 18
    assert reorder_quantity(1, 20, 6) == 24


def test_reorder_quantity_zero_when_stocked():
    assert reorder_quantity(20, 20, 6) == 0


def test_weekly_demand_uses_last_seven_days():
    assert weekly_demand([100, 1, 1, 1, 1, 1, 1, 1]) == 7
    assert weekly_demand([]) == 0


def test_days_of_cover():
    assert days_of_cover(14, [2] * 7) == 7.0
    assert days_of_cover(5, []) is None
