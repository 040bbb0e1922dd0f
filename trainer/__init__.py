"""Not a package: ``trainer/`` holds part of the installed package ``tribunal``
(trainer/tribunal/)."""

raise ImportError("trainer/ is not a package: import tribunal (its files are in trainer/tribunal/)")
