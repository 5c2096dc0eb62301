"""Stock levels per item, with reservations that cannot exceed what is on hand."""


class OutOfStock(Exception):
    pass


class Stock:
    def __init__(self):
        self.on_hand = {}
        self.reserved = {}

    def receive(self, sku, qty):
        if qty <= 0:
            raise ValueError("qty must be positive")
        self.on_hand[sku] = self.on_hand.get(sku, 0) + qty

    def available(self, sku):
        return self.on_hand.get(sku, 0) - self.reserved.get(sku, 0)

    def reserve(self, sku, qty):
        if qty > self.available(sku):
            raise OutOfStock(sku)
        self.reserved[sku] = self.reserved.get(sku, 0) + qty
        return self.available(sku)

    def ship(self, sku, qty):
        if qty > self.reserved.get(sku, 0):
            raise ValueError("ship more than reserved")
        self.reserved[sku] -= qty
        self.on_hand[sku] -= qty
        return self.on_hand[sku]

    def is_empty(self, sku):
        return self.available(sku) == 0 and self.reserved.get(sku, 0) == 0
