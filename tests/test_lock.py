"""The locks: pyproject.toml and requirements/*.txt agree, the check catches each way they can
drift apart, and the command that needs an extra names it."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts/check_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_lock = _check_lock()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of pyproject.toml and the locks to change."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    return tmp_path


def test_the_committed_locks_agree_with_pyproject() -> None:
    assert check_lock.lock_problems() == []


def test_this_venv_holds_exactly_the_lock() -> None:
    nodeps = ROOT / "requirements/trainers-nodeps.txt"
    assert check_lock.venv_problems(ROOT / "requirements/all.txt", nodeps) == []


def test_a_trainer_package_outside_the_no_deps_file_is_caught(tmp_path: Path) -> None:
    nodeps = tmp_path / "trainers-nodeps.txt"
    nodeps.write_text("# none\n")
    problems = check_lock.venv_problems(ROOT / "requirements/all.txt", nodeps)
    assert any(p.startswith("openrlhf==") and "not in all.txt or" in p for p in problems)


def test_a_no_deps_pin_without_a_hash_or_out_of_order_is_caught(project: Path) -> None:
    nodeps = project / "requirements/trainers-nodeps.txt"
    nodeps.write_text("zeta==1.0 --hash=sha256:" + "0" * 64 + "\nalpha==2.0\nfastapi==0.1 \\\n")
    problems = check_lock.lock_problems(project)
    assert any(":2: alpha has no --hash" in p for p in problems), problems
    assert any("not sorted" in p for p in problems), problems
    assert any(":3: fastapi is also in the compiled lock" in p for p in problems), problems


def test_every_pin_has_a_hash() -> None:
    for lock in ("base", "all"):
        lines = (ROOT / f"requirements/{lock}.txt").read_text().splitlines()
        pins = [n for n, line in enumerate(lines) if check_lock._PIN.match(line)]
        assert len(pins) == len(check_lock.read_lock(ROOT / f"requirements/{lock}.txt")) > 40
        for n in pins:
            assert lines[n + 1].strip().startswith("--hash=sha256:"), lines[n]


def test_the_no_deps_pins_are_sorted_and_hashed() -> None:
    for name in ("trainers-nodeps", "verl-hydra"):
        lines = (ROOT / f"requirements/{name}.txt").read_text().splitlines()
        pins = [line for line in lines if line and not line.startswith("#")]
        assert pins and pins == sorted(pins)
        for line in pins:
            assert re.fullmatch(r"[A-Za-z0-9._-]+==\S+ --hash=sha256:[0-9a-f]{64}", line), line


def test_a_dependency_added_without_locking_is_caught(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"pyyaml>=6.0",', '"pyyaml>=6.0", "tqdm>=4",')
    )
    problems = check_lock.lock_problems(project)
    assert any("base.txt: tqdm>=4 is not locked" in p for p in problems), problems


def test_a_range_moved_past_the_pin_is_caught(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"fastapi>=0.115"', '"fastapi>=999"'))
    problems = check_lock.lock_problems(project)
    assert any("fastapi==" in p and "outside" in p for p in problems), problems


def test_an_extra_no_lock_compiles_is_caught(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text().replace("dev = [", 'newextra = ["httpx"]\ndev = [')
    pyproject.write_text(text)
    assert any("'newextra' is in no lock" in p for p in check_lock.lock_problems(project))


def test_base_pinned_apart_from_all_is_caught(project: Path) -> None:
    base = project / "requirements/base.txt"
    pinned = check_lock.read_lock(base)["fastapi"]
    base.write_text(base.read_text().replace(f"fastapi=={pinned}", "fastapi==0.115.0"))
    problems = check_lock.lock_problems(project)
    assert any("base.txt: fastapi==0.115.0, but all.txt has" in p for p in problems), problems


def test_a_package_outside_the_lock_is_caught(tmp_path: Path) -> None:
    lock = tmp_path / "all.txt"
    lock.write_text("pytest==0.0.1 \\\n    --hash=sha256:00\n")
    problems = check_lock.venv_problems(lock)
    assert any(p.startswith("pytest: all.txt pins 0.0.1, installed") for p in problems)
    assert any(p.startswith("pydantic==") and "not in all.txt" in p for p in problems)


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_a_trainer_command_without_its_extra_names_the_extra(command: str) -> None:
    # deepspeed made unimportable, as in an install without the trainer extra.
    code = (
        "import sys; sys.modules['deepspeed'] = None\n"
        "from tribunal.cli import main\n"
        f"sys.argv = ['tribunal', '{command}', '--config', 'c.yaml', "
        "'--output-dir' if sys.argv[1] == 'train' else '--model', 'out']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"tribunal {command} needs the trainer extra (missing: deepspeed): "
        "pip install 'tribunal-rl[trainer]'"
    ) in done.stderr
    assert "Traceback" not in done.stderr
