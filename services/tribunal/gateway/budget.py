"""Per-spec budgets: a spec whose items spent its ``budget_usd`` on model calls is refused.

What a spec's items spent is the cluster-wide counter ``cost|<spec>|usd`` (nano-dollars) that
the gateway's hack-signature thread adds after each answer (``tribunal.gateway.signatures``:
the sum of each item's components' ``details.usage.cost_usd``), and an audit adds to its
auditor spec; every API replica and gateway worker adds to the same counter in the queue's
stats and reads it before a batch. A batch that names a spec whose spend has reached its
budget is refused with :class:`~tribunal.wire.errors.BudgetSpent` (402) on the synchronous
routes, and its items are answered that error in a job: never scored, never paid a default.

The spend is counted after the answer, so the batches in flight when the budget is reached
(and those answered within the counting's linger, ``tribunal.gateway.audit.LINGER_S``) are
still scored: the overrun is bounded by what one round of batches costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tribunal.core.metrics import NANO, SEP
from tribunal.core.queue.base import JobQueue
from tribunal.gateway.specs import LoadedSpec
from tribunal.wire.errors import BudgetSpent


def spend_key(spec: str) -> str:
    """The name of ``spec``'s spend in the gateway's stats (nano-dollars)."""
    return f"cost{SEP}{spec}{SEP}usd"


async def spent_specs(
    queue: JobQueue, specs: Mapping[str, LoadedSpec], names: Iterable[str]
) -> dict[str, float]:
    """The specs among ``names`` with a budget that their items have spent.

    Args:
        queue: The gateway's queue (its cluster-wide stats hold the spend).
        specs: The specs served.
        names: The specs a batch names (unknown names are ignored: the item is refused by
            its own validation).

    Returns:
        ``{spec: USD spent}`` for each budgeted spec whose spend is at least its
        ``budget_usd``; empty (and no read of the stats) when none of ``names`` has a budget.

    Raises:
        QueueUnavailable: The queue's store cannot be read (503, retryable): a budget that
            cannot be checked is not taken as unspent.
    """
    budgeted = {
        name: budget
        for name in set(names)
        if name in specs and (budget := specs[name].spec.budget_usd) is not None
    }
    if not budgeted:
        return {}
    stats = await queue.stats("gateway")
    spent = {name: stats.get(spend_key(name), 0) / NANO for name in budgeted}
    return {name: usd for name, usd in spent.items() if usd >= budgeted[name]}


def budget_error(spec: str, spent_usd: float, budget_usd: float, field: str) -> BudgetSpent:
    """The error of an item (or a batch) naming spec ``spec`` once its budget is spent."""
    return BudgetSpent(
        f"spec {spec!r} spent ${spent_usd:.6g} of its budget_usd ${budget_usd:g} on model "
        "calls; its items are refused until the budget is raised",
        field=field,
    )
