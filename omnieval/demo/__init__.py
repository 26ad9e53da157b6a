"""The demo (``omnieval demo``): synthetic benchmarks with real media, simulated models, and one tiny random-weight
transformers model for the real code path; nothing downloaded. It ships in the wheel; ``omnieval.dev`` (benches,
the other tiny builds, the counting engine) does not."""
