"""The code verifiers: ``code`` (score programs against tests) and ``code_run`` (run once).

Both refuse to start when they cannot isolate programs (``ConfigurationError``), unless the
configuration says ``isolation="none"`` explicitly (local development: logged as a warning
and reported in every result's ``details.isolation``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from tribunal.code.config import CodeConfig
from tribunal.code.driver_confine import MIN_OPEN_FILES, SOCKET_BYTES
from tribunal.code.extract import extract_program
from tribunal.code.runner import Runner, classify_execution
from tribunal.code.sandbox import SlotPool, build_driver_pyc
from tribunal.code.scorer import score_cases
from tribunal.code.seccomp import build_filter
from tribunal.core.verifier import score_each
from tribunal.wire.code import CodeDetails, CodeItem, RunDetails, RunItem
from tribunal.wire.code_verdicts import TestVerdict
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import (
    BadInput,
    ConfigurationError,
    SandboxError,
    TribunalError,
)
from tribunal.wire.hashing import config_hash

logger = logging.getLogger(__name__)

VERSION = "0.1.0"

_PROBE = """
import os
lines = open('/proc/net/dev').read().splitlines()[2:]
print(6 * 7, sorted(line.split(':')[0].strip() for line in lines), os.path.exists('/etc/shadow'))
try:
    os.close(os.memfd_create('probe'))
    print('memfd')
except PermissionError:
    print('refused')
