"""Not a package: ``services/`` holds part of the installed package ``tribunal``
(services/tribunal/)."""

raise ImportError(
    "services/ is not a package: import tribunal (its files are in services/tribunal/)"
)
