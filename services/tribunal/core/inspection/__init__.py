"""The reward inspector: a capped, sampled record of scored items and the ``/inspect`` page
that shows them (``store``: what is kept and where; ``routes``: the page, its JSON and its
JSONL export)."""
