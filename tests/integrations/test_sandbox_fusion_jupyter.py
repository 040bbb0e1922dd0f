"""SandboxFusion's ``/run_jupyter`` on code-interpreter sessions, called by SandboxFusion's own
released SDK (``sandbox-fusion==0.3.7``, pinned in the lock), sync and async, against real
processes (API, worker, Redis) and real sandboxes."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable

import pytest
from sandbox_fusion import RunJupyterRequest, RunStatus, run_jupyter, run_jupyter_async

from tests.conftest import ROOT, RedisServer, RunningService, redis_env

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

CELLS = [
    "a = 123",
    "a",
    "print(a)",
    "import sys; sys.stderr.write('stderr message')",
    "raise RuntimeError('error message')",
    "a + 1",
]
"""SandboxFusion's own example cells, and one after the error: state survives it."""


def test_the_sdk_runs_cells_in_one_interpreter(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    url = service(
        "code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_MAX_SESSIONS="2")
    ).base_url
    answer = run_jupyter(RunJupyterRequest(cells=CELLS), endpoint=url, max_attempts=1)
    assert answer.status == RunStatus.Success and answer.driver.status == "Finished"
    assigned, shown, printed, warned, raised, after = answer.cells
    assert assigned.display == [] and shown.display == [{"text/plain": "123"}]
    assert printed.stdout == "123\n" and warned.stderr == "stderr message"
    assert warned.display == [{"text/plain": "14"}]  # write's return value, as a kernel shows
    [error] = raised.error
    assert error["ename"] == "RuntimeError" and error["evalue"] == "error message"
    assert error["traceback"][-1] == "RuntimeError: error message"
    assert after.display == [{"text/plain": "124"}]

    slow = asyncio.run(
        run_jupyter_async(
            RunJupyterRequest(cells=["b = 1", "while True:\n    pass", "b"], cell_timeout=1),
            endpoint=url,
            max_attempts=1,
        )
    )
    assert slow.status == RunStatus.Failed and slow.driver.status == "TimeLimitExceeded"
    assert len(slow.cells) == 2  # the third never ran
    with pytest.raises(Exception, match="takes no files"):
        run_jupyter(
            RunJupyterRequest(cells=["1"], fetch_files=["out.txt"]), endpoint=url, max_attempts=1
        )
    # The example of docs/integrations.md, as written.
    page = (ROOT / "docs" / "integrations.md").read_text()
    [example] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "run_jupyter" in b]
    exec(example.replace("http://127.0.0.1:8102", url), {})
