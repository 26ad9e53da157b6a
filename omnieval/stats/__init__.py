"""Statistics on prediction files: reading and checking them (``read``), the clustered bootstrap (``bootstrap``), the
metric registry and each protocol's metrics (``registry``, ``metrics``, ``open_metrics``), paired differences
(``paired``), significance tests (``significance``), Benjamini-Hochberg within families for both
(``multiple_testing``), power (``power``), headline tables (``headlines``), the ``omnieval metrics`` command and the
files it writes, for a sweep's runs too (``command``), and the mixture-of-models filter (``contrastive_filter``). It
reads predictions, never runs models: no import of the run layer, engines or the report."""
