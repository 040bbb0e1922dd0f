"""Check that pyproject.toml, the locks and the venv agree.

    python scripts/check_lock.py            pyproject.toml against requirements/*.txt
    python scripts/check_lock.py --venv all the running interpreter's packages against all.txt
    python scripts/check_lock.py --index    every hashed pin against PyPI's index (network)

The locks (``make lock``, scripts/lock.sh) must pin every requirement pyproject.toml names, at a
version its specifier admits: a dependency added, or a range moved past the pinned version,
without ``make lock`` fails here. ``base.txt`` must pin what ``all.txt`` pins. With ``--venv``,
the interpreter running this must hold exactly one lock's packages at its versions (nothing
missing, nothing else but Tribunal itself and pip). torch is pinned
in ``torch.txt`` alone (its build comes from PyTorch's index, which decides the local version
label: ``2.13.0`` is met by ``2.13.0+cpu`` or ``2.13.0+cu128``); it counts as part of the locks
that hold the trainer. With ``--index``, every hashed pin must name, among its hashes, a file
that PyPI's simple index lists and that installs on each supported Python (``SUPPORTED_PYTHONS``,
Linux x86_64): a wheel whose tags that CPython accepts, or the sdist. Exit status 1 with one line
per problem.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import httpx
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
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
# torch's own pin (no hash: see the file), part of these locks.
TORCH = LOCKS / "torch.txt"
TORCH_LOCKS = {"all", "trainer"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")

# The Pythons every hashed lock must install on (pyproject.toml's requires-python is >=3.11), on
# Linux x86_64 with glibc 2.28 or newer: the floor of torch's manylinux_2_28 wheels, and the
# code sandbox needs Linux (bubblewrap, seccomp, cgroups).
SUPPORTED_PYTHONS = ((3, 11, 5), (3, 12, 0))
PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
PYPI_SIMPLE = "https://pypi.org/simple"
_PEP_691_JSON = "application/vnd.pypi.simple.v1+json"
# The trainers' own venvs' locks (scripts/trainer_envs.sh) are hashed PyPI pins too.
HASHED_LOCKS = ("all", "base", "trainer", "trainer-envs/verl", "trainer-envs/openrlhf")


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
    torch = read_lock(root / "requirements" / TORCH.name)
    for name in TORCH_LOCKS:
        problems += [
            f"requirements/{name}.txt: {package} is pinned in {TORCH.name}; keep it there alone"
            for package in torch
            if package in locks[name]
        ]
        locks[name] |= torch
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


def read_hashes(path: Path) -> dict[tuple[str, Version], set[str]]:
    """The sha256 hashes of each ``name==version`` pin of a hashed requirements file (on the
    pin's line or its ``\\`` continuation lines)."""
    hashes: dict[tuple[str, Version], set[str]] = {}
    pin: tuple[str, Version] | None = None
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pin = (canonicalize_name(match[1]), Version(match[2]))
            hashes[pin] = set()
        elif not line.startswith(" "):
            pin = None
        if pin is not None:
            hashes[pin].update(_HASH.findall(line))
    return hashes


def _supported_tags(python: tuple[int, ...]) -> set[Tag]:
    interpreter = f"cp{python[0]}{python[1]}"
    return set(cpython_tags(python[:2], platforms=PLATFORMS)) | set(
        compatible_tags(python[:2], interpreter, PLATFORMS)
    )


def _installs_on(file: dict[str, object], version: Version, python: tuple[int, ...]) -> bool:
    """Whether an index entry (PEP 691 JSON) of the release ``version`` installs on ``python``."""
    name = str(file["filename"])
    requires = file.get("requires-python")
    if requires and Version(".".join(map(str, python))) not in SpecifierSet(str(requires)):
        return False
    try:
        _, wheel_version, _, tags = parse_wheel_filename(name)
    except InvalidWheelFilename:
        try:
            return parse_sdist_filename(name)[1] == version
        except InvalidSdistFilename:
            return False
    return wheel_version == version and not tags.isdisjoint(_supported_tags(python))


def _pin_problems(
    client: httpx.Client, pin: tuple[str, Version], hashes: set[str], index: str
) -> Iterator[str]:
    name, version = pin
    reply = client.get(
        f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    if reply.status_code != 200:
        yield f"{name}=={version}: {index}/{name}/ answered {reply.status_code}"
        return
    files = [f for f in reply.json()["files"] if f["hashes"].get("sha256") in hashes]
    for python in SUPPORTED_PYTHONS:
        if not any(_installs_on(file, version, python) for file in files):
            yield (
                f"{name}=={version}: none of its {len(hashes)} locked hashes is a file of {index} "
                f"that installs on CPython {'.'.join(map(str, python))} (Linux x86_64)"
            )


def index_problems(root: Path = ROOT, index: str = PYPI_SIMPLE) -> list[str]:
    """Every hashed pin (``HASHED_LOCKS``) with no file on ``index`` (PEP 691) that carries one of
    its hashes and installs on each of ``SUPPORTED_PYTHONS``; one index request per package.

    Raises:
        httpx.HTTPError: the index could not be reached.
    """
    pins: dict[tuple[str, Version], set[str]] = {}
    for lock in HASHED_LOCKS:
        for pin, hashes in read_hashes(root / "requirements" / f"{lock}.txt").items():
            pins.setdefault(pin, set()).update(hashes)
    with httpx.Client(timeout=60, follow_redirects=True) as client, ThreadPoolExecutor(8) as pool:
        found = pool.map(lambda pin: list(_pin_problems(client, pin, pins[pin], index)), list(pins))
        return [problem for problems in found for problem in problems]


def venv_problems(lock: Path, torch: Path | None = None) -> list[str]:
    """Every package the running interpreter holds at another version than ``lock`` pins (or
    the torch pin ``torch``, when given, pins beside it; torch's local version label, its
    build, is the index's choice)."""
    pins = read_lock(lock)
    builds = read_lock(torch) if torch is not None else {}
    pins |= builds
    installed = {
        canonicalize_name(dist.metadata["Name"]): Version(dist.version)
        for dist in metadata.distributions()
    }
    problems = []
    for package, version in sorted(pins.items()):
        have = installed.get(package)
        if package in builds and have is not None:
            have = Version(have.public)
        if have != version:
            problems.append(f"{package}: {lock.name} pins {version}, installed {have}")
    for package, version in sorted(installed.items()):
        if package not in pins and package not in UNLOCKED:
            names = " or ".join([lock.name, *([torch.name] if torch is not None else [])])
            problems.append(f"{package}=={version} is installed but not in {names}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", choices=sorted(LOCKED_EXTRAS), help="check this interpreter")
    parser.add_argument("--index", action="store_true", help="check the hashes against PyPI")
    args = parser.parse_args()
    problems = lock_problems()
    if args.index:
        problems += index_problems()
    if args.venv:
        torch = TORCH if args.venv in TORCH_LOCKS else None
        problems += venv_problems(LOCKS / f"{args.venv}.txt", torch)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("the locks disagree: run `make lock` (or reinstall the venv)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
