"""Wire models of code-interpreter sessions (``/v1/code/sessions``); pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from tribunal.wire.code import MAX_CODE_CHARS
from tribunal.wire.envelope import ScoreItem


class SessionRequest(BaseModel):
    """``POST /v1/code/sessions``: start an interpreter. Each limit is at most the server's
    (``TRIBUNAL_CODE_SESSION_*``); unset means the server's."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["python"] = Field(default="python", description="Python only.")
    idle_ttl_s: StrictFloat | None = Field(
        default=None, gt=0, description="Closed after this long without a call (s)."
    )
    budget_s: StrictFloat | None = Field(
        default=None, gt=0, description="Total wall-clock time its calls may take (s)."
    )


class SessionCreateItem(ScoreItem):
    """The ``code_session`` verifier's item: one session to start (the queue's payload of
    ``POST /v1/code/sessions``)."""

    idle_ttl_s: StrictFloat | None = Field(default=None, gt=0)
    budget_s: StrictFloat | None = Field(default=None, gt=0)


class SessionInfo(BaseModel):
    """A started session: its id (the only handle on it) and its limits."""

    session_id: str = Field(description="`<worker>.<secret>`: the worker that holds it first.")
    idle_ttl_s: float
    budget_s: float
    call_timeout_s: float = Field(description="Default wall-clock limit of one call (s).")
    max_call_timeout_s: float


class CellRequest(BaseModel):
    """``POST /v1/code/sessions/{id}/run``: one cell of Python for the session's interpreter."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(max_length=MAX_CODE_CHARS, description="Python source, run as a cell.")
    timeout_s: StrictFloat | None = Field(
        default=None, gt=0, description="Wall-clock limit of this call (s); at most the server's."
    )
    max_output_bytes: StrictInt | None = Field(
        default=None, gt=0, description="Cap on stdout and on stderr of this call, bytes."
    )


class CellError(BaseModel):
    """The exception a cell raised (its own failure: the session goes on)."""

    ename: str
    evalue: str
    traceback: str


class CellResult(BaseModel):
    """What one cell did.

    ``status``: ``ok``; ``error`` (the cell raised, see ``error``); ``timeout`` (interrupted
    at its limit: ``KeyboardInterrupt``, the state kept while ``session_alive``); ``crashed``
    (the interpreter died: exit, signal, memory or CPU budget). With ``session_alive`` false
    the session is over, and the next call on it is ``session_lost``.
    """

    status: Literal["ok", "error", "timeout", "crashed"]
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    display: str | None = Field(default=None, description="repr of the cell's last expression.")
    error: CellError | None = None
    time_ms: float
    session_alive: bool
    budget_left_s: float = Field(description="What is left of the session's time budget (s).")
    exit_code: int | None = None
    signal: int | None = None
