-- settle schema 22 (manual: Destinations and the dispatcher): each destination's health, beside
-- its retry budget and shared the same way by every process on the ledger: its breaker (closed,
-- open or probing, why, the window's failures, the probe under way) and its pace, as JSON. None:
-- never troubled (closed, no pace).
ALTER TABLE retry_budgets ADD COLUMN health TEXT;
