"""When to reorder, and how much."""


def needs_reorder(available, threshold):
    return available < threshold


def reorder_quantity(available, target, pack_size):
    if available >= target:
        return 0
    missing = target - available
    packs = (missing + pack_size - 1) // pack_size
    return packs * pack_size


def weekly_demand(daily_sales):
    if not daily_sales:
        return 0
    return sum(daily_sales[-7:])


def days_of_cover(available, daily_sales):
    demand = weekly_demand(daily_sales)
    if demand == 0:
        return None
    return round(available / (demand / 7), 1)
