"""Tribunal's Grafana dashboard and Prometheus alert rules, generated: `make monitoring`.

Writes docker/monitoring/grafana/dashboards/tribunal.json (built with grafana-foundation-sdk,
Grafana's own typed builders) and docker/monitoring/alerts.yml (Prometheus's rule format);
both are checked in and tests/e2e/test_monitoring.py fails when they differ from what this
script writes, then runs every panel query and every alert expression through a real
Prometheus. What each metric, panel and alert means: docs/monitoring.md.

Cluster-wide metrics (everything workers count, the queue's depth and age, live workers) are
reported alike by every API process of a service, so panels take ``max by`` over the
scraped instances, never ``sum``; only the per-process request metrics are summed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_PATH = ROOT / "docker/monitoring/grafana/dashboards/tribunal.json"
ALERTS_PATH = ROOT / "docker/monitoring/alerts.yml"

DATASOURCE = DataSourceRef(type_val="prometheus", uid="prometheus")
"""The provisioned datasource (docker/monitoring/grafana/provisioning/datasources)."""

VERIFIER = 'verifier=~"$verifier"'
SPEC = 'spec=~"$spec"'
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    """One panel query: PromQL with the dashboard's variables, and its legend."""

    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    """One panel: title, what it shows (its description in Grafana), unit and queries."""

    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"
    width: int = 8


def _quantiles(metric: str, by: str, matcher: str, agg: str = "max") -> tuple[Query, ...]:
    return tuple(
        Query(
            f"histogram_quantile({q}, {agg} by ({by}, le) "
            f"(rate({metric}_bucket{{{matcher}}}[{RATE}])))",
            f"{{{{{by}}}}} p{int(q * 100)}",
        )
        for q in (0.5, 0.99)
    )


