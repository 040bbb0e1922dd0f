"""The reward inspector (``/inspect``) in a real browser, with the stack running.

Debian's chromium, headless, driven by Selenium through Debian's chromedriver, opens the
gateway's page (``tribunal api gateway`` + ``tribunal worker gateway`` on a real Redis, with
an API key) in front of the four verifiers as real processes on the embedded queue; the
judge model is the scripted OpenAI-compatible server (vLLM needs a GPU this machine does not
have). The test scores items through the gateway, then reads them on the page: ids, rewards,
the error of a failed item, the filters, a citation item's highlighted claims, a judge
item's reasons, a spec's formula, the groups and the charts, the monitor view (audit gap,
hack signatures and judge cost per step window, as the API answers them); and a hostile
response and id are shown as text. A screenshot of each view is saved under the test's tmp dir.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    TRIBUNAL,
    RedisServer,
    free_port,
    start_process,
    stop_process,
    wait_ready,
)
from tribunal.llm.testing import FakeOpenAIServer, FakeScript

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(
        shutil.which("chromium") is None or shutil.which("chromedriver") is None,
        reason="chromium and chromium-driver not installed (scripts/setup-tools.sh --browser)",
    ),
]

KEY = "sk-inspector-test"
EVIDENCE = {
    "S1": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "S2": "Bananas are rich in potassium.",
}
CITED = (
    "<answer><cite id=S1>The Eiffel Tower is 330 metres tall.</cite> "
    "<cite id=S2>The Eiffel Tower is made of cheese.</cite></answer>"
)
HOSTILE = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
REASON = "The response states the height plainly."


@dataclass
class Stack:
    """The gateway's URL, the verifiers' URLs, the processes and logs."""

    gateway: str
    urls: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]]
    logs: dict[str, Path]


def _audited_spec(tmp: Path) -> Path:
    """A spec reading answers leniently, audited (every group) by the strict ``rloo_math``;
    and a judged spec with a budget (the judge is priced), not audited."""
    specs = tmp / "specs"
    specs.mkdir()
    (specs / "lenient_math.yaml").write_text(
        "name: lenient_math\nversion: '1'\ncomponents:\n  math:\n    verifier: math\n"
        "    inputs:\n      response: response\n      ground_truth: ground_truth\n"
        "      options: {value: {answer_format: lenient}}\naudit: {spec: rloo_math, rate: 1.0}\n"
    )
    (specs / "judged.yaml").write_text(
        "name: judged\nversion: '1'\nbudget_usd: 5.0\ncomponents:\n  judge:\n"
        "    verifier: judge\n"
        "    inputs: {question: question, response: response, rubrics: {value: [{text: ok}]}}\n"
    )
    return specs


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("inspect-stack")
    judge = FakeOpenAIServer(FakeScript(rules=[("invents", 0), ("cheese", 0)], reason=REASON))
    judge.start()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    urls = {n: f"http://127.0.0.1:{free_port()}" for n in ("math", "code", "judge", "citation")}
    gateway = f"http://127.0.0.1:{free_port()}"
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    judge_env = {
        "TRIBUNAL_JUDGE_BASE_URL": judge.base_url,
        "TRIBUNAL_JUDGE_MODEL": "fake-judge",
        "TRIBUNAL_JUDGE_PRICE": '{"prompt": 10, "completion": 10}',
    }
    gateway_env = {
        "TRIBUNAL_QUEUE": "redis",
        "TRIBUNAL_REDIS_URL": redis_server.url,
        "TRIBUNAL_KEY_PREFIX": f"insp{free_port()}",
        "TRIBUNAL_API_KEY": KEY,
        **{f"TRIBUNAL_GATEWAY_{name.upper()}_URL": url for name, url in urls.items()},
        "TRIBUNAL_GATEWAY_SPECS_DIR": str(_audited_spec(tmp)),
    }
    argvs = {
        name: ([*TRIBUNAL, "api", name, "--port", url.rsplit(":", 1)[1]], {**memory, **judge_env})
        for name, url in urls.items()
    }
    argvs["gateway"] = (
        [*TRIBUNAL, "api", "gateway", "--port", gateway.rsplit(":")[-1]],
        gateway_env,
    )
    argvs["gateway-worker"] = ([*TRIBUNAL, "worker", "gateway"], gateway_env)
    try:
        for label, (argv, env) in argvs.items():
            logs[label] = tmp / f"{label}.log"
            processes[label] = start_process(argv, env, logs[label])
        for url in [*urls.values(), gateway]:
            wait_ready(url, 90, processes)
        yield Stack(gateway, urls, processes, logs)
    except BaseException:
        for label, path in logs.items():
            print(f"--- {label}\n{path.read_text()}")
        raise
    finally:
        for process in processes.values():
            stop_process(process)
        judge.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    # --no-sandbox: chromium refuses to run as root with its own sandbox (CI runs as root).
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1100"):
        options.add_argument(argument)
    service = Service(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    # The API key on every request of the page, as a browser that answered the Basic prompt
    # sends it (tests/core/test_inspect.py checks the Basic form itself).
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {KEY}"}}
    )
    yield driver
    driver.quit()


def _items() -> list[dict[str, Any]]:
    judge_item = {
        "question": "How tall is the Eiffel Tower?",
        "response": "It is 330 metres tall. " + HOSTILE,
        "positive_rubrics": ["States the height"],
        "negative_rubrics": ["invents a source"],
        "rubric_sets": [],
    }
    math = {"verifier": "math", "group_id": "grp-1", "ground_truth": "0.5"}
    return [
        {"id": "m1", **math, "response": "so \\boxed{\\frac{1}{2}}"},
        {"id": "m2", **math, "response": "so \\boxed{3}"},
        {"id": "m3", **math, "response": "so \\boxed{\\frac{1}{2}}"},
        {"id": "m-bad", "verifier": "math", "response": "1"},
        {"id": "t1", "verifier": "citation", "response": CITED, "evidence": EVIDENCE},
        {"id": "j1", "verifier": "judge", **judge_item},
        {
            "id": "r1",
            "spec": "refiner_rubric_citation",
            **judge_item,
            "response": CITED,
            "evidence": EVIDENCE,
        },
        {"id": "x" + HOSTILE, "verifier": "math", "response": HOSTILE, "ground_truth": "1"},
    ]


def _wait(driver: WebDriver, condition: Any, what: str, timeout_s: float = 30) -> Any:
    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.1).until(condition)
    except TimeoutException:
        logs = driver.get_log("browser") if hasattr(driver, "get_log") else []
        page = driver.find_element(By.TAG_NAME, "body").text[:3000]
        raise AssertionError(f"the page never showed {what}:\n{page}\n{logs}") from None


def _rows(driver: WebDriver) -> dict[str, dict[str, str]]:
    # Read in one script: the live list is redrawn every few seconds under WebDriver's feet.
    cells: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#items tbody tr')]"
        ".map((row) => [...row.cells].map((cell) => cell.textContent));"
    )
    return {c[1]: {"verifier": c[2], "reward": c[5], "error": c[6]} for c in cells}


def _open_first_item(driver: WebDriver) -> None:
    driver.execute_script("document.querySelector('#items a.item-link').click();")


def _filter(driver: WebDriver, **values: str) -> None:
    driver.find_element(By.ID, "clear").click()
    for name, value in values.items():
        field = driver.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    driver.find_element(By.ID, "apply").click()


def test_the_inspector_shows_what_the_gateway_just_scored(
    stack: Stack, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(f"{stack.gateway}/inspect")
    _wait(browser, lambda d: "items match" in d.find_element(By.ID, "items-count").text, "a list")
    items = _items()
    answer = httpx.post(
        f"{stack.gateway}/v1/score",
        json={"items": items},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    results = {r["id"]: r for r in answer.json()["results"]}
    assert results["m-bad"]["error"]["code"] == "bad_input"

    # The live list picks them up by itself.
    _wait(browser, lambda d: len(_rows(d)) == len(items), f"the {len(items)} items scored")
    browser.find_element(By.ID, "live").click()  # still from here on: rows stay put
    rows = _rows(browser)
    assert list(rows) == [i["id"] for i in reversed(items)]  # newest first
    assert rows["m1"] == {"verifier": "math", "reward": "1", "error": ""}
    assert rows["m2"]["reward"] == "0"
    assert rows["m-bad"] == {"verifier": "math", "reward": "—", "error": "bad_input"}
    assert rows["r1"]["verifier"] == "spec:refiner_rubric_citation"
    assert rows["x" + HOSTILE]["reward"] == "0"  # the hostile id is text in its cell
    browser.save_screenshot(str(tmp_path / "1-items.png"))

    # Filters: errors only, then a reward range within a group.
    _filter(browser, error="any")
    _wait(browser, lambda d: list(_rows(d)) == ["m-bad"], "the failed item alone")
    _filter(browser, group="grp-1", min_reward="0.5")
    _wait(browser, lambda d: list(_rows(d)) == ["m3", "m1"], "grp-1's paid items")
    assert "group=grp-1" in browser.current_url  # the filtered view is a link too
    browser.save_screenshot(str(tmp_path / "2-filtered.png"))

    # The citation item: each claim marked by its support verdict, its ids linked to evidence.
    _filter(browser, item="t1")
    _wait(browser, lambda d: list(_rows(d)) == ["t1"], "the citation item")
    _open_first_item(browser)
    marks = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail mark.claim"), "claims"
    )
    verdicts = {m.text: m.get_attribute("data-verdict") for m in marks}
    assert verdicts == {
        "The Eiffel Tower is 330 metres tall.": "supported",
        "The Eiffel Tower is made of cheese.": "unsupported",
    }
    cites = browser.find_elements(By.CSS_SELECTOR, "#detail a.cite")
    assert [c.text for c in cites] == ["[S1]", "[S2]"]
    cites[1].click()
    snippet = browser.find_element(By.ID, "c0-ev-S2")
    assert "flash" in (snippet.get_attribute("class") or "")
    browser.save_screenshot(str(tmp_path / "3-citation.png"))
    permalink = browser.find_element(By.ID, "permalink").get_attribute("href")

    # The judge item: each rubric with its verdict and the judge's reason; the hostile
    # response is shown as the text it is, and none of it ran.
    _filter(browser, item="j1")
    _wait(browser, lambda d: list(_rows(d)) == ["j1"], "the judge item")
    _open_first_item(browser)
    table = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail table.rubrics"), "rubrics"
    )
    rubric_rows = [
        [c.text for c in r.find_elements(By.TAG_NAME, "td")]
        for r in table[0].find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert [(r[0], r[2], r[4]) for r in rubric_rows] == [
        ("States the height", "met", REASON),
        ("invents a source", "absent", REASON),
    ]
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "#detail pre.response").text
    assert browser.execute_script("return window.__xss === undefined")
    browser.save_screenshot(str(tmp_path / "4-judge.png"))

    # The spec item: sub-rewards and the formula with its values.
    _filter(browser, item="r1")
    _wait(browser, lambda d: list(_rows(d)) == ["r1"], "the spec item")
    _open_first_item(browser)
    formula = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail .formula"), "formula"
    )
    assert formula[0].text == "reward = 10 × judge + 0.2 × citation"
    browser.save_screenshot(str(tmp_path / "5-spec.png"))

    # Groups: grp-1's rewards side by side and its two identical completions.
    browser.find_element(By.CSS_SELECTOR, "#tabs button[data-view=groups]").click()
    _filter(browser)
    groups_js = (
        "return [...document.querySelectorAll('#groups tbody tr')].map((row) => ["
        "row.cells[0].textContent, [...row.querySelectorAll('a.chip')].map((c) => c.textContent),"
        "row.cells[4].textContent]);"
    )
    expected = [["grp-1", ["1", "0", "1"], "1"]]
    _wait(browser, lambda d: d.execute_script(groups_js) == expected, "grp-1 side by side")
    browser.save_screenshot(str(tmp_path / "6-groups.png"))

    # Charts: one card per verifier or spec, with uPlot's canvases.
    browser.find_element(By.CSS_SELECTOR, "#tabs button[data-view=charts]").click()
    cards_js = (
        "return Object.fromEntries([...document.querySelectorAll('.card')].map((card) => "
        "[card.dataset.scorer, [card.textContent, card.querySelectorAll('canvas').length]]));"
    )
    cards = _wait(
        browser, lambda d: (c := d.execute_script(cards_js)).get("math", ["", 0])[1] and c, "charts"
    )
    assert "5 items, 4 with a reward" in cards["math"][0] and "bad_input" in cards["math"][0]
    assert "States the height" in cards["judge"][0]  # its share of verdicts met
    assert set(cards) >= {"math", "judge", "citation", "spec:refiner_rubric_citation"}
    browser.save_screenshot(str(tmp_path / "7-charts.png"))

    # A job through the gateway's queue and worker (the record written by the worker
    # process, in Redis), found by its idempotency key.
    job_items = [
        {"id": f"q{i}", "spec": "rloo_math", "response": f"\\boxed{{{i}}}", "ground_truth": "1"}
        for i in range(3)
    ]
    created = httpx.post(
        f"{stack.gateway}/v1/jobs",
        json={"verifier": "gateway", "items": job_items, "idempotency_key": "batch-7"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert created.status_code == 202, created.text
    browser.find_element(By.CSS_SELECTOR, "#tabs button[data-view=items]").click()
    browser.find_element(By.ID, "live").click()  # live again: the worker writes when it has
    _filter(browser, key="batch-7")
    _wait(browser, lambda d: list(_rows(d)) == ["q2", "q1", "q0"], "the job's items by key")
    browser.find_element(By.ID, "live").click()
    assert _rows(browser)["q1"] == {"verifier": "spec:rloo_math", "reward": "1", "error": ""}

    # A teammate's link opens the item.
    browser.get(permalink)
    _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail mark.claim"), "the linked item"
    )
    assert browser.find_element(By.ID, "detail-id").text == "t1"
    assert browser.execute_script("return window.__xss === undefined")


RUBRIC_CELLS_ON_ONE_LINE = """
return [...document.querySelectorAll(
    '#detail table.rubrics td.polarity, #detail table.rubrics td.verdict,'
    + ' #detail table.rubrics td.score')].map((cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return [cell.textContent, range.getClientRects().length];
});
"""


def _post(url: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answer = httpx.post(
        url, json={"items": items}, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
    )
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def _kept(base: str, verifier: str, item_id: str) -> None:
    """Wait until the inspector keeps ``item_id`` (its record is written just after the
    result, off the scoring path)."""
    url = f"{base}/inspect/api/items/{verifier}/{item_id}"
    headers = {"Authorization": f"Bearer {KEY}"}
    for _ in range(100):
        if httpx.get(url, headers=headers, timeout=10).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError(f"{item_id} was never kept")


def test_cache_hits_item_ids_rubrics_and_failed_cases_read_true(
    stack: Stack, browser: WebDriver, tmp_path: Path
) -> None:
    """A group whose one paid completion was a cache hit is not "all equal"; an item opens by
    its own id; the rubric table's short cells stay on one line; a failed case shows what
    was expected beside what the program printed."""
    math = stack.urls["math"]
    paid = {"response": "so \\boxed{\\frac{1}{2}}", "ground_truth": "0.5"}
    _post(f"{math}/v1/math/score", [{"id": "warm", **paid}])  # now in the result cache
    group = [
        {"id": "c1", "group_id": "grp-cache", **paid},
        {"id": "c2", "group_id": "grp-cache", "response": "so \\boxed{7}", "ground_truth": "0.5"},
        {"id": "c3", "group_id": "grp-cache", "response": "so \\boxed{9}", "ground_truth": "0.5"},
    ]
    results = _post(f"{math}/v1/math/score", group)
    assert [(r["reward"], r["cached"]) for r in results] == [
        (1.0, True),
        (0.0, False),
        (0.0, False),
    ]

    _kept(math, "math", "c3")
    browser.get(f"{math}/inspect?view=groups&group=grp-cache")
    groups_js = (
        "return [...document.querySelectorAll('#groups tbody tr')].map((row) => ["
        "[...row.querySelectorAll('a.chip')].map((c) => [c.textContent, c.className]),"
        "row.cells[3].textContent]);"
    )
    expected = [
        [
            [["1", "chip cached"], ["0", "chip"], ["0", "chip"]],
            "std 0.471 · 1 from the result cache",
        ]
    ]
    _wait(browser, lambda d: d.execute_script(groups_js) == expected, "the group with its hit")
    browser.save_screenshot(str(tmp_path / "8-group-with-a-cache-hit.png"))

    # An item by its own id (newest record), also where a record id is expected.
    for link in (f"{math}/inspect?v=math&id=c1", f"{math}/inspect?v=math&rid=c2"):
        browser.get(link)
        _wait(browser, lambda d: d.find_elements(By.ID, "detail-id"), f"the item of {link}")
        assert browser.find_element(By.ID, "detail-id").text == link[-2:]
    browser.get(f"{math}/inspect?v=math&id=c1")
    head = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail p"), "c1's head")
    assert "a cache hit (answered from the result cache)" in head[0].text

    # Through the gateway: a judge item's rubrics and a code item with a failed stdio case.
    program = {
        "id": "k1",
        "verifier": "code",
        "language": "python",
        "code": "print(int(input()) * 2)",
        "tests": {
            "kind": "stdio",
            "cases": [{"stdin": "2\n", "stdout": "4\n"}, {"stdin": "3\n", "stdout": "7\n"}],
        },
    }
    judged = {**_items()[5], "id": "j2"}
    results = _post(f"{stack.gateway}/v1/score", [program, judged])
    assert results[0]["reward"] == 0.5 and results[1]["error"] is None
    _kept(stack.gateway, "gateway", "j2")
    browser.get(f"{stack.gateway}/inspect?v=gateway&id=j2")
    _wait(browser, lambda d: d.execute_script(RUBRIC_CELLS_ON_ONE_LINE), "the rubric table")
    cells = browser.execute_script(RUBRIC_CELLS_ON_ONE_LINE)
    assert [text for text, _ in cells] == ["positive", "met", "1", "negative", "absent", "0"]
    assert all(lines == 1 for _, lines in cells), cells
    browser.save_screenshot(str(tmp_path / "9-rubrics.png"))

    browser.get(f"{stack.gateway}/inspect?v=gateway&id=k1")
    rows_js = (
        "return [...document.querySelectorAll('#detail table.tests tbody tr')].map((row) => "
        "[...row.cells].slice(0, 5).map((cell) => cell.textContent));"
    )
    rows = _wait(browser, lambda d: d.execute_script(rows_js), "the code item's cases")
    assert [[r[0], r[1], r[3], r[4]] for r in rows] == [
        ["0", "accepted", "4\n", "as expected"],
        ["1", "wrong_answer", "7\n", "6\n"],
    ]
    browser.save_screenshot(str(tmp_path / "10-code-case.png"))


def test_the_monitor_view_shows_the_audit_gap_and_opens_its_items(
    stack: Stack, browser: WebDriver, tmp_path: Path
) -> None:
    # Issue 40: a lenient spec audited by the strict format; a bare number is paid by one only.
    # Last in the file: the tests before it count every item the page lists.
    items = [
        {"id": f"aud-{k}", "group_id": f"aud-g{k // 2}", "spec": "lenient_math",
         "response": response, "ground_truth": "7"}
        for k, response in enumerate(("So \\boxed{7}.", "adding up we get 7") * 2)
    ]  # fmt: skip
    answer = httpx.post(
        f"{stack.gateway}/v1/score",
        json={"items": items, "step": 3, "policy_version": "ckpt-3"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    )
    assert [r["reward"] for r in answer.json()["results"]] == [1.0] * 4, answer.text
    # A priced judge's spec at steps 3 and 12: two windows of signatures and cost.
    for step, response in ((3, "ok"), (12, "ok ok ok ok ok ok ok ok")):
        judged = [
            {"id": f"jdg-{step}-{k}", "group_id": f"jdg-{step}", "spec": "judged",
             "question": "q?", "response": response}
            for k in range(3)
        ]  # fmt: skip
        answer = httpx.post(
            f"{stack.gateway}/v1/score",
            json={"items": judged, "step": step},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=120,
        )
        assert all(r["error"] is None for r in answer.json()["results"]), answer.text
    signatures = _signatures(stack.gateway)
    browser.get(f"{stack.gateway}/inspect?view=monitor")
    rows_js = (
        "const card = document.querySelector('.card[data-spec=lenient_math]');"
        "return card && [[...card.querySelectorAll('table.windows tbody tr')].map((r) => "
        "[...r.cells].map((c) => c.textContent)), [...card.querySelectorAll('a.item-link')]"
        ".map((a) => a.textContent), card.querySelectorAll('canvas').length,"
        "[...card.querySelectorAll('table.driving tbody tr')].map((r) => r.cells[3].textContent)];"
    )
    windows, driving, canvases, policies = _wait(
        browser, lambda d: (r := d.execute_script(rows_js)) and r[0] and r, "the audited spec"
    )
    assert windows == [["step:0", "4", "1", "0.5", "0.5", "-0.066 to 1.066"]]
    assert sorted(driving) == ["aud-1", "aud-3"] and canvases == 3  # audit, signatures, length
    assert policies == ["ckpt-3", "ckpt-3"]  # the batch's policy_version, per driving item
    _page_shows_signatures(browser, signatures)
    browser.save_screenshot(str(tmp_path / "monitor.png"))
    browser.execute_script("document.querySelector('.card[data-spec=judged]').scrollIntoView();")
    browser.save_screenshot(str(tmp_path / "monitor-signatures.png"))
    browser.find_element(By.LINK_TEXT, "aud-1").click()
    _wait(browser, lambda d: d.find_element(By.ID, "detail-id").text == "aud-1", "the item view")


def _signatures(gateway: str) -> dict[str, dict[str, Any]]:
    """``GET /v1/signatures`` per spec, once it holds the monitor test's items (they are
    counted after the answer, off the scoring path)."""
    headers = {"Authorization": f"Bearer {KEY}"}
    expected = {"lenient_math": {"step:0": 4}, "judged": {"step:0": 3, "step:10": 3}}
    for _ in range(100):
        specs = httpx.get(f"{gateway}/v1/signatures", headers=headers, timeout=10).json()["specs"]
        report = {spec["spec"]: spec for spec in specs}
        counts = {
            name: {w["window"]: w["items"] for w in report[name]["windows"]}
            for name in expected
            if name in report
        }
        judged = report.get("judged", {})
        spent = sum(w["cost_usd"] for w in judged.get("windows", []))
        if counts == expected and judged["cost_usd"] == pytest.approx(spent, abs=1e-9):
            return report
        time.sleep(0.1)
    raise AssertionError(f"the signatures never counted the monitor's items: {specs}")


MONITOR_SIGNATURES_JS = """
return [...document.querySelectorAll('#view-monitor .card')].map((card) => [
  card.dataset.spec,
  [...card.querySelectorAll('table.signatures thead th')].map((c) => c.textContent),
  [...card.querySelectorAll('table.signatures tbody tr')].map((r) =>
    [...r.cells].map((c) => c.textContent)),
  (card.querySelector('p.spend') || {}).textContent,
  charts.filter((c) => card.contains(c.root)).map((c) =>
    [c.root.parentNode.dataset.chart, c.series.slice(1).map((s) => s.label), c.data.slice(1)]),
]);
"""


def _close(text: str, value: float, digits: int) -> bool:
    """Whether a cell the page wrote with ``digits`` decimals (``$`` for USD) reads ``value``."""
    return abs(float(text.lstrip("$")) - value) <= 0.5 * 10**-digits + 1e-12


def _page_shows_signatures(browser: WebDriver, report: dict[str, dict[str, Any]]) -> None:
    """The Monitor view shows, per spec, what ``GET /v1/signatures`` answers: each window's
    items, mean length and signatures (table and charts), its cost and the spec's spend
    beside its budget."""
    cards = _wait(
        browser,
        lambda d: (
            (cards := {c[0]: c for c in d.execute_script(MONITOR_SIGNATURES_JS)})
            and all(len(cards.get(n, [0, 0, []])[2]) == len(report[n]["windows"]) for n in report)
            and cards
        ),
        "the signature tables of every spec",
    )
    assert {"lenient_math", "judged"} <= report.keys()
    for name, spec in report.items():
        _, head, rows, spend, drawn = cards[name]
        shares = head[3:-2]
        assert head[:3] == ["window", "items", "length"] and head[-2:] == ["cost", "unpriced"]
        assert shares and all(s in spec["windows"][0] for s in shares), head
        for row, window in zip(rows, spec["windows"], strict=True):
            assert row[:2] == [window["window"], str(window["items"])], (name, row)
            assert _close(row[2], window["length"], 1), (name, row)
            for cell, share in zip(row[3:-2], shares, strict=True):
                assert _close(cell, window[share], 3), (name, share, row)
            assert _close(row[-2], window["cost_usd"], 6) and row[-1] == str(window["unpriced"])
        charted = {title: (labels, data) for title, labels, data in drawn}
        assert charted["signatures (by window)"] == (
            shares,
            [[w.get(s) for w in spec["windows"]] for s in shares],
        )
        assert charted["mean length, characters (by window)"][1] == [
            [w["length"] for w in spec["windows"]]
        ]
        spent = re.match(r"spent (\$[0-9.]+) in all; ", spend)
        assert spent and _close(spent[1], spec["cost_usd"], 6), (name, spend)
    judged = report["judged"]
    assert [w["window"] for w in judged["windows"]] == ["step:0", "step:10"]
    costs = [w["cost_usd"] for w in judged["windows"]]
    assert all(c > 0 for c in costs) and costs[1] > costs[0]  # the longer responses cost more
    share = re.fullmatch(
        r"spent \$[0-9.]+ in all; budget \$5 \(([0-9.]+)% spent\)", cards["judged"][3]
    )
    assert share and _close(share[1], 100 * judged["cost_usd"] / 5, 1), cards["judged"][3]
    drawn = {title: data for title, _, data in cards["judged"][4]}
    assert drawn["model cost, USD (by window)"] == [costs]
    assert cards["lenient_math"][3] == "spent $0 in all; no budget"
