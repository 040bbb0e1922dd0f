"""The cluster-wide histograms and counters that processes tally (``tribunal.core.metrics``)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tribunal.core.metrics import (
    COST_BUCKETS_USD,
    Tally,
    _QueueCollector,
    entry_age_s,
    histogram_from_stats,
)


def test_tallies_of_several_processes_add_up_to_one_histogram() -> None:
    stats: dict[str, int] = {}
    for values in ([0.05, 0.3], [0.3, 7.0, 1000.0]):  # two workers
        tally = Tally()
        for value in values:
            tally.observe("latency", value, (0.1, 0.5, 10))
        for name, amount in tally.take().items():
            stats[name] = stats.get(name, 0) + amount
        assert tally.take() == {}
    observed = histogram_from_stats(stats, "latency", (0.1, 0.5, 10))
    assert observed is not None
    buckets, total = observed
    assert buckets == [("0.1", 1.0), ("0.5", 3.0), ("10.0", 4.0), ("+Inf", 5.0)]
    assert math.isclose(total, 0.05 + 0.3 + 0.3 + 7.0 + 1000.0)
    assert histogram_from_stats(stats, "other", (1,)) is None


def test_an_entry_age_is_read_from_a_redis_stream_id_only() -> None:
    assert entry_age_s("1700000000000-3", now=1700000002.5) == 2.5
    assert entry_age_s("1-0") is None  # an id that counts from 1 says nothing of time
    assert entry_age_s("not-an-id") is None


def test_the_collector_exposes_tallied_spec_rewards_with_their_spread() -> None:
    tally = Tally()
    for reward in (0.0, 0.5, 1.0):
        tally.observe("spec|rloo_math|rewards", reward, (0.0, 0.5, 1.0))
        tally.add("spec|rloo_math|reward")
        tally.add("spec|rloo_math|squares", round(reward * reward * 1_000_000))
    tally.add("spec|rloo_math|error")
    tally.add("spec|rloo_math|error|timeout")
    tally.add("backend|ok", 4)
    tally.add("backend|backend_unavailable")
    tally.add("backend_tokens|prompt", 3000)
    tally.add("backend_tokens|completion", 600)
    tally.add("backend_cost_nanousd", 10_800_000)
    tally.add("claims_decided|extractive", 5)
    tally.add("claims_decided|judge", 7)
    tally.observe("item_cost", 0.0108, COST_BUCKETS_USD)
    collector = _QueueCollector()
    collector.stats = {"gateway": tally.take()}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in collector.collect()
        for s in family.samples
    }
    spec = (("spec", "rloo_math"),)
    assert samples[("tribunal_spec_reward_count", spec)] == 3
    assert samples[("tribunal_spec_reward_sum", spec)] == 1.5
    assert samples[("tribunal_spec_reward_squares_total", spec)] == 1.25
    assert samples[("tribunal_spec_items_total", (("outcome", "reward"), *spec))] == 3
    assert samples[("tribunal_spec_errors_total", (("code", "timeout"), *spec))] == 1
    gateway = ("verifier", "gateway")
    assert samples[("tribunal_backend_calls_total", (("outcome", "ok"), gateway))] == 4
    assert samples[("tribunal_backend_tokens_total", (("kind", "prompt"), gateway))] == 3000
    assert samples[("tribunal_backend_tokens_total", (("kind", "completion"), gateway))] == 600
    assert math.isclose(samples[("tribunal_backend_cost_usd_total", (gateway,))], 0.0108)
    assert samples[("tribunal_claims_decided_total", (("by", "extractive"), gateway))] == 5
    assert samples[("tribunal_claims_decided_total", (("by", "judge"), gateway))] == 7
    assert samples[("tribunal_item_cost_usd_bucket", (("le", "0.01"), gateway))] == 0
    assert samples[("tribunal_item_cost_usd_bucket", (("le", "0.1"), gateway))] == 1
    # The text exposition parses back (what Prometheus reads).
    registry = CollectorRegistry()
    registry.register(collector)
    names = {f.name for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert {"tribunal_spec_reward", "tribunal_backend_calls"} <= names
