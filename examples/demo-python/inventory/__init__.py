"""A tiny stock ledger: items, reservations and reorder rules."""
