"""sandbox.py: bwrap argv, slot uids, rlimits and the sweep of leftover processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tribunal.code.cgroup import JOIN, SERVICE_LEAF, MemoryCgroups
from tribunal.code.config import CodeConfig
from tribunal.code.sandbox import SlotPool, bwrap_argv, kill_uid, processes_of_uid


def test_bwrap_argv_isolates_everything() -> None:
    argv = bwrap_argv(CodeConfig(tmpfs_mb=32), ["/usr/bin/python3", "-I", "-S"])
    joined = " ".join(argv)
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--as-pid-1",
        "--cap-drop ALL",
    ):
        assert flag in joined
    assert "--share-net" not in argv
    # --size applies to the next --tmpfs; / and /dev end read-only; the command comes last.
    assert joined.count("--size") == joined.count("--tmpfs") == 3
    assert f"--size {32 << 20} --tmpfs /tmp" in joined
    assert "--remount-ro /dev" in joined and argv[-5:-3] == ["/", "--"]
    assert "/root" not in joined and "/home" not in joined and "/work" not in joined


@pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids need root")
async def test_uid_blocks_are_disjoint_between_pools(tmp_path: object) -> None:
    config = CodeConfig(slots=2, uid_base=63000)
    first, second = SlotPool(config, str(tmp_path)), SlotPool(config, str(tmp_path))
    try:
        assert set(first.uids).isdisjoint(second.uids)
        assert first.uids == [63000, 63001, 63002, 63003]
        assert second.uids == [63004, 63005, 63006, 63007]
    finally:
        first.close()
        second.close()
    third = SlotPool(config, str(tmp_path))
    assert third.uids == [63000, 63001, 63002, 63003]
    small = SlotPool(CodeConfig(slots=1, uid_base=63000), str(tmp_path))
    try:
        assert set(small.uids).isdisjoint(third.uids)  # pools of other sizes never overlap
    finally:
        small.close()
        third.close()
    assert list(Path(str(tmp_path)).iterdir()) == []  # no lock file left behind


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another uid")
def test_kill_uid_kills_only_that_uid() -> None:
    uid = 63500
    proc = subprocess.Popen(["/bin/sleep", "60"], user=uid, group=uid)
    try:
        deadline = time.monotonic() + 2
        while proc.pid not in processes_of_uid(uid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert kill_uid(uid) == 1
        assert proc.wait(timeout=5) == -9
        assert os.getpid() not in processes_of_uid(uid)
    finally:
        proc.kill()


def _orphan(uid: int) -> int:
    """A process of ``uid`` that is not this process's descendant (its parent exited): what
    a sandbox of a code worker in a container without a user namespace is, seen from the host."""
    shell = subprocess.run(
        ["/bin/sh", "-c", "/bin/sleep 60 >/dev/null 2>&1 & echo $!"],
        user=uid,
        group=uid,
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(shell.stdout)
    deadline = time.monotonic() + 2
    while pid not in processes_of_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pid in processes_of_uid(uid)
    return pid


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another uid")
def test_a_sweep_spares_a_process_of_the_uid_that_is_not_its_own() -> None:
    # A sandbox of a containerised code worker runs as the same host uid as this service's
    # slot: sweeping every process of the uid killed it mid-item (the compose test's
    # "killed by SIGKILL" sandbox_error while the host's suite ran).
    uid = 63510
    pid = _orphan(uid)
    try:
        assert kill_uid(uid) == 0
        assert processes_of_uid(uid) == [pid]
        # Without pid namespaces (isolation none), a program's daemon is nobody's child.
        assert kill_uid(uid, descendants_only=False) == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids need root")
def test_a_pool_skips_a_block_whose_uids_run_another_services_processes(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    pid = _orphan(63601)
    try:
        pool = SlotPool(CodeConfig(slots=1, uid_base=63600), str(tmp_path))
        try:
            assert pool.uids == [63602, 63603]
        finally:
            pool.close()
        assert "slot uids 63600-63601 run processes of another service" in caplog.text
        assert processes_of_uid(63601) == [pid]  # claimed around, not killed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_memory_cgroups_are_made_and_what_a_dead_service_left_is_removed() -> None:
    cgroups = MemoryCgroups.detect()
    if cgroups.version is None or cgroups.base is None:
        pytest.skip(f"no memory cgroup on this host: {cgroups.reason}")
    dead = _a_dead_pid()
    orphan = Path(cgroups.base) / f"tribunal-{dead}-0"
    orphan.mkdir()
    cgroup = MemoryCgroups.detect().create(64 << 20)
    assert not orphan.exists()
    assert cgroup is not None and cgroup.oom_kills() == 0
    limit = "memory.max" if cgroup.version == 2 else "memory.limit_in_bytes"
    assert (Path(cgroup.path) / limit).read_text().strip() == str(64 << 20)
    assert cgroup.remove() and not Path(cgroup.path).exists()


_DETECT = """
import contextlib
import json
from tribunal.code.cgroup import MemoryCgroups
cgroups = MemoryCgroups.detect()
sandbox = cgroups.create(64 << 20)
with open("/proc/self/cgroup") as f:
    own = f.read().split("::")[-1].strip()
print(json.dumps({"version": cgroups.version, "base": cgroups.base, "reason": cgroups.reason,
                  "own": own, "sandbox": sandbox and sandbox.path}))
if sandbox is not None:
    sandbox.remove()
"""


def test_a_delegated_cgroup_v2_is_set_up_by_moving_its_processes_into_a_leaf() -> None:
    """A service started in a cgroup v2 that systemd delegated to it (``Delegate=yes``: the
    ``trusted.delegate`` mark), which holds the service's processes, cannot give ``memory``
    to children until it holds none: the service moves its processes into a leaf and makes
    each sandbox's cgroup beside it. An unmarked cgroup is left alone. Runs where this test
    can make cgroup v2 children (root on a v2 host: the GPU machine, not the build machine)."""
    outer = MemoryCgroups.detect()
    if outer.version != 2 or outer.base is None or os.geteuid() != 0:
        pytest.skip(f"needs root and a memory cgroup v2 here ({outer.reason or 'v1'})")
    results = {}
    for marked in (False, True):
        unit = Path(outer.base) / f"tribunal-unit-{os.getpid()}-{int(marked)}"
        unit.mkdir()
        try:
            if marked:
                os.setxattr(unit, "trusted.delegate", b"1")
            child = subprocess.run(
                [*JOIN, str(unit / "cgroup.procs"), sys.executable, "-c", _DETECT],
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            results[marked] = json.loads(child.stdout)
        finally:
            for leaf in (unit / SERVICE_LEAF, unit):
                if leaf.exists():
                    leaf.rmdir()
    unmarked, delegated = results[False], results[True]
    assert unmarked["version"] is None and "not delegated" in unmarked["reason"]
    assert unmarked["own"].endswith(f"tribunal-unit-{os.getpid()}-0")
    assert delegated["version"] == 2, delegated
    assert delegated["base"].endswith(f"tribunal-unit-{os.getpid()}-1")
    assert delegated["own"].endswith(f"tribunal-unit-{os.getpid()}-1/{SERVICE_LEAF}")
    assert Path(delegated["sandbox"]).parent == Path(delegated["base"])


def _a_dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
