"""Check that pyproject.toml, the locks and the venv agree.

    python scripts/check_lock.py            pyproject.toml against requirements/*.txt
    python scripts/check_lock.py --venv all the running interpreter's packages against all.txt

The locks (``make lock``, scripts/lock.sh) must pin every requirement pyproject.toml names, at a
version its specifier admits: a dependency added, or a range moved past the pinned version,
without ``make lock`` fails here. ``base.txt`` must pin what ``all.txt`` pins. With ``--venv``,
the interpreter running this must hold exactly one lock's packages at its versions (nothing
missing, nothing else but Tribunal itself and pip). Exit status 1 with one line per problem.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
# What scripts/lock.sh compiles into each lock: the core dependencies plus these extras.
LOCKED_EXTRAS = {
    "base": (),
    "all": ("dev", "judge-local", "trainer", "trl", "compose", "docs", "protocols"),
}
# Installed over a lock with --no-deps (the Makefile's .venv/.all), kept by hand with hashes:
# the trainers whose own dependencies pull CUDA builds; their venv holds these pins too.
NO_DEPS = {"all": ("trainers-nodeps",)}
# Installed in every venv but not part of any lock: the project itself and pip.
UNLOCKED = {"tribunal", "pip"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def read_lock(path: Path) -> dict[str, Version]:
    """The ``name==version`` pins of a compiled requirements file, by canonical name."""
    pins: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def requirements(pyproject: dict[str, object], extras: tuple[str, ...]) -> list[Requirement]:
    """The requirements a lock compiled with ``extras`` must satisfy, build system included."""
    project = pyproject["project"]
    build = pyproject["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    names = list(project["dependencies"]) + list(build["requires"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        names += optional[extra]
    return [Requirement(name) for name in names]


def lock_problems(root: Path = ROOT) -> list[str]:
    """Every disagreement between pyproject.toml and the locks under ``root/requirements``."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    optional = pyproject["project"].get("optional-dependencies", {})
    problems = [
        f"pyproject.toml: extra {extra!r} is in no lock (add it to scripts/lock.sh and "
        "LOCKED_EXTRAS)"
        for extra in optional
        if extra not in LOCKED_EXTRAS["all"]
    ]
    locks = {name: read_lock(root / "requirements" / f"{name}.txt") for name in LOCKED_EXTRAS}
    for name, extras in LOCKED_EXTRAS.items():
        pins = locks[name]
        for requirement in requirements(pyproject, extras):
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            pinned = pins.get(canonicalize_name(requirement.name))
            if pinned is None:
                problems.append(f"requirements/{name}.txt: {requirement} is not locked")
            elif not requirement.specifier.contains(pinned, prereleases=True):
                problems.append(
                    f"requirements/{name}.txt: {requirement.name}=={pinned} is outside "
                    f"pyproject.toml's {requirement}"
                )
    for package, version in locks["base"].items():
        if locks["all"].get(package) != version:
            problems.append(
                f"requirements/base.txt: {package}=={version}, but all.txt has "
                f"{locks['all'].get(package)}"
            )
    return problems


def venv_problems(lock: Path) -> list[str]:
    """Every package the running interpreter holds at another version than ``lock`` pins (with
    the no-deps files installed over it, ``NO_DEPS``)."""
    pins = read_lock(lock)
    for extra in NO_DEPS.get(lock.stem, ()):
        if (lock.parent / f"{extra}.txt").exists():
            pins |= read_lock(lock.parent / f"{extra}.txt")
    installed = {
        canonicalize_name(dist.metadata["Name"]): Version(dist.version)
        for dist in metadata.distributions()
    }
    problems = []
    for package, version in sorted(pins.items()):
        have = installed.get(package)
        if have != version:
            problems.append(f"{package}: {lock.name} pins {version}, installed {have}")
    for package, version in sorted(installed.items()):
        if package not in pins and package not in UNLOCKED:
            problems.append(f"{package}=={version} is installed but not in {lock.name}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", choices=sorted(LOCKED_EXTRAS), help="check this interpreter")
    args = parser.parse_args()
    problems = lock_problems()
    if args.venv:
        problems += venv_problems(LOCKS / f"{args.venv}.txt")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("the locks disagree: run `make lock` (or reinstall the venv)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
