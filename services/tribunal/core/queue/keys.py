"""Every Redis key and channel name Tribunal uses, in one place.

One stream per verifier holds the queued items; its consumer group is shared by every worker
of that verifier, on any machine. Results live in a hash per job with a TTL.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

JOB_ID = re.compile(r"[0-9a-f]{32}")
"""The format of the job ids Tribunal issues (``uuid4().hex``); anything else names no job
(and must never reach a Redis key: ``x:results`` would name another key)."""

CONSUMER_GROUP = "workers"
"""Name of the consumer group every worker of a verifier joins."""

# The keys a Lua script derives itself (from a job id it reads in its arguments), as
# templates: the Python methods below and the Lua functions of ``lua_functions`` both format
# them, so a script and the code around it cannot disagree on a name.
_JOB = "{prefix}:job:{job_id}"
_RESULTS = "{prefix}:job:{job_id}:results"
_DONE_JOBS = "{prefix}:jobs:done"
_LUA_TEMPLATES = {"job_key": _JOB, "results_key": _RESULTS, "done_jobs_key": _DONE_JOBS}


def _lua_function(name: str, template: str) -> str:
    """A Lua function of the template's fields (in order) that returns the formatted name."""
    parts: list[str] = []
    fields: list[str] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append("'" + literal + "'")
        if field is not None:
            parts.append(field)
            fields.append(field)
    return f"local function {name}({', '.join(fields)}) return {' .. '.join(parts)} end\n"


def lua_functions() -> str:
    """Lua source defining ``job_key(prefix, job_id)``, ``results_key(prefix, job_id)`` and
    ``done_jobs_key(prefix)``: the names of :class:`Keys`, for scripts to prepend."""
    return "".join(_lua_function(name, t) for name, t in _LUA_TEMPLATES.items())


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix (``TRIBUNAL_KEY_PREFIX``, default ``tribunal``)."""

    prefix: str

    def stream(self, verifier: str) -> str:
        """Stream of queued items of ``verifier`` (one entry per item)."""
        return f"{self.prefix}:{verifier}:stream"

    def dead_letters(self, verifier: str) -> str:
        """Stream of items delivered more than ``max_deliveries`` times."""
        return f"{self.prefix}:{verifier}:dead"

    def workers(self, verifier: str) -> str:
        """Sorted set: worker consumer name -> time of its last heartbeat (unix s)."""
        return f"{self.prefix}:{verifier}:workers"

    def utilisation(self, verifier: str) -> str:
        """Hash: worker consumer name -> ``"busy capacity"`` of its pool at its last heartbeat."""
        return f"{self.prefix}:{verifier}:utilisation"

    def refusal(self, verifier: str) -> str:
        """String: why the last worker of ``verifier`` refused to start (deleted on a start)."""
        return f"{self.prefix}:{verifier}:refusal"

    def stats(self, verifier: str) -> str:
        """Hash of cluster-wide counters (items scored by outcome, cache hits)."""
        return f"{self.prefix}:{verifier}:stats"

    def job(self, job_id: str) -> str:
        """Hash of a job's metadata: verifier, total."""
        return _JOB.format(prefix=self.prefix, job_id=job_id)

    def results(self, job_id: str) -> str:
        """Hash of a job's results: item index -> ItemResult JSON."""
        return _RESULTS.format(prefix=self.prefix, job_id=job_id)

    def idempotency(self, verifier: str, key: str) -> str:
        """String: ``<job_id>|<request hash>`` for a client's idempotency key."""
        return f"{self.prefix}:idem:{verifier}:{key}"

    def cache(self, verifier: str, entry: str) -> str:
        """String: a cached item outcome (``entry`` = version:config hash:input hash)."""
        return f"{self.prefix}:cache:{verifier}:{entry}"

    def cache_index(self, verifier: str) -> str:
        """Sorted set: cache key name -> time of its last use (unix s), for LRU eviction."""
        return f"{self.prefix}:cache:{verifier}:index"

    @property
    def done_jobs(self) -> str:
        """Sorted set: id of a job whose last result was written -> when (unix s); the
        oldest beyond ``TRIBUNAL_MAX_DONE_JOBS`` are deleted."""
        return _DONE_JOBS.format(prefix=self.prefix)

    @property
    def done_channel(self) -> str:
        """Pub/sub channel on which a job id is published when its last result is written."""
        return f"{self.prefix}:done"

    def inspect(self, verifier: str) -> str:
        """Stream: one entry per batch of items kept for the reward inspector (each item and
        its result), trimmed to ``TRIBUNAL_INSPECT_MAX_ITEMS`` items and to
        ``TRIBUNAL_INSPECT_TTL_S``."""
        return f"{self.prefix}:inspect:{verifier}"

    def inspect_count(self, verifier: str) -> str:
        """String: how many items the inspector's stream of ``verifier`` holds."""
        return f"{self.prefix}:inspect:{verifier}:n"

    def inspect_sizes(self, verifier: str) -> str:
        """List: ``"<entry id> <items>"`` of each batch in the inspector's stream, oldest
        first (what trimming reads instead of the batches)."""
        return f"{self.prefix}:inspect:{verifier}:sizes"