"""
_PROBE_EXPECTED = "42 ['lo'] False"

_DOCKER_HINT = (
    "In Docker, bubblewrap needs user/mount/pid/net namespaces and a fresh /proc: run the "
    "code container with `--security-opt seccomp=<profile allowing clone/unshare/mount/"
    "pivot_root/setns>` (or seccomp=unconfined for this container only), "
    "`--security-opt apparmor=unconfined` and `--security-opt systempaths=unconfined`, "
    "as root inside the container (never --privileged). On a host, check "
    "`sysctl user.max_user_namespaces` > 0 (and kernel.unprivileged_userns_clone=1 / "
    "kernel.apparmor_restrict_unprivileged_userns=0 where those exist)."
)


class _CodeBase:
    """What both code verifiers share: config, slot pool, runner, start-up checks."""

    version = VERSION

    def __init__(self, config: CodeConfig) -> None:
        self.config = config
        self._pool: SlotPool | None = None
        self._runner: Runner | None = None
        self.has_cpp = False
        self.case_namespaces = False
        """Whether each stdio case gets pid, mount and IPC namespaces of its own, and a
        network namespace after a case that left state in the sandbox's (found by the
        start-up probe; where the host refuses them, the per-case clean-up alone)."""

    @property
    def isolation_note(self) -> str | None:
        """``details.isolation`` value: set only when programs run unsandboxed."""
        return "none (UNSANDBOXED, development only)" if self.config.isolation == "none" else None

    @property
    def layers(self) -> dict[str, Any]:
        """The isolation layers of this configuration, for ``/readyz`` and the docs' threat
        model (``docs/code-sandbox.md``). A worker whose host cannot give one of them refuses
        to start (its probe checks the namespaces and the seccomp filter), so a live worker
        runs with exactly these."""
        sandboxed = self.config.isolation == "bwrap"
        layers: dict[str, Any] = {
            "namespaces": "bwrap" if sandboxed else "none (UNSANDBOXED)",
            "rlimits": True,
            "seccomp": self.config.seccomp,
            "case_namespaces": self.case_namespaces,
            "case_cleanup": "dirs, ipc, mqueues, keyrings, network" if sandboxed else "work dir",
            "memory_cgroup": self._memory_cgroup(),
        }
        layers["open"] = self._left_open(layers)
        return layers

    def _left_open(self, layers: dict[str, Any]) -> dict[str, str]:
        """What each layer this host lacks leaves open (``docs/code-sandbox.md``)."""
        open_: dict[str, str] = {}
        if layers["namespaces"] != "bwrap":
            open_["namespaces"] = (
                "programs see the host's files, processes and network: development only"
            )
        if not layers["seccomp"]:
            open_["seccomp"] = (
                "SysV shared memory, memfd and socket buffers raised to the host's maximum hold "
                "memory no limit counts; keyrings and message queues outlive a case; network "
                "families (vsock) and the calls container runtimes refuse are allowed"
            )
        if not layers["case_namespaces"]:
            open_["case_namespaces"] = (
                "stdio cases of one item share pids, inode numbers and SysV ids: a program can "
                "count its cases (the random order keeps it from naming one); a case that "
                "leaves state in the network namespace sends the later ones to a new sandbox"
            )
        if not layers["memory_cgroup"]:
            # The driver gives each process as many open files as its memory limit pays for
            # at the most one local socket can hold (SOCKET_BYTES, with the filter's backlog
            # bound and the default buffers it keeps), and the kernel bounds the sockets in
            # flight by the same RLIMIT_NOFILE per uid.
            open_["memory_cgroup"] = (
                "kernel memory of a program's processes is counted by no limit: page tables, "
                "pipe buffers (fs.pipe-user-pages-soft per slot uid) and local socket "
                "buffers, up to the memory limit per process and as much again in flight "
                f"(open files: the memory limit / {SOCKET_BYTES >> 10} KiB, at least "
                f"{MIN_OPEN_FILES}), as the address space is bounded per process"
                if layers["seccomp"]
                else "kernel memory of a program's processes is counted by no limit"
            )
        return open_

    def _memory_cgroup(self) -> str | bool:
        """``v1``/``v2`` where each sandbox runs in a memory cgroup, else False."""
        cgroups = self._runner.cgroups if self._runner is not None else None
        if cgroups is None or cgroups.version is None:
            return False
        return f"v{cgroups.version}"

    def utilisation(self) -> tuple[int, int]:
        """``(busy, capacity)`` of this verifier's sandbox slots."""
        busy = self._pool.in_use if self._pool is not None else 0
        return busy, self.config.slots

    def config_hash(self) -> str:
        """Hash of everything in the configuration that can move a verdict."""
        return config_hash(self.config.hashed_fields())

    async def start(self) -> None:
        """Check that programs can be isolated, then open the slot pool.

        Raises:
            ConfigurationError: bubblewrap or the interpreter is missing, or a probe program
                does not run isolated; the message says how to fix it.
        """
        config = self.config
        if not os.access(config.python_path, os.X_OK):
            raise ConfigurationError(
                f"no Python interpreter at {config.python_path}: install python3 or set "
                "TRIBUNAL_CODE_PYTHON_PATH"
            )
        if config.isolation == "none":
            logger.warning(
                "TRIBUNAL_CODE_ISOLATION=none: untrusted programs run WITHOUT a sandbox "
                "(rlimits only). Use this for local development only, never for training."
            )
        elif not (os.path.isfile(config.bwrap_path) and os.access(config.bwrap_path, os.X_OK)):
            raise ConfigurationError(
                f"bubblewrap not found at {config.bwrap_path}: install it "
                "(`apt-get install -y bubblewrap`) or set TRIBUNAL_CODE_BWRAP_PATH; refusing "
                "to run untrusted code unsandboxed (TRIBUNAL_CODE_ISOLATION=none is for local "
                "development only)"
            )
        self.has_cpp = os.access(config.gxx_path, os.X_OK)
        try:
            driver_pyc = await build_driver_pyc(config.python_path)
        except SandboxError as exc:
            raise ConfigurationError(exc.message) from exc
        bpf = build_filter() if config.seccomp else None
        self._pool = SlotPool(config)
        self._runner = Runner(config, self._pool, driver_pyc, seccomp_filter=bpf)
        cgroups = self._runner.cgroups
        if cgroups is not None and cgroups.version is None:
            logger.warning(
                "no memory cgroup per sandbox here (%s): memory that no rlimit counts (kernel "
                "buffers, page tables) is bounded by the seccomp filter, the tmpfs caps and "
                "the process and open-file limits only (/readyz: layers.*.open)",
                cgroups.reason,
            )
        await self._probe()

    async def _probe(self) -> None:
        assert self._runner is not None
        probe = RunItem(id="startup-probe", language="python", code=_PROBE)
        try:
            execution = await self._runner.run(probe)
        except TribunalError as exc:
            await self.aclose()
            raise ConfigurationError(
                f"the sandbox does not work here ({exc.message}). {_DOCKER_HINT}"
            ) from exc
        output, _, memfd = execution.stdout.decode("utf-8", "replace").strip().rpartition("\n")
        sandboxed = self.config.isolation == "bwrap"
        filtered = memfd == "refused"
        if execution.exit_code != 0 or (sandboxed and output != _PROBE_EXPECTED):
            stderr = execution.stderr.decode("utf-8", "replace")[-2000:]
            await self.aclose()
            raise ConfigurationError(
                f"the sandbox probe failed (exit {execution.exit_code}, output {output!r}, "
                f"stderr {stderr!r}). {_DOCKER_HINT}"
            )
        if filtered != self.config.seccomp:
            await self.aclose()
            raise ConfigurationError(
                f"the seccomp filter is {'on' if filtered else 'off'} in the sandbox, though "
                f"TRIBUNAL_CODE_SECCOMP={str(self.config.seccomp).lower()}"
            )
        if sandboxed and self.config.case_namespaces:
            await self._probe_case_namespaces()

    async def _probe_case_namespaces(self) -> None:
        """Two stdio cases of a program that prints its pid: both print 2 where each case
        has a pid namespace of its own (see ``driver_confine._CaseNamespaces``)."""
        assert self._runner is not None
        item = CodeItem.model_validate(
            {
                "id": "startup-probe-cases",
                "language": "python",
                "code": "import os\nprint(os.getpid())",
                "tests": {"kind": "stdio", "cases": [{"stdout": "2"}, {"stdout": "2"}]},
            }
        )
        reason = "its driver may not make namespaces"
        try:
            run = await self._runner.score(item, str(item.code))
            self.case_namespaces = all(c.verdict is TestVerdict.ACCEPTED for c in run.cases)
        except SandboxError as exc:
            reason = exc.message
        if not self.case_namespaces:
            self._runner.case_namespaces = False  # the per-case clean-up alone
            logger.warning(
                "the stdio cases of an item share the sandbox's pid namespace here (%s): a "
                "program can tell its cases apart by its pid and the inode numbers of its "
                "files (docs/code-sandbox.md)",
                reason,
            )

    async def aclose(self) -> None:
        """Stop the spare sandboxes and release the slot pool's uid block."""
        if self._runner is not None:
            await self._runner.aclose()
        if self._pool is not None:
            self._pool.close()
        self._pool = None
        self._runner = None

    def _require_runner(self) -> Runner:
        if self._runner is None:
            raise ConfigurationError("the code verifier was not started (await start())")
        return self._runner

    def _check_language(self, language: str) -> None:
        if language == "cpp" and not self.has_cpp:
            raise BadInput(
                f"language 'cpp' is not available on this server (no {self.config.gxx_path})",
                field="language",
            )


