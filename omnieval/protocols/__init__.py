"""One module per protocol: item validation, ``expand(item) -> instances``, the target rule, and the metric
definitions as functions of cell means."""
