"""Development tooling behind the CLI, not used by the library itself: the demo (``omnieval demo``), the benchmarks
(``omnieval bench pipeline | engine | stats``) and tiny random-weight models for tests and smoke runs
(``omnieval models tiny``)."""
