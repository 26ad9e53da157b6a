"""The run layer, on Ray: a run config becomes a plan (``plan``, ``preflight``, ``identity``), the plan's items become
instances (``expansion``), instances flow through the decode and model stages (``stages``, ``decode_cache``,
``media_policy``) to answers and prediction rows (``answers``, ``predictions``, ``cascade``, ``open_ended``), written
to the store one writer at a time (``lease``); ``pipeline.run_evaluation`` drives it, ``ray_start`` and
``stopping`` start and stop it. It never imports the statistics or the report (docs/architecture.md)."""
