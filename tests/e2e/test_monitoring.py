"""Monitoring: a real Prometheus scrapes a running stack; every dashboard panel's query and
every alert rule's expression answers, and each alert fires when its fault is made.

The stack is real processes on a real Redis: ``tribunal api`` and one ``tribunal worker`` of
each of math, code, judge, citation and the gateway. Prometheus is Debian's ``prometheus``
(scripts/setup-tools.sh installs it for ``make test``), started on a free port of 127.0.0.1
with a configuration like docker/monitoring/prometheus.yml (static targets in place of the
compose DNS names, a 1 s scrape and evaluation) and the alert rules of scripts/monitoring.py
with short windows and bounds. The judge model is the scripted OpenAI-compatible server
(``FakeOpenAIServer``, in a thread of this process), which stands in for vLLM: it needs a
GPU and weights this machine does not have; stopping it is the "backend down" fault.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import ROOT, RedisServer, free_port, stop_process, wait_ready
from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.testing.stack import RunningService, start_process

pytestmark = pytest.mark.e2e

SERVICES = ("math", "code", "judge", "citation", "gateway")
EVIDENCE = {"S1": "The Eiffel Tower is 330 metres tall and stands in Paris."}
CITED = "<answer><cite id=S1>The Eiffel Tower is 330 metres tall.</cite></answer>"
ADD_TESTS = {"kind": "function", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}
# Bounds of the test's copy of the alert rules: short, so that each fault shows in seconds (the
# drift alert's baseline ends a window ago: it can fire a window after the honest traffic).
WINDOW = "10s"


@functools.cache
def monitoring() -> ModuleType:
    """scripts/monitoring.py (not a package: loaded from its path)."""
    spec = importlib.util.spec_from_file_location("monitoring", ROOT / "scripts/monitoring.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_dashboard_and_rules_are_the_generated_ones() -> None:
    for path, text in monitoring().render().items():
        assert path.read_text() == text, f"{path} is stale: run make monitoring"


def test_the_dashboard_names_its_datasource_and_every_query_its_variables() -> None:
    module = monitoring()
    board = module.build_dashboard()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    assert {p["datasource"]["uid"] for p in panels} == {"prometheus"}
    provisioned = yaml.safe_load(
        (ROOT / "docker/monitoring/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert provisioned["datasources"][0]["uid"] == "prometheus"
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            # A cluster-wide metric is reported alike by every API process: summed, it would
            # count once per replica.
            if "tribunal_request_" not in expr and "up{" not in expr:
                assert "sum by" not in expr, (panel["title"], expr)
            if "tribunal_spec_" in expr:
                assert '$spec"' in expr
            elif "verifier" in expr and "tribunal_request_errors" not in expr:
                assert '$verifier"' in expr


def need_prometheus() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.fail("prometheus is not installed: scripts/setup-tools.sh installs it")
    return path


def test_promtool_accepts_the_rules_and_the_compose_configuration(tmp_path: Path) -> None:
    need_prometheus()
    rules = ROOT / "docker/monitoring/alerts.yml"
    checked = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = yaml.safe_load((ROOT / "docker/monitoring/prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]  # compose mounts it there
    config["rule_files"] = [str(rules)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(
        ["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name in SERVICES:
        [dns] = jobs[f"tribunal-{name}"]["dns_sd_configs"]
        assert dns["names"] == [name]
        assert str(dns["port"]) == compose[name]["ports"][0].rsplit(":", 1)[1]
    # What the profile's containers mount is in the repository.
    for name in ("prometheus", "grafana"):
        assert compose[name]["profiles"] == ["monitoring"]
        for volume in compose[name]["volumes"]:
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), (name, source)


class Prometheus:
    """Debian's prometheus on a free port of 127.0.0.1, and its HTTP API."""

    def __init__(self, workdir: Path, targets: dict[str, str], rules: dict[str, Any]) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.fired: set[str] = set()
        """Alerts :meth:`wait_firing` saw fire."""
        (workdir / "alerts.yml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "alerts.yml")],
            "scrape_configs": [
                {"job_name": f"tribunal-{name}", "static_configs": [{"targets": [target]}]}
                for name, target in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process = start_process(
            [
                need_prometheus(),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
            ],
            {},
            workdir / "prometheus.log",
        )
        wait_ready(self.url, 60, {"prometheus": self.process}, path="/-/ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        assert response.status_code == 200, (expr, response.text)
        result: list[dict[str, Any]] = response.json()["data"]["result"]
        return result

    def firing(self) -> set[tuple[str, str]]:
        """``(alertname, verifier, spec or job)`` of every firing alert."""
        alerts = httpx.get(f"{self.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return {
            (
                a["labels"]["alertname"],
                a["labels"].get("verifier", a["labels"].get("spec", a["labels"].get("job", ""))),
            )
            for a in alerts
            if a["state"] == "firing"
        }

    def wait_for(self, expr: str, why: str, timeout_s: float = 30) -> None:
        """Poll until the instant query ``expr`` returns a series (a scrape has seen it)."""
        deadline = time.monotonic() + timeout_s
        while not self.query(expr):
            assert time.monotonic() < deadline, why
            time.sleep(0.5)

    def wait_firing(
        self, alert: tuple[str, str], timeout_s: float = 90, meanwhile: Callable[[], Any] = list
    ) -> None:
        """Poll until ``alert`` fires, calling ``meanwhile`` (traffic that keeps a rate up)."""
        deadline = time.monotonic() + timeout_s
        while alert not in self.firing():
            if time.monotonic() > deadline:
                raise AssertionError(f"{alert} did not fire; firing: {self.firing()}")
            meanwhile()
            time.sleep(0.5)
        self.fired.add(alert[0])


LENIENT = """
name: lenient_math
version: "1"
components:
  math:
    verifier: math
    inputs:
      response: response
      ground_truth: ground_truth
      options: {value: {answer_format: lenient}}
audit: {spec: rloo_math, rate: 1.0}
"""


def _audited_spec(workdir: Path) -> Path:
    """A spec that reads answers leniently, audited by the shipped strict ``rloo_math``."""
    specs = workdir / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "lenient_math.yaml").write_text(LENIENT)
    return specs


def start_stack(
    workdir: Path, redis: RedisServer, backend: FakeOpenAIServer
) -> dict[str, RunningService]:
    """API and one worker of every service, started together, then waited for."""
    urls = {name: f"http://127.0.0.1:{free_port()}" for name in SERVICES}
    env = {
        "TRIBUNAL_QUEUE": "redis",
        "TRIBUNAL_REDIS_URL": redis.url,
        "TRIBUNAL_KEY_PREFIX": f"mon{uuid.uuid4().hex[:8]}",
        "TRIBUNAL_LOG_LEVEL": "INFO",
        "TRIBUNAL_WORKER_HEARTBEAT_S": "0.5",
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CITATION_PROCESSES": "1",
        "TRIBUNAL_JUDGE_BASE_URL": backend.base_url,
        "TRIBUNAL_JUDGE_MODEL": "fake-judge",
        "TRIBUNAL_CITATION_BASE_URL": backend.base_url,
        "TRIBUNAL_CITATION_MODEL": "fake-judge",
        # Down, the backend answers within a second: no retry waits out the test.
        "TRIBUNAL_JUDGE_TIMEOUT_S": "10",
        "TRIBUNAL_JUDGE_MAX_RETRIES": "1",
        "TRIBUNAL_JUDGE_BACKOFF_S": "0.05",
        # A limit no test traffic reaches, and a price: the rate-wait and cost panels answer.
        "TRIBUNAL_JUDGE_REQUESTS_PER_MINUTE": "100000",
        "TRIBUNAL_JUDGE_PRICE": '{"prompt": 0.15, "completion": 0.6}',
        **{f"TRIBUNAL_GATEWAY_{n.upper()}_URL": urls[n] for n in SERVICES if n != "gateway"},
        "TRIBUNAL_GATEWAY_SPECS_DIR": str(_audited_spec(workdir)),
    }
    stack = {name: RunningService(name, urls[name], workdir, env=env) for name in SERVICES}
    try:
        for running in stack.values():
            running.start_api()
            running.start_worker()
        for running in stack.values():
            wait_ready(running.base_url, 120, running.processes)
    except BaseException:
        for running in stack.values():
            running.stop(grace_s=0)
            print(running.log_text())
        raise
    return stack


@dataclass
class Stack:
    """The running services and the judge's stand-in model server."""

    services: dict[str, RunningService]
    backend: FakeOpenAIServer


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, tmp_path: Path, redis_server: RedisServer
) -> Iterator[Stack]:
    backend = FakeOpenAIServer(FakeScript(rules=[("invents", 0)]))
    backend.start()
    services = start_stack(tmp_path, redis_server, backend)
    try:
        yield Stack(services, backend)
    finally:
        failed = getattr(request.node, "rep_call", None)
        for service in services.values():
            service.stop(grace_s=2)
            if failed is not None and failed.failed:
                print(service.log_text())
        backend.stop()


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(f"{url}{path}", json=body, timeout=60)
    assert response.status_code in (200, 202), response.text
    return response


def judge_item(tag: str) -> dict[str, Any]:
    return {
        "question": f"How tall is the Eiffel Tower? ({tag})",
        "response": CITED,
        "positive_rubrics": ["States the height"],
        "negative_rubrics": ["invents a source"],
    }


def score_everything(gateway: str, tag: str) -> None:
    """One batch across every verifier and three specs (new texts per ``tag``: no cache)."""
    items = [
        {"id": "m", "verifier": "math", "response": "\\boxed{\\frac{1}{2}}", "ground_truth": "0.5"},
        {
            "id": "c",
            "verifier": "code",
            "language": "python",
            "code": f"def add(a, b):\n    return a + b  # {tag}\n",
            "tests": ADD_TESTS,
        },
        {"id": "j", "verifier": "judge", **judge_item(tag)},
        {"id": "t", "verifier": "citation", "response": CITED + f" {tag}", "evidence": EVIDENCE},
        {"id": "r", "spec": "refiner_rubric_citation", **judge_item(tag), "evidence": EVIDENCE},
        {
            "id": "k",
            "spec": "tcr_agent",
            "response": f"```python\ndef add(a, b):\n    return a - b  # {tag}\n```",
            "tests": ADD_TESTS,
            "num_turns": 6,
        },
    ]
    items += [
        {"id": f"q{i}", "spec": "rloo_math", "response": f"\\boxed{{{i}}}", "ground_truth": "1"}
        for i in range(4)
    ]
    items += [
        {"id": f"l{i}", "group_id": f"{tag}{i}", "spec": "lenient_math",
         "response": f"{form}\\boxed{{1}}", "ground_truth": "1"}
        for i, form in enumerate(("So ", "Thus ", "Hence "))
    ]  # fmt: skip
    results = post(gateway, "/v1/score", {"items": items}).json()["results"]
    assert all(r["error"] is None for r in results), results


def hack_traffic(gateway: str, tag: str) -> None:
    """Answers the lenient spec pays and its strict auditor does not (a bare number), longer
    than the honest ones (a length drift)."""
    items = [
        {"id": f"h{i}", "group_id": f"{tag}h{i}", "spec": "lenient_math",
         "response": f"({tag} {i}) adding up we get 1", "ground_truth": "1"}
        for i in range(4)
    ]  # fmt: skip
    results = post(gateway, "/v1/score", {"items": items}).json()["results"]
    assert [r["reward"] for r in results] == [1.0] * 4, results


@pytest.mark.timeout(420)
def test_prometheus_scrapes_the_stack_and_every_panel_and_alert_answers(stack: Stack) -> None:
    module = monitoring()
    bounds = module.AlertBounds(window=WINDOW, hold="0s", oldest_age_s=1)
    rules = module.alert_rules(bounds)
    services, backend = stack.services, stack.backend
    gateway = services["gateway"].base_url
    targets = {name: s.base_url.removeprefix("http://") for name, s in services.items()}
    with tempfile.TemporaryDirectory(prefix="prometheus-") as workdir:
        prometheus = Prometheus(Path(workdir), targets, rules)
        try:
            run_scenario(prometheus, services, backend, gateway, module, rules)
        finally:
            stop_process(prometheus.process, grace_s=5)


def run_scenario(
    prometheus: Prometheus,
    services: dict[str, RunningService],
    backend: FakeOpenAIServer,
    gateway: str,
    module: ModuleType,
    rules: dict[str, Any],
) -> None:
    # Healthy traffic, twice a few scrapes apart (rates need two samples), then once more
    # the same batch: answered from the caches.
    score_everything(gateway, "a")
    prometheus.wait_for(
        'count_over_time(tribunal_spec_items_total{spec="rloo_math"}[1m]) >= 2',
        "the first round's counters were never scraped twice",
    )
    score_everything(gateway, "b")
    score_everything(gateway, "b")
    # A refused request: the API processes count their error answers.
    refused = httpx.post(f"{services['math'].base_url}/v1/math/score", json={"items": "none"})
    assert refused.status_code == 422
    prometheus.wait_for(
        'tribunal_spec_items_total{spec="rloo_math"} >= 8',
        "the spec counters never reached Prometheus",
    )
    healthy = prometheus.firing()
    assert not {a for a in healthy if a[0] != "TribunalQueueStalled"}, healthy

    # The policy finds a hack the training spec pays and its auditor does not.
    hacks = iter(range(10_000))
    prometheus.wait_firing(
        ("TribunalSignatureDrift", "lenient_math"),
        meanwhile=lambda: hack_traffic(gateway, f"hack{next(hacks)}"),
    )
    prometheus.wait_firing(
        ("TribunalAuditGap", "lenient_math"),
        meanwhile=lambda: hack_traffic(gateway, f"hack{next(hacks)}"),
    )

    # The judge backend goes down: every judge call is unavailable, every judge item fails.
    backend.stop()
    down = iter(range(10_000))

    def judge_traffic() -> None:
        post(
            services["judge"].base_url,
            "/v1/judge/score",
            {"items": [{"id": "d", **judge_item(f"down {next(down)}")}]},
        )

    prometheus.wait_firing(("TribunalBackendDown", "judge"), meanwhile=judge_traffic)
    prometheus.wait_firing(("TribunalErrorShareHigh", "judge"), meanwhile=judge_traffic)
    # The spec's judge component fails too: spec errors by class.
    spec_down = {"id": "r", "spec": "refiner_rubric_citation", **judge_item("down")}
    post(gateway, "/v1/score", {"items": [{**spec_down, "evidence": EVIDENCE}]})

    # The math worker dies: no live worker, and a job waits past the bound.
    assert ("TribunalNoLiveWorker", "math") not in prometheus.firing()
    services["math"].signal_group("worker0", signal.SIGKILL)
    services["math"].wait_exit("worker0", 30)
    prometheus.wait_firing(("TribunalNoLiveWorker", "math"))
    job = {"verifier": "math", "items": [{"id": "w", "response": "1", "ground_truth": "1"}]}
    post(services["math"].base_url, "/v1/jobs", job)
    prometheus.wait_firing(("TribunalQueueStalled", "math"))

    # Every panel's query, with the dashboard's variables at "All", returns series.
    prometheus.wait_for(
        'tribunal_spec_errors_total{spec="refiner_rubric_citation"}',
        "the spec error above was never scraped",
    )
    empty = []
    for title, expr in module.panel_queries():
        concrete = (
            expr.replace("$verifier", ".*").replace("$spec", ".*").replace("$__rate_interval", "5m")
        )
        if not prometheus.query(concrete):
            empty.append((title, concrete))
    assert not empty, empty
    # An API process dies: its target stops answering.
    assert not prometheus.query('up{job="tribunal-gateway"} == 0')
    services["gateway"].signal_group("api", signal.SIGKILL)
    prometheus.wait_firing(("TribunalApiDown", "tribunal-gateway"))
    # Every alert rule was made to fire (its expression answered, past its bound).
    assert prometheus.fired == {rule["alert"] for rule in rules["groups"][0]["rules"]}
