"""The locks: pyproject.toml and requirements/*.txt agree, the check catches each way they can
drift apart, and the command that needs an extra names it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

pytestmark = pytest.mark.slow


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
    torch = ROOT / "requirements/torch.txt"
    assert check_lock.venv_problems(ROOT / "requirements/all.txt", torch) == []


def test_every_pin_has_a_hash() -> None:
    for lock in ("base", "all"):
        lines = (ROOT / f"requirements/{lock}.txt").read_text().splitlines()
        pins = [n for n, line in enumerate(lines) if check_lock._PIN.match(line)]
        assert len(pins) == len(check_lock.read_lock(ROOT / f"requirements/{lock}.txt")) > 40
        for n in pins:
            assert lines[n + 1].strip().startswith("--hash=sha256:"), lines[n]


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


@pytest.fixture
def pypi() -> None:
    """Skips the test where https://pypi.org cannot be reached (the `pypi` marker says which)."""
    try:
        httpx.head("https://pypi.org/simple/pip/", timeout=10).raise_for_status()
    except httpx.HTTPError as error:
        pytest.skip(f"https://pypi.org cannot be reached: {error}")


def _pip_without_this_machine(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``pip install --dry-run ARGS`` with this machine's pip configuration off: no config file
    (its find-links, extra indexes and constraint file), no PIP_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    command += ["--no-deps", "--quiet", "--report", "report.json", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.pypi
@pytest.mark.usefixtures("pypi")
def test_every_hashed_pin_is_a_pypi_file_for_each_supported_python() -> None:
    # One index page per package (PEP 691 JSON): the locked hashes name a file that installs on
    # CPython 3.11 and 3.12, Linux x86_64.
    assert check_lock.index_problems() == []


@pytest.mark.pypi
@pytest.mark.usefixtures("pypi")
def test_pip_installs_torch_from_its_index_alone(tmp_path: Path) -> None:
    # PyTorch's index stood in for by a PEP 503 index in a folder, holding the one cached wheel.
    wheel = next(Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl"), None)
    if wheel is None:
        pytest.skip("no cached torch wheel under /opt/wheels to stand in for PyTorch's index")
    index = tmp_path / "simple"
    (index / "torch").mkdir(parents=True)
    (index / "torch/index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>')
    torch = ["--index-url", index.as_uri(), "-r", str(ROOT / "requirements/torch.txt")]
    done = _pip_without_this_machine(torch, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [item["metadata"]["version"] for item in report["install"]] == ["2.13.0+cpu"]


@pytest.mark.pypi
@pytest.mark.usefixtures("pypi")
def test_a_pin_hashed_for_one_python_only_is_caught(tmp_path: Path) -> None:
    # openrlhf 0.11.2 has a wheel per Python: its cp311 hash alone installs on 3.11 only.
    (tmp_path / "requirements/trainer-envs").mkdir(parents=True)
    for lock in check_lock.HASHED_LOCKS:
        (tmp_path / f"requirements/{lock}.txt").write_text("")
    cp311 = "c969d70db03a70724c3d8a5a01186c6e0728bce624fb3dff95e39b5396acefa6"
    lock = tmp_path / "requirements/trainer-envs/openrlhf.txt"
    lock.write_text(f"openrlhf==0.11.2 \\\n    --hash=sha256:{cp311}\n")
    problems = check_lock.index_problems(tmp_path)
    assert len(problems) == 1 and "installs on CPython 3.12.0" in problems[0], problems
