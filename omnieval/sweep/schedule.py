"""Which models of a sweep run side by side: each model's demand on the cluster, the order models are tried in, and
the free resources a model must fit (``omnieval.sweep``'s docstring, "Scheduling").

Plain arithmetic, no Ray: the runner reads the cluster's resources and keeps the books. The books are the sweep's
own (what the cluster had free when the sweep started, less what its running models asked for), because Ray's
``available_resources`` only shows a model's replicas once its actor pool has started, seconds after the model
was started; read from Ray, a second model would be started on GPUs the first is about to take."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Demand:
    """What a model's pass holds while it runs: its replicas' GPUs and CPUs, plus its request task and one decode
    task (``run.preflight.stage_needs``: a pass whose replicas took the last CPU would wait on its own media)."""

    gpus: float = 0.0
    cpus: float = 0.0

    def __add__(self, other: Demand) -> Demand:
        return Demand(self.gpus + other.gpus, self.cpus + other.cpus)

    def __sub__(self, other: Demand) -> Demand:
        return Demand(self.gpus - other.gpus, self.cpus - other.cpus)

    def fits(self, free: Demand) -> bool:
        return self.gpus <= free.gpus + 1e-9 and self.cpus <= free.cpus + 1e-9


def model_demand(model) -> Demand:
    """The demand of a ``ModelConfig`` (``replicas``, ``num_gpus``, ``num_cpus``)."""
    from omnieval.run.preflight import stage_needs

    cpus, gpus = stage_needs(model)
    return Demand(gpus=gpus, cpus=cpus)


def start_order(names: list[str], demands: dict[str, Demand], max_concurrent: int) -> list[str]:
    """The order models are tried in: the sweep's order when they run one at a time (``max_concurrent`` 1, the
    sequential schedule), else largest first (GPUs, then CPUs; ties in the sweep's order), so the big models are
    not left to the end, when the small ones can no longer fill the GPUs beside them."""
    if max_concurrent == 1:
        return list(names)
    rank = {name: i for i, name in enumerate(names)}
    return sorted(names, key=lambda n: (-demands[n].gpus, -demands[n].cpus, rank[n]))


def next_to_start(waiting: list[str], demands: dict[str, Demand], free: Demand, n_running: int,
                  max_concurrent: int) -> str | None:
    """The first waiting model that fits the free resources, or None. With nothing running the first waiting model
    starts whatever it asks (the cluster may be smaller than the books say, or busy with another job: Ray then
    queues its replicas, as a single model's pass always did)."""
    if not waiting or n_running >= max_concurrent:
        return None
    if n_running == 0:
        return waiting[0]
    if max_concurrent == 1:
        return None
    for name in waiting:
        if demands[name].fits(free):
            return name
    return None
