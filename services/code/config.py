"""Domain configuration of the code runner (a frozen dataclass, hashable and hashed)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Isolation = Literal["bwrap", "none"]

CXX_FLAGS: tuple[str, ...] = ("-std=gnu++17", "-O2", "-pipe", "-w")
"""g++ flags of every C++ compile (after the compiler path, before the source)."""


def _default_slots() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class CodeConfig:
    """How programs are isolated, limited and run.

    Attributes:
        isolation: ``bwrap`` (namespaces, the only production mode) or ``none`` (plain
            subprocesses with rlimits, for local development only: logged loudly and reported
            in every result's ``details.isolation``).
        slots: Concurrent sandboxes (one submission each); each slot runs as its own host uid.
        uid_base: Slot k runs as host uid ``uid_base + k`` (when the service runs as root).
        bwrap_path: The bubblewrap binary.
        python_path: The interpreter inside the sandbox, started as ``python3 -I -S``.
        gxx_path: The C++ compiler; C++ is refused when it is missing.
        python_paths: Directories appended to the sandboxed Python's ``sys.path`` (``-S``
            drops site-packages); the default is Debian's, for ``python3-sortedcontainers``
            (LeetCode solutions import it).
        default_timeout_s: Wall-clock limit per test case when the item sets none.
        max_timeout_s: Largest per-case limit an item may ask for (larger values are clamped).
        default_memory_mb: Address-space limit per process when the item sets none (MiB).
        max_memory_mb: Largest memory limit an item may ask for (MiB).
        default_max_output_bytes: Cap on stdout and on stderr per case when the item sets none.
        max_output_bytes: Largest output cap an item may ask for.
        max_processes: RLIMIT_NPROC of a slot uid (processes and threads of one sandbox).
        max_file_size_mb: RLIMIT_FSIZE: largest file a program may write (MiB).
        max_open_files: RLIMIT_NOFILE.
        tmpfs_mb: Size of each writable tmpfs (``/box``, ``/tmp``; ``/dev/shm`` is a quarter).
        compile_timeout_s: Wall-clock limit of one C++ compile.
        compile_memory_mb: Address-space limit of the compiler (MiB).
        max_item_s: Hard wall-clock limit of one whole item, whatever its cases ask for.
    """

    isolation: Isolation = "bwrap"
    slots: int = field(default_factory=_default_slots)
    uid_base: int = 61000
    bwrap_path: str = "/usr/bin/bwrap"
    python_path: str = "/usr/bin/python3"
    gxx_path: str = "/usr/bin/g++"
    python_paths: tuple[str, ...] = ("/usr/lib/python3/dist-packages",)
    default_timeout_s: float = 5.0
    max_timeout_s: float = 30.0
    default_memory_mb: int = 512
    max_memory_mb: int = 4096
    default_max_output_bytes: int = 1 << 20
    max_output_bytes: int = 16 << 20
    max_processes: int = 64
    max_file_size_mb: int = 16
    max_open_files: int = 256
    tmpfs_mb: int = 64
    compile_timeout_s: float = 30.0
    compile_memory_mb: int = 2048
    max_item_s: float = 300.0

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        if self.default_timeout_s > self.max_timeout_s:
            raise ValueError("default_timeout_s exceeds max_timeout_s")
        if self.default_memory_mb > self.max_memory_mb:
            raise ValueError("default_memory_mb exceeds max_memory_mb")
        if self.default_max_output_bytes > self.max_output_bytes:
            raise ValueError("default_max_output_bytes exceeds max_output_bytes")

    def hashed_fields(self) -> dict[str, Any]:
        """Everything that can move a verdict (not ``slots``, ``uid_base`` or paths' hosts)."""
        fields = asdict(self)
        for name in ("slots", "uid_base", "bwrap_path"):
            fields.pop(name)
        fields["cxx_flags"] = list(CXX_FLAGS)
        return fields
