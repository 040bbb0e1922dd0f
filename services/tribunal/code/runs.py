"""One program run through the queue, for the run routes (``POST /v1/code/run`` and
SandboxFusion's ``POST /run_code``): the ``code_run`` verifier's one-item batch, its error
raised as the error class it names."""

from __future__ import annotations

import json

from tribunal.core.deps import AppRuntime
from tribunal.wire.code import RunDetails, RunItem
from tribunal.wire.errors import ERRORS_BY_CODE, InternalError


async def run_once(item: RunItem, runtime: AppRuntime) -> RunDetails:
    """Run ``item`` in a sandbox slot (through the queue, as every scoring request).

    Raises:
        TribunalError: The subclass its error code names (``sandbox_error``, ``queue_full``,
            ``timeout`` ...), with its message and field.
    """
    service = runtime.services["code_run"]
    text = await service.score([item], runtime.settings.sync_timeout_s)
    [result] = json.loads(text)["results"]
    error = result["error"]
    if error is not None:
        cls = ERRORS_BY_CODE.get(error["code"], InternalError)
        raise cls(error["message"], field=error.get("field"))
    return RunDetails.model_validate(result["details"])
