"""How many CPU-bound tasks of one kind (decodes, expansion chunks) a run keeps in flight at once.

Ray's logical CPUs are not cores: the embedded Ray has max(8, cores) of them, so engine replicas and decode tasks
never wait on each other for a slot. Sized by slots, a burst of decode tasks on a 2-core machine ran 8 at once, and
Ray started a worker process for each (about half a second of CPU apiece, taken from the engines starting beside
them); the decodes themselves went no faster. On a single-node cluster on this machine the bound is this machine's
cores; on a cluster of several nodes it is the cluster's CPUs (Ray places the tasks)."""

from __future__ import annotations

import os


def cpu_parallelism() -> int:
    """Cores of this machine when every Ray node is this machine, else the cluster's logical CPUs (at least 1)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    here = ray.util.get_node_ip_address()
    if nodes and all(n.get("NodeManagerAddress") == here for n in nodes):
        return max(1, os.cpu_count() or 1)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
