"""Settings of the code service (``TRIBUNAL_CODE_*`` on top of the core's ``TRIBUNAL_*``)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from tribunal.code.config import CodeConfig
from tribunal.core.settings import CoreSettings


class CodeSettings(CoreSettings):
    """Environment of the code runner; ``to_config()`` gives the domain configuration."""

    code_port: int = Field(default=8102, description="Port of the code API.")
    code_isolation: Literal["bwrap", "none"] = Field(
        default="bwrap",
        description=(
            "bwrap: every program in a bubblewrap sandbox (the only safe mode). none: plain "
            "subprocesses with rlimits, for local development only (logged as a warning and "
            "reported in details.isolation)."
        ),
    )
    code_slots: int = Field(
        default=0, ge=0, description="Concurrent sandboxes per process; 0 = number of cores."
    )
    code_uid_base: int = Field(
        default=61000, ge=1000, description="First host uid of the slots (when running as root)."
    )
    code_bwrap_path: str = Field(default="/usr/bin/bwrap", description="bubblewrap binary.")
    code_python_path: str = Field(
        default="/usr/bin/python3", description="Python inside the sandbox (run as -I -S)."
    )
    code_gxx_path: str = Field(default="/usr/bin/g++", description="C++ compiler.")
    code_python_paths: tuple[str, ...] = Field(
        default=("/usr/lib/python3/dist-packages",),
        description="Directories added to the sandboxed Python's sys.path (JSON list).",
    )
    code_default_timeout_s: float = Field(default=5.0, gt=0, description="Per-case limit.")
    code_max_timeout_s: float = Field(default=30.0, gt=0, description="Largest per-case limit.")
    code_default_memory_mb: int = Field(default=512, gt=0, description="Per-process memory.")
    code_max_memory_mb: int = Field(default=4096, gt=0, description="Largest memory limit.")
    code_default_max_output_bytes: int = Field(
        default=1 << 20, gt=0, description="Cap on stdout and stderr per case."
    )
    code_max_output_bytes: int = Field(default=16 << 20, gt=0, description="Largest output cap.")
    code_max_processes: int = Field(default=64, ge=8, description="Processes per sandbox.")
    code_max_file_size_mb: int = Field(default=16, gt=0, description="Largest file written.")
    code_max_open_files: int = Field(default=256, ge=32, description="Open files per process.")
    code_tmpfs_mb: int = Field(default=64, gt=0, description="Size of /box and /tmp each.")
    code_compile_timeout_s: float = Field(default=30.0, gt=0, description="C++ compile limit.")
    code_compile_memory_mb: int = Field(default=2048, gt=0, description="Compiler memory.")
    code_max_item_s: float = Field(default=300.0, gt=0, description="Hard limit per item.")

    def to_config(self) -> CodeConfig:
        """Build the frozen domain configuration."""
        return CodeConfig(
            isolation=self.code_isolation,
            slots=self.code_slots or os.cpu_count() or 1,
            uid_base=self.code_uid_base,
            bwrap_path=self.code_bwrap_path,
            python_path=self.code_python_path,
            gxx_path=self.code_gxx_path,
            python_paths=tuple(self.code_python_paths),
            default_timeout_s=self.code_default_timeout_s,
            max_timeout_s=self.code_max_timeout_s,
            default_memory_mb=self.code_default_memory_mb,
            max_memory_mb=self.code_max_memory_mb,
            default_max_output_bytes=self.code_default_max_output_bytes,
            max_output_bytes=self.code_max_output_bytes,
            max_processes=self.code_max_processes,
            max_file_size_mb=self.code_max_file_size_mb,
            max_open_files=self.code_max_open_files,
            tmpfs_mb=self.code_tmpfs_mb,
            compile_timeout_s=self.code_compile_timeout_s,
            compile_memory_mb=self.code_compile_memory_mb,
            max_item_s=self.code_max_item_s,
        )
