"""Check that pyproject.toml, the locks and the venv agree.

    python scripts/check_lock.py            pyproject.toml against requirements/*.txt
    python scripts/check_lock.py --venv all the running interpreter's packages against all.txt
                                            and trainers-nodeps.txt

The locks (``make lock``, scripts/lock.sh) must pin every requirement pyproject.toml names, at a
version its specifier admits: a dependency added, or a range moved past the pinned version,
without ``make lock`` fails here. ``base.txt`` must pin what ``all.txt`` pins. With ``--venv``,
the interpreter running this must hold exactly one lock's packages at its versions (nothing
missing, nothing else but Tribunal itself and pip); the ``all`` venv holds the trainers' packages
of ``trainers-nodeps.txt`` too (installed without their dependencies; kept by hand: one
``name==version --hash=sha256:...`` a line, sorted, none of them in ``all.txt``). Exit status 1
with one line per problem.
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
    "trainer": ("trainer",),
    "all": (
        "dev",
        "judge-local",
        "trainer",
        "trl",
        "compose",
        "docs",
        "protocols",
        "load",
        "browser",
    ),
}
# Installed in every venv but not part of any lock: the project's two distributions and pip.
UNLOCKED = {"tribunal-rl", "tribunal-client", "pip"}
# Hand-kept pins installed with --no-deps into the venv of these locks (make's .venv/.all).
NODEPS = LOCKS / "trainers-nodeps.txt"
NODEPS_VENVS = {"all"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def read_lock(path: Path) -> dict[str, Version]:
    """The ``name==version`` pins of a compiled requirements file, by canonical name."""
    pins: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def nodeps_problems(path: Path, lock: dict[str, Version]) -> list[str]:
    """What is wrong with the hand-kept no-deps file ``path`` (see the module docstring), given
    the compiled lock ``lock`` its packages are installed beside."""
    problems = []
    names = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _PIN.match(line)
        where = f"{path.name}:{number}"
        if match is None:
            problems.append(f"{where}: not `name==version --hash=sha256:...`: {line!r}")
            continue
        name = canonicalize_name(match[1])
        names.append(name)
        if not re.search(r"\s--hash=sha256:[0-9a-f]{64}\b", line):
            problems.append(f"{where}: {match[1]} has no --hash=sha256: on its line")
        if name in lock:
            problems.append(f"{where}: {match[1]} is also in the compiled lock; keep it in one")
    if names != sorted(names):
        problems.append(f"{path.name}: the packages are not sorted by name")
    if len(set(names)) != len(names):
        problems.append(f"{path.name}: a package is pinned twice")
    return problems


def requirements(pyproject: dict[str, object], extras: tuple[str, ...]) -> list[Requirement]:
    """The requirements a lock compiled with ``extras`` must satisfy, build system included."""
    project = pyproject["project"]
    build = pyproject["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    names = [
        n for n in project["dependencies"] if canonicalize_name(Requirement(n).name) not in UNLOCKED
    ]
    names += list(build["requires"])
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
    nodeps = root / "requirements" / NODEPS.name
    if nodeps.exists():
        problems += nodeps_problems(nodeps, locks["all"])
    for package, version in locks["base"].items():
        if locks["all"].get(package) != version:
            problems.append(
                f"requirements/base.txt: {package}=={version}, but all.txt has "
                f"{locks['all'].get(package)}"
            )
    return problems


def venv_problems(lock: Path, nodeps: Path | None = None) -> list[str]:
    """Every package the running interpreter holds at another version than ``lock`` pins (or
    the no-deps file ``nodeps``, when given, pins beside it)."""
    pins = read_lock(lock)
    if nodeps is not None:
        pins |= read_lock(nodeps)
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
            names = lock.name + (f" or {nodeps.name}" if nodeps is not None else "")
            problems.append(f"{package}=={version} is installed but not in {names}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", choices=sorted(LOCKED_EXTRAS), help="check this interpreter")
    args = parser.parse_args()
    problems = lock_problems()
    if args.venv:
        nodeps = NODEPS if args.venv in NODEPS_VENVS else None
        problems += venv_problems(LOCKS / f"{args.venv}.txt", nodeps)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("the locks disagree: run `make lock` (or reinstall the venv)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
