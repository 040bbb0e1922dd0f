"""scripts/setup-tools.sh: installs what is missing, or stops with the one command to run.

The script runs for real, with a PATH of stand-ins: which tools exist, who we are (``id``),
``sudo`` and ``apt-get`` (they record their arguments instead of installing packages on the
shared build machine, which a test must not do).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "setup-tools.sh"


def _stub(bin_dir: Path, name: str, body: str = "exit 0") -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(bin_dir: Path, *args: str, uid: int) -> subprocess.CompletedProcess[str]:
    _stub(bin_dir, "id", f"echo {uid}")
    (bin_dir / "env").symlink_to("/usr/bin/env")
    return subprocess.run(
        ["/bin/bash", str(SCRIPT), *args],
        env={"PATH": str(bin_dir), "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """Stand-ins with redis-server present, bubblewrap and g++ missing."""
    path = tmp_path / "bin"
    path.mkdir()
    _stub(path, "redis-server")
    return path


def _apt(bin_dir: Path, log: Path) -> None:
    _stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
def test_nothing_missing_is_silent(bin_dir: Path) -> None:
    for name in ("bwrap", "g++", "prometheus"):
        _stub(bin_dir, name)
    run = _run(bin_dir, uid=1000)
    if "python3-sortedcontainers" in run.stderr:
        pytest.skip("this machine's sandbox Python lacks sortedcontainers")
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


@pytest.mark.parametrize("browser", [True, False])
def test_make_test_also_needs_the_browser(bin_dir: Path, tmp_path: Path, browser: bool) -> None:
    # `make test` (--browser): the reward inspector's tests drive Debian's chromium through
    # its chromedriver; `make up` does not install a browser.
    for name in ("bwrap", "g++"):
        _stub(bin_dir, name)
    log = tmp_path / "apt.log"
    _apt(bin_dir, log)
    run = _run(bin_dir, *(["--browser"] if browser else []), uid=0)
    assert run.returncode == 0, run.stderr
    installed = log.read_text() if log.exists() else ""
    assert ("chromium chromium-driver" in installed) is browser


def test_a_user_without_sudo_gets_the_one_command(bin_dir: Path, tmp_path: Path) -> None:
    _apt(bin_dir, tmp_path / "apt.log")
    run = _run(bin_dir, uid=1000)
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[0].startswith("setup: missing system tools: bubblewrap g++")
    assert lines[1].strip().startswith("sudo apt-get install -y bubblewrap g++")
    assert not (tmp_path / "apt.log").exists()


def test_root_installs_with_apt_get(bin_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "apt.log"
    _apt(bin_dir, log)
    run = _run(bin_dir, uid=0)
    assert run.returncode == 0, run.stderr
    update, install = log.read_text().splitlines()
    assert update == "apt-get update -qq"
    assert install.startswith("apt-get install -y -qq --no-install-recommends bubblewrap g++")


def test_a_user_with_passwordless_sudo_installs_through_it(bin_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "apt.log"
    _apt(bin_dir, log)
    _stub(bin_dir, "sudo", f'echo "sudo $*" >> {tmp_path}/sudo.log\nshift\nexec "$@"')
    _stub(bin_dir, "true")
    run = _run(bin_dir, uid=1000)
    assert run.returncode == 0, run.stderr
    calls = (tmp_path / "sudo.log").read_text().splitlines()
    assert calls[0] == "sudo -n true" and calls[-1].startswith("sudo -n env DEBIAN_FRONTEND")
    assert "bubblewrap g++" in log.read_text()


def test_a_failed_install_says_what_to_run(bin_dir: Path, tmp_path: Path) -> None:
    _stub(bin_dir, "apt-get", "exit 100")
    run = _run(bin_dir, uid=0)
    assert run.returncode == 1
    assert "sudo apt-get install -y bubblewrap g++" in run.stderr


def test_no_apt_get_names_the_packages(bin_dir: Path) -> None:
    run = _run(bin_dir, uid=0)
    assert run.returncode == 1 and "missing bubblewrap g++" in run.stderr
