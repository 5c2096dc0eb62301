import pytest

from inventory.stock import OutOfStock, Stock


def test_receive_adds_to_on_hand():
    s = Stock()
    s.receive("apple", 5)
    s.receive("apple", 3)
    assert s.available("apple") == 8


def test_receive_rejects_non_positive():
    with pytest.raises(ValueError):
        Stock().receive("apple", 0)


def test_reserve_reduces_available():
    s = Stock()
    s.receive("pear", 10)
    assert s.reserve("pear", 4) == 6


def test_reserve_exactly_available_is_allowed():
    s = Stock()
    s.receive("pear", 2)
    assert s.reserve("pear", 2) == 0


def test_reserve_more_than_available_fails():
    s = Stock()
    s.receive("pear", 2)
    with pytest.raises(OutOfStock):
        s.reserve("pear", 3)


def test_ship_moves_reserved_out():
    s = Stock()
    s.receive("fig", 5)
    s.reserve("fig", 3)
    assert s.ship("fig", 2) == 3
    assert s.available("fig") == 2


def test_ship_more_than_reserved_fails():
    s = Stock()
    s.receive("fig", 5)
    s.reserve("fig", 1)
    with pytest.raises(ValueError):
        s.ship("fig", 2)


def test_is_empty():
    s = Stock()
    assert s.is_empty("kiwi")
    s.receive("kiwi", 1)
    assert not s.is_empty("kiwi")