def _share(numerator: str, denominator: str, by: str) -> str:
    return f"max by ({by}) ({numerator}) / max by ({by}) ({denominator})"


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    (
        "Verifiers",
        (
            Panel(
                "Items scored /s",
                "Items given a result by the workers, by outcome (reward or error).",
                "reqps",
                (
                    Query(
                        "max by (verifier, outcome) "
                        f"(rate(tribunal_items_scored_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} {{outcome}}",
                    ),
                ),
            ),
            Panel(
                "Queue depth",
                "Items queued or in flight.",
                "short",
                (Query(f"max by (verifier) (tribunal_queue_depth{{{VERIFIER}}})", "{{verifier}}"),),
            ),
            Panel(
                "Oldest pending item",
                "Age of the oldest item queued or in flight: a queue that no worker drains "
                "grows here first.",
                "s",
                (
                    Query(
                        f"max by (verifier) (tribunal_queue_oldest_age_seconds{{{VERIFIER}}})",
                        "{{verifier}}",
                    ),
                ),
            ),
            Panel(
                "Live workers",
                "Worker processes with a heartbeat in the last window.",
                "short",
                (
                    Query(
                        f"max by (verifier) (tribunal_live_workers{{{VERIFIER}}})", "{{verifier}}"
                    ),
                ),
                kind="stat",
            ),
            Panel(
                "Item latency (enqueue to result)",
                "p50 and p99 of an item's time from enqueue to its result, as workers wrote it.",
                "s",
                _quantiles("tribunal_item_latency_seconds", "verifier", VERIFIER),
            ),
            Panel(
                "Request latency (API)",
                "p50 and p99 of a synchronous scoring request, summed over API processes.",
                "s",
                _quantiles("tribunal_request_latency_seconds", "verifier", VERIFIER, agg="sum"),
            ),
            Panel(
                "Errors by class /s",
                "Items answered with an error, by class (timeout, backend_unavailable ...).",
                "reqps",
                (
                    Query(
                        "max by (verifier, code) "
                        f"(rate(tribunal_item_errors_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} {{code}}",
                    ),
                ),
            ),
            Panel(
                "Error share",
                "Share of items answered with an error other than bad_input.",
                "percentunit",
                (
                    Query(
                        _share(
                            "sum without (code) (rate(tribunal_item_errors_total"
                            f'{{{VERIFIER},code!="bad_input"}}[{RATE}]))',
                            "sum without (outcome) (rate(tribunal_items_scored_total"
                            f"{{{VERIFIER}}}[{RATE}]))",
                            "verifier",
                        ),
                        "{{verifier}}",
                    ),
                ),
            ),
            Panel(
                "Cache hit rate",
                "Share of cacheable items answered from the result cache.",
                "percentunit",
                (
                    Query(
                        _share(
                            f"rate(tribunal_cache_hits_total{{{VERIFIER}}}[{RATE}])",
                            f"rate(tribunal_cache_hits_total{{{VERIFIER}}}[{RATE}]) + "
                            f"rate(tribunal_cache_misses_total{{{VERIFIER}}}[{RATE}])",
                            "verifier",
                        ),
                        "{{verifier}}",
                    ),
                ),
            ),
            Panel(
                "Dead letters",
                "Items moved to the dead-letter stream (they kept killing workers), and the "
                "entries kept.",
                "short",
                (
                    Query(
                        "max by (verifier) "
                        f"(increase(tribunal_dead_lettered_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} new",
                    ),
                    Query(
                        "max by (verifier) "
                        f'(tribunal_store_items{{{VERIFIER},store="dead_letters"}})',
                        "{{verifier}} kept",
                    ),
                ),
            ),
            Panel(
                "Pool and sandbox slots busy",
                "Verification processes (math, citation) or sandbox slots (code) busy, of "
                "their capacity, summed over live workers.",
                "short",
                (
                    Query(
                        f"max by (verifier) (tribunal_pool_busy{{{VERIFIER}}})", "{{verifier}} busy"
                    ),
                    Query(
                        f"max by (verifier) (tribunal_pool_capacity{{{VERIFIER}}})",
                        "{{verifier}} capacity",
                    ),
                ),
            ),
            Panel(
                "Load shed (429) and other refusals /s",
                "Requests the API processes answered with an error, by code: queue_full is "
                "load shedding with Retry-After.",
                "reqps",
                (
                    Query(
                        f"sum by (code) (rate(tribunal_request_errors_total[{RATE}]))",
                        "{{code}}",
                    ),
                ),
            ),
        ),
    ),
    (
        "LLM backends (judge, citation)",
        (
            Panel(
                "Backend call latency",
                "p50 and p99 of one LLM call (its wait for a concurrency slot and retries "
                "included).",
                "s",
                _quantiles("tribunal_backend_latency_seconds", "verifier", VERIFIER),
            ),
            Panel(
                "Backend rate-limit wait",
                "p50 and p99 of a request's wait for room under its backend's "
                "requests_per_minute / tokens_per_minute (backends with a limit only).",
                "s",
                _quantiles("tribunal_backend_rate_wait_seconds", "verifier", VERIFIER),
            ),
            Panel(
                "Backend concurrency in use",
                "Calls in flight against the concurrency bound, summed over live workers.",
                "short",
                (
                    Query(
                        f"max by (verifier) (tribunal_backend_in_flight{{{VERIFIER}}})",
                        "{{verifier}} in flight",
                    ),
                    Query(
                        f"max by (verifier) (tribunal_backend_concurrency{{{VERIFIER}}})",
                        "{{verifier}} bound",
                    ),
                ),
            ),
            Panel(
                "Backend calls /s by outcome",
                "LLM calls by outcome: ok, or the error class (backend_unavailable, timeout, "
                "refusal ...).",
                "reqps",
                (
                    Query(
                        "max by (verifier, outcome) "
                        f"(rate(tribunal_backend_calls_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} {{outcome}}",
                    ),
                ),
            ),
            Panel(
                "Backend tokens /s and cost per hour",
                "Tokens the server reported, by kind, and what they cost at the model's price "
                "(TRIBUNAL_<NAME>_PRICE; priced models only).",
                "short",
                (
                    Query(
                        "max by (verifier, kind) "
                        f"(rate(tribunal_backend_tokens_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} {{kind}} tokens/s",
                    ),
                    Query(
                        "3600 * max by (verifier) "
                        f"(rate(tribunal_backend_cost_usd_total{{{VERIFIER}}}[{RATE}]))",
                        "{{verifier}} USD/h",
                    ),
                ),
            ),
            Panel(
                "Cost per item",
                "p50 and p99 of one judged item's cost (USD; a cached item costs 0).",
                "currencyUSD",
                _quantiles("tribunal_item_cost_usd", "verifier", VERIFIER),
            ),
        ),
    ),
    (
        "Reward specs",
        (
            Panel(
                "Spec items /s",
                "Reward-spec items scored by the gateway, by outcome.",
                "reqps",
                (
                    Query(
                        "max by (spec, outcome) "
                        f"(rate(tribunal_spec_items_total{{{SPEC}}}[{RATE}]))",
                        "{{spec}} {{outcome}}",
                    ),
                ),
            ),
            Panel(
                "Audited items: training vs audit reward",
                "Mean reward of the audited items per spec, as training paid it and as the "
                "spec's auditor scored them (never sent): a training line that rises while "
                "the audit line stays flat is reward the auditor does not grant "
                "(docs/audits.md).",
                "short",
                tuple(
                    Query(
                        _share(
                            f'rate(tribunal_audit_reward_total{{{SPEC},scorer="{scorer}"}}'
                            f"[{RATE}])",
                            f'rate(tribunal_audit_items_total{{{SPEC},outcome="audited"}}[{RATE}])',
                            "spec",
                        ),
                        f"{{{{spec}}}} {scorer}",
                    )
                    for scorer in ("training", "audit")
                ),
            ),
            Panel(
                "Reward mean",
                "Mean reward per spec over the interval: a collapse or a sudden jump (a "
                "policy found a hack) shows here first.",
                "short",
                (
                    Query(
                        _share(
                            f"rate(tribunal_spec_reward_sum{{{SPEC}}}[{RATE}])",
                            f"rate(tribunal_spec_reward_count{{{SPEC}}}[{RATE}])",
                            "spec",
                        ),
                        "{{spec}}",
                    ),
                ),
            ),
            Panel(
                "Reward spread (standard deviation)",
                "sqrt(E[r^2] - E[r]^2) per spec over the interval: a spread that falls to 0 "
                "leaves GRPO no advantage to learn from.",
                "short",
                (
                    Query(
                        "sqrt(clamp_min("
                        + _share(
                            f"rate(tribunal_spec_reward_squares_total{{{SPEC}}}[{RATE}])",
                            f"rate(tribunal_spec_reward_count{{{SPEC}}}[{RATE}])",
                            "spec",
                        )
                        + " - ("
                        + _share(
                            f"rate(tribunal_spec_reward_sum{{{SPEC}}}[{RATE}])",
                            f"rate(tribunal_spec_reward_count{{{SPEC}}}[{RATE}])",
                            "spec",
                        )
                        + ") ^ 2, 0))",
                        "{{spec}}",
                    ),
                ),
            ),
            Panel(
                "Reward distribution",
                "p10, p50 and p90 of the rewards per spec (bucket bounds 0, 0.1 ... 1, 2, 5, "
                "10: read them as bounds, not exact values).",
                "short",
                tuple(
                    Query(
                        f"histogram_quantile({q}, max by (spec, le) "
                        f"(rate(tribunal_spec_reward_bucket{{{SPEC}}}[{RATE}])))",
                        f"{{{{spec}}}} p{int(q * 100)}",
                    )
                    for q in (0.1, 0.5, 0.9)
                ),
            ),
            Panel(
                "Component reward means",
                "Mean reward of each spec component (judge, citation, format ...) over the "
                "interval.",
                "short",
                (
                    Query(
                        _share(
                            f"rate(tribunal_spec_component_reward_sum_total{{{SPEC}}}[{RATE}])",
                            f"rate(tribunal_spec_component_rewards_total{{{SPEC}}}[{RATE}])",
                            "spec, component",
                        ),
                        "{{spec}} {{component}}",
                    ),
                ),
            ),
            Panel(
                "Model cost per hour, by spec",
                "What each spec's items spent on model calls (their components' "
                "details.usage.cost_usd; an audit charged to its auditor spec), USD per hour: "
                "against the spec's budget_usd, how soon its batches are refused.",
                "currencyUSD",
                (
                    Query(
                        f"3600 * max by (spec) (rate(tribunal_spec_cost_usd_total{{{SPEC}}}"
                        f"[{RATE}]))",
                        "{{spec}} USD/h",
                    ),
                ),
            ),
            Panel(
                "Spec errors by class /s",
                "Spec items answered with an error, by class.",
                "reqps",
                (
                    Query(
                        f"max by (spec, code) (rate(tribunal_spec_errors_total{{{SPEC}}}[{RATE}]))",
                        "{{spec}} {{code}}",
                    ),
                ),
            ),
        ),
    ),
    (
        "Processes and Redis",
        (
            Panel(
                "API processes up",
                "Scrape targets answering: every API process Prometheus finds.",
                "short",
                (Query('sum by (job) (up{job=~"tribunal-.*"})', "{{job}}"),),
                kind="stat",
            ),
            Panel(
                "Redis memory",
                "Redis's used_memory: past maxmemory, writes fail (new batches 503/429).",
                "bytes",
                (Query("max(tribunal_redis_used_memory_bytes)", "used"),),
            ),
        ),
    ),
)
"""The dashboard's rows and panels (docs/monitoring.md lists them)."""