class CodeVerifier(_CodeBase):
    """Scores programs against stdio, function-call or assert tests (``POST /v1/code/score``).

    Reward: the pass rate in [0, 1] (or all-or-nothing); ``None`` with an error when the
    sandbox, not the program, failed. See ``scorer.py``.
    """

    name = "code"
    item_model: type[ScoreItem] = CodeItem
    details_model: Any = CodeDetails

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Everything of the item but its id and group."""
        return item.model_dump(mode="json", exclude={"id", "group_id"})

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score a batch concurrently (bounded by the slots); one outcome per item, in order."""
        return await score_each(items, CodeItem, self.score_item)

    async def score_item(self, item: CodeItem) -> ItemOutcome:
        """Run one item's program against its tests in a sandbox slot."""
        return await self._score_one(self._require_runner(), item)

    async def _score_one(self, runner: Runner, item: CodeItem) -> ItemOutcome:
        code = item.code
        if code is None:
            assert item.response is not None  # the schema asks for exactly one
            extraction = extract_program(item.response, item.language)
            if extraction.code is None:
                return _no_code(item, extraction.reason)
            code = extraction.code
        self._check_language(item.language)
        run = await runner.score(item, code)
        reward, details = score_cases(
            run.cases, item.options.all_or_nothing, run.compile_message, self.isolation_note
        )
        if item.response is not None:
            details.extracted_code = code
        payload = details.model_dump(mode="json", exclude_none=True)
        if any(case.verdict is TestVerdict.SANDBOX_ERROR for case in run.cases):
            return ItemOutcome.failed(SandboxError("the sandbox failed on a test case"), payload)
        return ItemOutcome(reward=reward, details=payload)


def _no_code(item: CodeItem, reason: str | None) -> ItemOutcome:
    """Reward 0 for a completion without a program: its fault, not the service's."""
    tests = item.tests
    total = 1 if tests.kind == "assert" else len(tests.cases)
    details = CodeDetails(tests=[], passed=0, total=total, all_passed=False, no_code_reason=reason)
    return ItemOutcome(reward=0.0, details=details.model_dump(mode="json", exclude_none=True))


class CodeRunVerifier(_CodeBase):
    """Runs a program once and returns its output (``POST /v1/code/run``).

    Not a reward: ``reward`` is None and ``error`` None on success; ``details`` holds
    stdout, stderr, their truncation flags, exit_code, verdict and time_ms. Never cached.
    """

    name = "code_run"
    item_model: type[ScoreItem] = RunItem
    details_model: Any = RunDetails

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Runs are never cached (a tool call may be meant to run again)."""
        return None

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Run a batch concurrently (bounded by the slots); one outcome per item, in order."""
        return await score_each(items, RunItem, self.score_item)

    async def score_item(self, item: RunItem) -> ItemOutcome:
        """Run one program in a sandbox slot."""
        return await self._run_one(self._require_runner(), item)

    async def _run_one(self, runner: Runner, item: RunItem) -> ItemOutcome:
        self._check_language(item.language)
        execution = await runner.run(item)
        verdict, _ = classify_execution(execution, truncation_fails=False)
        details = RunDetails(
            stdout=execution.stdout.decode("utf-8", "replace"),
            stderr=execution.stderr.decode("utf-8", "replace"),
            stdout_truncated=execution.stdout_truncated,
            stderr_truncated=execution.stderr_truncated,
            exit_code=execution.exit_code,
            verdict=TestVerdict.ACCEPTED if verdict is None else verdict,
            time_ms=execution.time_ms,
            isolation=self.isolation_note,
        )
        return ItemOutcome(reward=None, details=details.model_dump(mode="json", exclude_none=True))
