"""Score a JSONL file of items through a service, resumably (what ``tribunal score`` runs).

Input: one item per line in the verifier's item schema (an item without ``id`` gets its
0-based line number among the items). Output: one ``ItemResult`` per line, in input order.
An item the service refuses (a missing field, an ``id`` that is not a string, a line that
is JSON but not an object) does not stop the run: it is sent as written, the service answers
it ``bad_input``, and its result carries the id the item was given here (its index when its
own is unusable) and a message naming its input line (``line 2: id: Input should be a valid
string``). A chunk none of whose items is valid is refused by the service as a whole (422,
naming its first item); it is then sent item by item, to learn each item's own error, and
those results, which no verifier produced, have ``"verifier": null``.
Items are sent as their lines are written and results written as the service answers them
(``TribunalClient.score_json``): JSON in, JSON out, no model built per item.

Chunks of ``chunk_size`` items are scored ``concurrency`` at a time, each in one synchronous
request (``POST /v1/<verifier>/score``) whose ``Idempotency-Key``,
``tribunal-score:<verifier>:<sha256 of the input>:<chunk_size>:<k>``, makes the chunk a job
of the service; a chunk not scored within the service's synchronous deadline (504) is
long-polled as that job.
Results are appended chunk by chunk in input order and flushed. After an interruption
(Ctrl-C, a killed process), running the same command again:

- keeps every complete line already in the output (a torn last line is cut off) and checks
  that their ids are the input's first ids (else it refuses: another input wrote it);
- sends the chunk holding the first missing item again under the same key: the service
  answers with the job it already has (scored, or still being scored), so nothing is scored
  twice while the job's results are kept (``TRIBUNAL_RESULT_TTL_S``, an hour by default);
- sends the chunks after it as new jobs.

``restart=True`` (``tribunal score --restart``) discards the output and starts over.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tribunal.client.client import TribunalClient
from tribunal.client.errors import RequestRejected, ServerError
from tribunal.wire.jsonparse import loads, orjson_reads_exactly


@dataclass
class ScoreSummary:
    """What one run did.

    Attributes:
        items: Items in the input.
        kept: Results already in the output from an earlier run (not sent again).
        scored: Results received in this run.
        rewards: Results with a reward, all of the output.
        reward_sum: Sum of those rewards.
        errors: Items with an error, by error code.
        elapsed_s: Wall time of this run's scoring, seconds.
    """

    items: int = 0
    kept: int = 0
    scored: int = 0
    rewards: int = 0
    reward_sum: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0

    @property
    def mean_reward(self) -> float | None:
        """Mean over the items that have a reward (None when none has)."""
        return self.reward_sum / self.rewards if self.rewards else None

    @property
    def items_per_s(self) -> float:
        """Results received in this run per second."""
        return self.scored / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def add_result(self, result: dict[str, Any]) -> None:
        """Count one result (decoded ``ItemResult`` JSON)."""
        error = result.get("error")
        if error is not None:
            self.errors[str(error.get("code"))] += 1
        elif result.get("reward") is not None:
            self.rewards += 1
            self.reward_sum += result["reward"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "items": self.items,
            "kept": self.kept,
            "scored": self.scored,
            "mean_reward": self.mean_reward,
            "errors": dict(self.errors),
            "elapsed_s": round(self.elapsed_s, 3),
            "items_per_s": round(self.items_per_s, 1),
        }


@dataclass(frozen=True)
class InputItems:
    """The items of an input file.

    Attributes:
        ids: Each item's ``id`` (its index, as a string, for an item without a usable one: no
            ``id``, one that is not a non-empty string, or a line that is not an object).
        texts: Each item as JSON, as it is sent: its line, or the item re-encoded with the
            ``id`` it was given.
        lines: Each item's 1-based line number in the input.
    """

    ids: list[Any]
    texts: list[bytes]
    lines: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def read_items(data: bytes) -> InputItems:
    """Parse JSONL items (blank lines skipped); give an item without ``id`` its index.

    A line that is JSON but no valid item (not an object, an ``id`` that is not a non-empty
    string) is kept as written, under its index as id: the service refuses that item alone.

    Raises:
        ValueError: A line is not JSON (the message names the line), or there is no item.
    """
    items = InputItems([], [])
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        item, encode = _parse(line, number)
        index = str(len(items.ids))
        if not isinstance(item, dict):
            items.texts.append(line.strip())
            items.ids.append(index)
        elif "id" in item:
            items.texts.append(line.strip())
            usable = isinstance(item["id"], str) and item["id"]
            items.ids.append(item["id"] if usable else index)
        else:
            item["id"] = index
            items.texts.append(encode(item))
            items.ids.append(index)
        items.lines.append(number)
    if not items.ids:
        raise ValueError("no items (the input is empty)")
    return items


def name_the_line(result: dict[str, Any], items: InputItems, index: int, position: int) -> None:
    """Give the result of ``items[index]`` (``position`` in its request) the item's id, and
    make its error, when it names a field of that request's item, name the input line.

    The service names a refused field by the item's place in the request
    (``items.<position>.id``), which is not where a person finds it in a file of chunks.
    """
    result["id"] = items.ids[index]
    error = result.get("error")
    prefix = f"items.{position}"
    if not isinstance(error, dict) or not isinstance(error.get("field"), str):
        return
    where: str = error["field"]
    if where != prefix and not where.startswith(prefix + "."):
        return
    inner = where[len(prefix) + 1 :]
    message = str(error.get("message", ""))
    if message.startswith(where + ": "):
        message = message[len(where) + 2 :]
    line = items.lines[index]
    error["field"] = inner or None
    error["message"] = f"line {line}: {inner}: {message}" if inner else f"line {line}: {message}"


def _parse(line: bytes, number: int) -> tuple[Any, Callable[[dict[str, Any]], bytes]]:
    """The item on ``line`` and the encoder that writes it back as it was read."""
    if orjson_reads_exactly(line):
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(line), orjson.dumps
    # What orjson refuses or would change (NaN, a lone surrogate escape, an integer past 64
    # bits) is read and written by json: the service sees it as written and names the field
    # it cannot take.
    try:
        return json.loads(line), _json_bytes
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ValueError(f"line {number}: not JSON ({reason})") from None


def _json_bytes(item: dict[str, Any]) -> bytes:
    return json.dumps(item).encode()  # ASCII: a lone surrogate stays an escape


def idempotency_key(verifier: str, digest: str, chunk_size: int, index: int) -> str:
    """The key of chunk ``index`` of an input whose sha256 is ``digest``."""
    return f"tribunal-score:{verifier}:{digest[:32]}:{chunk_size}:{index}"


def kept_results(path: Path, items: InputItems, summary: ScoreSummary) -> int:
    """Cut ``path`` after its last complete result line and count the results it keeps.

    Raises:
        ValueError: A kept result's id is not the id of the input item at its position.
    """
    if not path.exists():
        return 0
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    kept = 0
    for line in data[:end].splitlines():
        result = loads(line)
        if kept >= len(items) or result.get("id") != items.ids[kept]:
            raise ValueError(
                f"{path}: line {kept + 1} is not the result of input item {kept} "
                "(another input wrote it); use --restart to score again from the start"
            )
        summary.add_result(result)
        kept += 1
    if end < len(data):
        with path.open("r+b") as f:
            f.truncate(end)
    return kept


async def score_items(
    client: TribunalClient,
    verifier: str,
    items: InputItems,
    out: IO[bytes],
    *,
    digest: str,
    start: int = 0,
    chunk_size: int = 256,
    concurrency: int = 8,
    summary: ScoreSummary | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ScoreSummary:
    """Score ``items[start:]`` chunk by chunk and write their results to ``out`` in input order.

    Args:
        client: Client of the service.
        verifier: Verifier name.
        items: Every item of the input (keys are per chunk of the whole input).
        out: Binary stream the result lines are appended to (flushed per chunk).
        digest: sha256 hex of the input, for the idempotency keys.
        start: Items before this index already have their results in ``out``.
        chunk_size: Items per request.
        concurrency: Requests in flight.
        summary: Counts to add to (a new one by default).
        on_progress: Called with the number of results written each time some are.

    Raises:
        tribunal.client.ClientError: A chunk could not be scored or collected (after retries).
    """
    summary = summary or ScoreSummary(items=len(items))
    first_chunk = start // chunk_size
    n_chunks = (len(items) + chunk_size - 1) // chunk_size if start < len(items) else 0
    chunks = range(first_chunk, n_chunks)
    semaphore = asyncio.Semaphore(concurrency)

    async def run(k: int) -> tuple[int, list[dict[str, Any]]]:
        async with semaphore:
            first = k * chunk_size
            batch = items.texts[first : first + chunk_size]
            key = idempotency_key(verifier, digest, chunk_size, k)
            alone = False
            try:
                results = await client.score_json(verifier, batch, idempotency_key=key)
            except RequestRejected as exc:
                if not _refuses_an_item(exc):
                    raise
                results = [await _refused_alone(client, verifier, text) for text in batch]
                alone = True
            except ServerError as exc:
                if exc.code != "timeout" or exc.job_id is None:
                    raise
                # not scored within the synchronous deadline: still queued as its job
                results = [r.model_dump(mode="json") for r in await client.wait(exc.job_id)]
            for position, result in enumerate(results):
                name_the_line(result, items, first + position, 0 if alone else position)
            return k, results

    started = time.perf_counter()
    done: dict[int, list[dict[str, Any]]] = {}
    next_chunk = first_chunk
    tasks = [asyncio.create_task(run(k)) for k in chunks]
    try:
        for finished in asyncio.as_completed(tasks):
            k, results = await finished
            done[k] = results
            while next_chunk in done:
                skip = start - next_chunk * chunk_size if next_chunk == first_chunk else 0
                written = done.pop(next_chunk)[max(0, skip) :]
                out.write(b"".join(orjson.dumps(r) + b"\n" for r in written))
                out.flush()
                for r in written:
                    summary.add_result(r)
                summary.scored += len(written)
                next_chunk += 1
                if on_progress is not None:
                    on_progress(len(written))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        summary.elapsed_s += time.perf_counter() - started
    return summary


_ITEM_FIELD = re.compile(r"items\.\d+(\.|$)")


def _refuses_an_item(exc: RequestRejected) -> bool:
    """Whether the service refused a request for an item of it: it does so only when no
    item of the batch is valid (one valid item, and each invalid one is a result)."""
    return exc.code == "bad_input" and _ITEM_FIELD.match(exc.field or "") is not None


async def _refused_alone(client: TribunalClient, verifier: str, text: bytes) -> dict[str, Any]:
    """The result of one item of a batch the service refused as a whole: its own error,
    from a request of this item alone (or its result, should the service score it)."""
    try:
        [result] = await client.score_json(verifier, [text])
    except RequestRejected as exc:
        if not _refuses_an_item(exc):
            raise
        error = {"code": exc.code, "message": exc.message, "retryable": False, "field": exc.field}
        return {"id": "0", "reward": None, "error": error, "details": {}, "verifier": None}
    return result


def input_digest(data: bytes) -> str:
    """sha256 hex of the input bytes."""
    return hashlib.sha256(data).hexdigest()
