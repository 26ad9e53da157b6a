"""The vocabulary every layer shares, and nothing else: the row schemas and input errors (``schema``), folder and
model names (``names``), keyed randomness (``keyed``), engine names (``engine_names``), metric tables' types
(``metric_types``), prompt rendering (``prompts``), judges (``judges``), the predictions store and its URIs
(``store``) and the commands printed to users (``commands``). It imports no other omnieval package."""
