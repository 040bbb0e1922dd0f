"""Domain configuration of the code runner: one frozen model, hashable and hashed, defaults here
only. The service's settings (``tribunal.code.settings``) extend it, so that every field is
also ``TRIBUNAL_CODE_<FIELD>``."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Isolation = Literal["bwrap", "none"]

CXX_FLAGS: tuple[str, ...] = ("-std=gnu++17", "-O2", "-pipe", "-w")
"""g++ flags of every C++ compile (after the compiler path, before the source)."""


class CodeConfig(BaseModel):
    """How programs are isolated, limited and run (each field documents itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    isolation: Isolation = Field(
        default="bwrap",
        description="bwrap: every program in a bubblewrap sandbox (namespaces; the only "
        "production mode). none: plain subprocesses with rlimits, for local development only "
        "(logged loudly and reported in every result's details.isolation).",
    )
    seccomp: bool = Field(
        default=True,
        description="Install a seccomp filter on every process of a program, refusing the "
        "system calls no test program needs (SysV shared memory and queues, memfd, POSIX "
        "mqueues, io_uring, keyrings, sockets other than AF_UNIX, bpf, userfaultfd, "
        "perf_event_open, ptrace): built with libseccomp at start, which must then load. "
        "false: the namespaces, rlimits and per-case clean-up only.",
    )
    case_namespaces: bool = Field(
        default=True,
        description="Run each stdio case of a multi-case item in pid, mount, IPC and network "
        "namespaces of its own (about 1 ms of CPU per case, where the host allows them; "
        "`/readyz` says whether it does). false: the per-case clean-up alone, as on a host "
        "that refuses them; the random case order keeps any counter from naming a case either "
        "way.",
    )
    slots: int = Field(
        default=0,
        ge=0,
        validate_default=True,
        description="Concurrent sandboxes (one submission each) per process, each running as "
        "its own host uid; 0 = one per core.",
    )
    uid_base: int = Field(
        default=61000,
        ge=1000,
        description="Slot k runs as host uid uid_base + k (when the service runs as root).",
    )
    bwrap_path: str = Field(default="/usr/bin/bwrap", description="The bubblewrap binary.")
    python_path: str = Field(
        default="/usr/bin/python3",
        description="The interpreter inside the sandbox, started as python3 -I -S.",
    )
    gxx_path: str = Field(
        default="/usr/bin/g++", description="The C++ compiler; C++ is refused when it is missing."
    )
    python_paths: tuple[str, ...] = Field(
        default=("/usr/lib/python3/dist-packages",),
        description="Directories appended to the sandboxed Python's sys.path (-S drops "
        "site-packages; JSON list); the default is Debian's, for python3-sortedcontainers "
        "(LeetCode solutions import it).",
    )
    default_timeout_s: float = Field(
        default=5.0, gt=0, description="Wall-clock limit per test case when the item sets none."
    )
    max_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Largest per-case limit an item may ask for (larger values are clamped).",
    )
    default_memory_mb: int = Field(
        default=512, gt=0, description="Address space per process when the item sets none (MiB)."
    )
    max_memory_mb: int = Field(
        default=4096, gt=0, description="Largest memory limit an item may ask for (MiB)."
    )
    default_max_output_bytes: int = Field(
        default=1 << 20, gt=0, description="Cap on stdout and on stderr per case by default."
    )
    max_output_bytes: int = Field(
        default=16 << 20, gt=0, description="Largest output cap an item may ask for."
    )
    max_processes: int = Field(
        default=64, ge=8, description="RLIMIT_NPROC of a slot uid (processes and threads)."
    )
    max_file_size_mb: int = Field(
        default=16, gt=0, description="RLIMIT_FSIZE: largest file a program may write (MiB)."
    )
    max_open_files: int = Field(default=256, ge=32, description="RLIMIT_NOFILE.")
    tmpfs_mb: int = Field(
        default=64,
        gt=0,
        description="Size of each writable tmpfs (/box, /tmp; /dev/shm is a quarter), MiB.",
    )
    compile_timeout_s: float = Field(
        default=30.0, gt=0, description="Wall-clock limit of one C++ compile."
    )
    compile_memory_mb: int = Field(
        default=2048, gt=0, description="Address-space limit of the compiler (MiB)."
    )
    max_item_s: float = Field(
        default=300.0,
        gt=0,
        description="Hard wall-clock limit of one whole item, whatever its cases ask for.",
    )

    @field_validator("slots")
    @classmethod
    def _zero_is_one_per_core(cls, slots: int) -> int:
        return slots or os.cpu_count() or 1

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> CodeConfig:
        pairs = (
            ("default_timeout_s", "max_timeout_s"),
            ("default_memory_mb", "max_memory_mb"),
            ("default_max_output_bytes", "max_output_bytes"),
        )
        for default, maximum in pairs:
            if getattr(self, default) > getattr(self, maximum):
                raise ValueError(f"{default} exceeds {maximum}")
        return self

    def hashed_fields(self) -> dict[str, Any]:
        """Everything that can move a verdict (not ``slots``, ``uid_base`` or paths' hosts)."""
        fields = {name: getattr(self, name) for name in CodeConfig.model_fields}
        for name in ("slots", "uid_base", "bwrap_path"):
            fields.pop(name)
        if self.case_namespaces:
            # Hashed only when off, so that the default's hash (and the results cached under
            # it) did not move when the field came.
            fields.pop("case_namespaces")
        fields["python_paths"] = list(self.python_paths)
        fields["cxx_flags"] = list(CXX_FLAGS)
        return fields