def panel_queries() -> list[tuple[str, str]]:
    """Every panel's ``(title, PromQL)``, with the dashboard's variables left in."""
    return [(p.title, q.expr) for _, panels in ROWS for p in panels for q in p.queries]


def _variable(name: str, query: str) -> dashboard.QueryVariable:
    return (
        dashboard.QueryVariable(name)
        .label(name)
        .query(query)
        .datasource(DATASOURCE)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
    )


def _panel(panel: Panel, panel_id: int) -> timeseries.Panel | stat.Panel:
    built: timeseries.Panel | stat.Panel
    if panel.kind == "timeseries":
        legend = (
            common.VizLegendOptions()
            .display_mode(LegendDisplayMode.LIST)
            .placement(LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        built = timeseries.Panel().legend(legend)
    else:
        built = stat.Panel().reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
    built.id(panel_id).title(panel.title).description(panel.description).unit(
        panel.unit
    ).datasource(DATASOURCE).span(panel.width).height(8)
    for ref, query in zip("ABCDEFGH", panel.queries, strict=False):
        built.with_target(
            prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(ref)
        )
    return built


def build_dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    board = (
        dashboard.Dashboard("Tribunal")
        .uid("tribunal")
        .description(
            "Tribunal's reward services: per verifier and per reward spec (docs/monitoring.md)."
        )
        .tags(["tribunal"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .with_variable(_variable("verifier", "label_values(tribunal_live_workers, verifier)"))
        .with_variable(_variable("spec", "label_values(tribunal_spec_items_total, spec)"))
    )
    panel_id = 0
    for title, panels in ROWS:
        panel_id += 1
        board.with_row(dashboard.Row(title).id(panel_id))
        for panel in panels:
            panel_id += 1
            board.with_panel(_panel(panel, panel_id))
    document: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return document


@dataclass(frozen=True)
class AlertBounds:
    """The alerts' bounds and durations (Prometheus durations, e.g. ``5m``).

    Attributes:
        window: Range of the rates an alert reads.
        hold: How long a condition must hold before the alert fires (``for:``).
        oldest_age_s: Bound on the oldest pending item's age, seconds.
        error_share: Bound on the share of items answered with an error (bad_input aside).
        backend_error_share: Share of backend calls unavailable or timed out past which the
            backend is down.
        baseline: Range of the baseline (ending ``window`` ago) a hack signature's mean over
            ``window`` is compared with.
        drift_ratio: A signature drifts when its mean exceeds this times its baseline's.
        drift_floor: ... and exceeds this (a share of items, or characters for length).
    """

    window: str = "5m"
    hold: str = "5m"
    oldest_age_s: float = 300
    error_share: float = 0.05
    backend_error_share: float = 0.5
    baseline: str = "1h"
    drift_ratio: float = 1.5
    drift_floor: float = 0.05


def _signature_mean(window: str, before: str | None = None) -> str:
    """PromQL: each spec's mean of each hack signature over ``window`` (ending ``before``
    ago: a baseline that leaves out the range it is compared with)."""
    offset = f" offset {before}" if before else ""
    return (
        f"(max by (spec, signature) (increase(tribunal_spec_signature_total[{window}]{offset})) "
        "/ on (spec) group_left max by (spec) (increase(tribunal_spec_signature_items_total"
        f'{{outcome="counted"}}[{window}]{offset})))'
    )


def _audit_gap_low(window: str) -> str:
    """PromQL: the lower end of the 95 % normal interval on the paired differences
    (training - audit reward) of each spec's items audited over ``window``:
    ``mean(d) - 1.96 sqrt((E[d^2] - mean(d)^2) / n)`` (the variance with n, not n - 1: a
    shade narrower, negligible past a few dozen items; docs/audits.md)."""

    def increase(selector: str) -> str:
        return f"max by (spec) (increase({selector}[{window}]))"

    n = increase('tribunal_audit_items_total{outcome="audited"}')
    training = increase('tribunal_audit_reward_total{scorer="training"}')
    audit = increase('tribunal_audit_reward_total{scorer="audit"}')
    gap = f"(({training} - {audit}) / {n})"
    squares = f"({increase('tribunal_audit_gap_squares_total')} / {n})"
    return f"{gap} - 1.96 * sqrt(clamp_min({squares} - {gap} ^ 2, 0) / {n})"


def alert_rules(bounds: AlertBounds | None = None) -> dict[str, Any]:
    """The alert rules in Prometheus's rule-file format."""
    b = bounds or AlertBounds()
    w = b.window
    rules = [
        {
            "alert": "TribunalNoLiveWorker",
            "expr": "max by (verifier) (tribunal_live_workers) == 0",
            "for": b.hold,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No live {{ $labels.verifier }} worker",
                "description": "No {{ $labels.verifier }} worker has sent a heartbeat: its "
                "items wait in the queue. Check the worker's logs (a refusal to start is in "
                "/readyz) and restart it.",
            },
        },
        {
            "alert": "TribunalQueueStalled",
            "expr": f"max by (verifier) (tribunal_queue_oldest_age_seconds) > {b.oldest_age_s:g}",
            "for": b.hold,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The oldest {{ $labels.verifier }} item waits {{ $value }} s",
                "description": "An item has waited more than "
                f"{b.oldest_age_s:g} s: workers are too few, stuck or gone. Add workers or "
                "find what holds them (pool busy, backend latency).",
            },
        },
        {
            "alert": "TribunalErrorShareHigh",
            "expr": _share(
                f'sum without (code) (rate(tribunal_item_errors_total{{code!="bad_input"}}[{w}]))',
                f"sum without (outcome) (rate(tribunal_items_scored_total[{w}]))",
                "verifier",
            )
            + f" > {b.error_share:g}",
            "for": b.hold,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.verifier }}: {{ $value | humanizePercentage }} of items "
                "fail",
                "description": "More than "
                f"{b.error_share:.0%} of items get an error result: see the dashboard's "
                "Errors by class panel for which.",
            },
        },
        {
            "alert": "TribunalBackendDown",
            "expr": _share(
                "sum without (outcome) (rate(tribunal_backend_calls_total"
                f'{{outcome=~"backend_unavailable|timeout"}}[{w}]))',
                f"sum without (outcome) (rate(tribunal_backend_calls_total[{w}]))",
                "verifier",
            )
            + f" > {b.backend_error_share:g}",
            "for": b.hold,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "The {{ $labels.verifier }} LLM backend is down",
                "description": "Most LLM calls of {{ $labels.verifier }} are unreachable or "
                "time out: check the vLLM server (TRIBUNAL_JUDGE_BASE_URL / "
                "TRIBUNAL_CITATION_BASE_URL).",
            },
        },
        {
            "alert": "TribunalAuditGap",
            "expr": f"{_audit_gap_low(w)} > 0",
            "for": b.hold,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.spec }}: training reward above its audit (95 % interval "
                "from {{ $value }})",
                "description": "Over the last "
                f"{w}, the audited items of {{{{ $labels.spec }}}} were paid more by training "
                "than by the spec's auditor, beyond a 95 % normal interval on the paired "
                "differences: the policy may be earning reward the auditor does not grant. "
                "See GET /v1/audits for the items that drive the gap (docs/audits.md).",
            },
        },
        {
            "alert": "TribunalSignatureDrift",
            "expr": f"{_signature_mean(w)} > {b.drift_ratio:g} * "
            f"{_signature_mean(b.baseline, w)} and {_signature_mean(w)} > {b.drift_floor:g}",
            "for": b.hold,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.spec }}: {{ $labels.signature }} drifted to {{ $value }}",
                "description": "The mean of the hack signature {{ $labels.signature }} over the "
                f"last {w} is more than {b.drift_ratio:g} times its mean over the "
                f"{b.baseline} before: the responses changed in a way a gamed reward often shows "
                "(length, repetition, identical completions, uncommitted answers). Compare the "
                "audit gap and read the items in the reward inspector (docs/audits.md).",
            },
        },
        {
            "alert": "TribunalApiDown",
            "expr": 'up{job=~"tribunal-.*"} == 0',
            "for": b.hold,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.instance }} ({{ $labels.job }}) does not answer",
                "description": "Prometheus cannot scrape this API process: its clients get "
                "no answer either. Check its container or process.",
            },
        },
    ]
    return {"groups": [{"name": "tribunal", "rules": rules}]}


def render() -> dict[Path, str]:
    """Each generated file's text, by path."""
    header = "# Generated by scripts/monitoring.py (`make monitoring`); do not edit.\n"
    return {
        DASHBOARD_PATH: json.dumps(build_dashboard(), indent=2, sort_keys=True) + "\n",
        ALERTS_PATH: header + yaml.safe_dump(alert_rules(), sort_keys=False, width=100),
    }


def main() -> int:
    """Write the generated files; with ``--check``, exit 1 if one differs instead."""
    stale = []
    for path, text in render().items():
        if path.exists() and path.read_text() == text:
            continue
        if "--check" in sys.argv:
            stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in stale:
        print(f"{path.relative_to(ROOT)} is stale: run make monitoring", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
