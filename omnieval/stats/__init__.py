"""Statistics on prediction files: reading and checking them (``read``), the clustered bootstrap (``bootstrap``), the
metric registry and each protocol's metrics (``registry``, ``metrics``, ``open_metrics``), paired differences
(``paired``), significance tests (``significance``), power (``power``), headline tables (``headlines``), the
``omnieval metrics`` command (``command``) and the mixture-of-models filter (``contrastive_filter``). It reads
predictions, never runs models: no import of the run layer, engines or the report."""
