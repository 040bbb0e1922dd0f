// The reward inspector's page. Every string that comes from the service (ids, responses,
// claims, judge reasons, program output) is hostile text: it is only ever set with
// textContent or as an attribute value, never as HTML. Charts are uPlot's.
"use strict";

const API = "inspect/api/";
const FIELDS = ["verifier", "spec", "min_reward", "max_reward", "error", "group", "key", "job", "item"];
const form = document.getElementById("filters");
let view = "items";
let timer = null;
const charts = [];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function num(value, digits = 3) {
  return typeof value === "number" ? value.toFixed(digits).replace(/\.?0+$/, "") || "0" : "—";
}

// form.elements["item"] would be the collection's item() method: fields are found by name.
function field(name) {
  return form.querySelector(`[name="${name}"]`);
}

function query() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = field(name).value.trim();
    if (value) params.set(name, value);
  }
  return params;
}

async function getJSON(path) {
  const answer = await fetch(API + path, { credentials: "same-origin" });
  if (!answer.ok) {
    let message = answer.statusText;
    try { message = (await answer.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(`${answer.status}: ${message}`);
  }
  return answer.json();
}

function itemHref(verifier, rid) {
  const params = query();
  params.set("v", verifier);
  params.set("rid", rid);
  return "inspect?" + params.toString();
}

function reflectFilters() {
  const params = query();
  const current = new URLSearchParams(location.search);
  for (const extra of ["v", "rid", "id", "view"]) if (current.get(extra)) params.set(extra, current.get(extra));
  history.replaceState(null, "", "inspect" + (params.toString() ? "?" + params : ""));
  document.getElementById("export").href = API + "export.jsonl?" + query().toString();
}

function showError(section, error) {
  section.replaceChildren(el("p", { class: "error" }, String(error.message || error)));
}

async function loadMeta() {
  const meta = await getJSON("meta");
  const kept = Object.entries(meta.kept).map(([v, n]) => `${v}: ${n}`).join(", ");
  document.getElementById("recording").textContent = meta.recording
    ? `recording ${meta.sample_rate * 100}% of items; keeps ${meta.max_items} per verifier for ` +
      `${meta.ttl_s} s (${meta.queue} queue); kept now: ${kept}`
    : `recording is off (TRIBUNAL_INSPECT_SAMPLE_RATE=0); kept: ${kept}`;
}

async function loadItems() {
  const body = document.querySelector("#items tbody");
  const data = await getJSON("items?" + query().toString());
  document.getElementById("items-count").textContent =
    `${data.total} items match` + (data.total > data.items.length ? `, newest ${data.items.length} shown` : "");
  body.replaceChildren(...data.items.map((s) => {
    const link = el("a", { href: itemHref(s.verifier, s.rid), class: "item-link" }, s.id);
    link.addEventListener("click", (event) => { event.preventDefault(); openItem(s.verifier, s.rid); });
    return el("tr", { "data-rid": s.rid, class: s.error ? "failed" : null },
      el("td", {}, new Date(s.t * 1000).toLocaleTimeString()),
      el("td", {}, link),
      el("td", {}, s.scorer || s.verifier),
      el("td", {}, s.spec || ""),
      el("td", {}, s.group || ""),
      el("td", { class: "reward" }, s.reward === null ? "—" : num(s.reward)),
      el("td", { class: "error-code" }, s.error || ""),
      el("td", {}, s.latency_ms === null ? "—" : s.latency_ms),
      el("td", { class: "cache" }, s.cached ? "hit" : ""));
  }));
}

// labels: names of the x values 0, 1, ... (windows), read on the axis instead of numbers,
// each given half a step either side; yRange: uPlot's y range (else fitted to the data,
// which stretches all-zero shares to 0-100 and starts bars of costs above 0).
function chart(title, series, data, bars, labels, yRange) {
  const holder = el("div", { class: "chart", "data-chart": title });
  const x = labels ? { time: false, range: [-0.5, labels.length - 0.5] } : { time: !bars };
  const opts = {
    title, width: 460, height: 200,
    scales: { x, ...(yRange ? { y: { range: yRange } } : {}) },
    series: [{}, ...series],
    axes: [labels ? { values: (u, splits) => splits.map((i) => labels[i] ?? "") } : {}, {}],
  };
  if (bars) opts.series[1].paths = uPlot.paths.bars({ size: [0.9, 60] });
  charts.push(new uPlot(opts, data, holder));
  return holder;
}

function shareTable(head, rows) {
  return el("table", { class: "share" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {}, c))))));
}

async function loadCharts() {
  const section = document.getElementById("view-charts");
  const data = await getJSON("stats?" + query().toString());
  while (charts.length) charts.pop().destroy();
  const cards = Object.entries(data.scorers).map(([name, s]) => {
    const card = el("div", { class: "card", "data-scorer": name },
      el("h2", {}, name),
      el("p", {}, `${s.items} items, ${s.scored} with a reward; mean ${num(s.mean)}, spread (std) ${num(s.std)}`));
    if (s.histogram) {
      const edges = s.histogram.edges;
      const mids = edges.slice(0, -1).map((e, i) => (e + edges[i + 1]) / 2);
      card.append(chart("reward histogram", [{ label: "items", fill: "#4c78a8", stroke: "#4c78a8" }],
        [mids, s.histogram.counts], true));
      const t = s.over_time;
      card.append(chart("mean and spread over time", [
        { label: "mean", stroke: "#f58518", width: 2, spanGaps: true },
        { label: "mean + std", stroke: "#bbb", dash: [4, 4], spanGaps: true },
        { label: "mean − std", stroke: "#bbb", dash: [4, 4], spanGaps: true },
      ], [t.t, t.mean,
        t.mean.map((m, i) => (m === null ? null : m + t.std[i])),
        t.mean.map((m, i) => (m === null ? null : m - t.std[i]))], false));
    }
    const errors = Object.entries(s.error_share);
    card.append(el("h3", {}, "error share by class"),
      errors.length ? shareTable(["class", "share"], errors.map(([c, v]) => [c, `${num(v * 100, 1)}%`]))
        : el("p", {}, "no errors"));
    const rubrics = Object.entries(s.rubric_met_share);
    if (rubrics.length) {
      card.append(el("h3", {}, "share of verdicts met, per rubric"),
        shareTable(["rubric", "met", "judged", "share"],
          rubrics.map(([label, r]) => [label, r.met, r.judged, `${num(r.share * 100, 1)}%`])));
    }
    return card;
  });
  section.replaceChildren(...(cards.length ? cards : [el("p", {}, "no items match")]));
}

async function loadGroups() {
  const section = document.getElementById("view-groups");
  const data = await getJSON("stats?" + query().toString());
  const rows = data.groups.map((g) => el("tr", { class: g.all_equal ? "flat" : null },
    el("td", {}, g.group),
    el("td", { class: "mono" }, g.job.slice(0, 8)),
    el("td", {}, ...g.items.map((i) => {
      const chip = el("a", { class: "chip" + (i.error ? " failed" : "") + (i.cached ? " cached" : ""),
        href: itemHref(i.verifier, i.rid), title: i.cached ? `${i.id} (a cache hit)` : i.id },
        i.reward === null ? i.error || "—" : num(i.reward));
      chip.addEventListener("click", (event) => { event.preventDefault(); openItem(i.verifier, i.rid); });
      return chip;
    })),
    el("td", {}, (g.all_equal ? "all equal: no learning signal" : `std ${num(g.std)}`) +
      (g.cache_hits ? ` · ${g.cache_hits} from the result cache` : "")),
    el("td", {}, g.identical_completions)));
  section.replaceChildren(rows.length
    ? el("table", { id: "groups" },
      el("thead", {}, el("tr", {}, ...["group", "job", "rewards", "spread", "identical completions"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows))
    : el("p", {}, "no GRPO groups among the items that match (items carry group_id)"));
}

// The hack signatures in [0, 1] (length, in characters, has a chart of its own), in the
// order of GET /v1/signatures; a spec's windows carry only those it counts.
const SHARES = ["repetition", "duplicate", "uncommitted", "no_region", "format_share",
  "unused_tools", "claim_duplicate", "claim_uncited"];
const COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#bab0ac"];

function usd(value) {
  return typeof value === "number" ? "$" + num(value, 6) : "—";
}

// Per spec: its hack signatures and the model cost per window of trainer steps (or of
// time), and what it spent in all beside its budget.
function signaturesView(sig) {
  const windows = sig.windows;
  const labels = windows.map((w) => w.window);
  const x = windows.map((w, i) => i);
  const shares = SHARES.filter((name) => windows.some((w) => name in w));
  const parts = [el("h3", {}, `hack signatures (windows of ${sig.window_steps} steps, or ${num(sig.window_s)} s without a step)`),
    chart("signatures (by window)", shares.map((name, i) => ({ label: name, stroke: COLOURS[i], width: 2 })),
      [x, ...shares.map((name) => windows.map((w) => w[name] ?? null))], false, labels, [0, 1]),
    chart("mean length, characters (by window)", [{ label: "length", stroke: "#4c78a8", width: 2 }],
      [x, windows.map((w) => w.length)], false, labels)];
  const head = ["window", "items", "length", ...shares, "cost", "unpriced"];
  parts.push(el("table", { class: "signatures" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...windows.map((w) => el("tr", {},
      el("td", {}, w.window), el("td", {}, w.items), el("td", {}, num(w.length, 1)),
      ...shares.map((name) => el("td", {}, num(w[name]))),
      el("td", {}, usd(w.cost_usd)), el("td", {}, w.unpriced))))));
  const budget = sig.budget_usd === null ? "no budget"
    : `budget ${usd(sig.budget_usd)}` + (sig.budget_usd > 0 ? ` (${num(100 * sig.cost_usd / sig.budget_usd, 1)}% spent)` : "");
  parts.push(el("h3", {}, "model cost"), el("p", { class: "spend" }, `spent ${usd(sig.cost_usd)} in all; ${budget}`));
  if (windows.some((w) => w.cost_usd > 0 || w.unpriced > 0)) {
    parts.push(chart("model cost, USD (by window)", [{ label: "cost", fill: "#e45756", stroke: "#e45756" }],
      [x, windows.map((w) => w.cost_usd)], true, labels, (u, min, max) => [0, max > 0 ? 1.1 * max : 1]));
  }
  return parts;
}

// Per audited spec: training vs audit reward over windows of trainer steps, the gap with its
// 95 % interval, and the items that drive it, each opening the item view; then per spec its
// hack signatures and model cost per window (signaturesView).
async function loadMonitor() {
  const section = document.getElementById("view-monitor");
  const [data, sigs] = await Promise.all([getJSON("audits"), getJSON("signatures")]);
  while (charts.length) charts.pop().destroy();
  const signatures = new Map(sigs.specs.map((sig) => [sig.spec, sig]));
  const audited = new Set(data.specs.map((spec) => spec.spec));
  const cards = data.specs.map((spec) => {
    const card = el("div", { class: "card", "data-spec": spec.spec },
      el("h2", {}, spec.spec),
      el("p", {}, `audited by ${spec.auditor} at rate ${num(spec.rate)}; ${spec.windows.length} windows`));
    if (spec.windows.length) {
      const x = spec.windows.map((w, i) => i);
      card.append(chart("training vs audit reward (by window)", [
        { label: "training", stroke: "#f58518", width: 2 },
        { label: "audit", stroke: "#4c78a8", width: 2 },
      ], [x, spec.windows.map((w) => w.reward), spec.windows.map((w) => w.audit_reward)], true,
      spec.windows.map((w) => w.window)));
      card.append(el("h3", {}, "windows"), el("table", { class: "windows" },
        el("thead", {}, el("tr", {}, ...["window", "items", "training", "audit", "gap", "95% interval"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...spec.windows.map((w) => el("tr", { class: w.low !== null && w.low > 0 ? "gap" : null },
          el("td", {}, w.window), el("td", {}, w.n), el("td", {}, num(w.reward)),
          el("td", {}, num(w.audit_reward)), el("td", {}, num(w.gap)),
          el("td", {}, w.low === null ? "—" : `${num(w.low)} to ${num(w.high)}`))))));
    }
    card.append(el("h3", {}, "items driving the gap"), spec.items.length
      ? el("table", { class: "driving" },
        el("thead", {}, el("tr", {}, ...["id", "group", "step", "policy", "training", "audit"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...spec.items.map((i) => {
          const link = el("a", { class: "item-link", href: itemHref("gateway", i.id) }, i.id);
          link.addEventListener("click", (event) => { event.preventDefault(); openItem("gateway", i.id); });
          return el("tr", {}, el("td", {}, link), el("td", {}, i.group), el("td", {}, i.step === null ? "—" : i.step),
            el("td", {}, i.policy_version ?? "—"), el("td", {}, num(i.reward)), el("td", {}, num(i.audit_reward)));
        })))
      : el("p", {}, "none: no audited item was paid more in training than by its auditor"));
    if (signatures.has(spec.spec)) card.append(...signaturesView(signatures.get(spec.spec)));
    return card;
  });
  for (const sig of sigs.specs) {
    if (audited.has(sig.spec)) continue;
    cards.push(el("div", { class: "card", "data-spec": sig.spec }, el("h2", {}, sig.spec),
      el("p", {}, `not audited; ${sig.windows.length} windows`), ...signaturesView(sig)));
  }
  section.replaceChildren(...(cards.length ? cards
    : [el("p", {}, "no spec is audited or has scored items here (a spec's audit block; docs/audits.md)")]));
}

// ---- the detail of one item ------------------------------------------------------------

function components(result) {
  // The verifier's own details, or each component of a spec's.
  const details = result.details || {};
  if (details.sub_rewards) {
    return Object.entries(details.sub_rewards).map(([name, sub]) => [name, sub.details || {}, sub]);
  }
  return [[result.verifier ? result.verifier.name : "details", details, null]];
}

function evidenceOf(item) {
  return item && typeof item.evidence === "object" && item.evidence !== null ? item.evidence : {};
}

function citationView(response, details, evidence, prefix) {
  // The response with each claim highlighted by its support verdict, found in order.
  const box = el("div", { class: "response" });
  let at = 0;
  for (const claim of details.claims) {
    const where = response.indexOf(claim.text, at);
    if (where < 0) continue;
    box.append(response.slice(at, where));
    const verdict = claim.support || (claim.cited ? "unjudged" : "uncited");
    const mark = el("mark", { class: `claim ${verdict}`, title: `${verdict}${claim.reason ? ": " + claim.reason : ""}`,
      "data-verdict": verdict }, claim.text);
    box.append(mark);
    at = where + claim.text.length;
  }
  box.append(response.slice(at));
  const list = el("ol", { class: "claims" }, ...details.claims.map((claim) => el("li", {},
    el("span", { class: `verdict ${claim.support || "none"}` }, claim.support || (claim.cited ? "not judged" : "uncited")), " ",
    claim.text, " ",
    ...claim.ids.map((id) => {
      const invalid = claim.invalid_ids.includes(id);
      const link = el("a", { href: "#", class: "cite" + (invalid ? " invalid" : ""), title: invalid ? "not in the evidence" : "show the snippet" }, `[${id}]`);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        const target = document.getElementById(prefix + "ev-" + id);
        if (target) { target.scrollIntoView({ block: "center" }); target.classList.add("flash"); }
      });
      return link;
    }),
    claim.reason ? el("div", { class: "reason" }, "judge: ", claim.reason) : null)));
  const snippets = el("dl", { class: "evidence" }, ...Object.entries(evidence).flatMap(([id, text]) => [
    el("dt", { id: prefix + "ev-" + id }, id), el("dd", {}, String(text))]));
  return el("div", {}, el("h3", {}, `citation: precision ${num(details.precision)}, recall ${num(details.recall)}`),
    box, list, el("h4", {}, "evidence"), snippets);
}

function rubricView(details) {
  return el("div", {}, el("h3", {}, `rubrics (${details.judge_model || "judge"}, ${details.aggregation || ""})`),
    el("table", { class: "rubrics" },
      el("thead", {}, el("tr", {}, ...["rubric", "polarity", "verdict", "score", "reason"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...details.rubrics.map((r) => el("tr", { class: `verdict-${r.verdict || "none"}` },
        el("td", {}, r.title ? `${r.title}: ${r.text}` : r.text),
        el("td", { class: "polarity" }, r.polarity),
        el("td", { class: "verdict" }, r.verdict || (r.error ? r.error.code : "—")),
        el("td", { class: "score" }, num(r.score)),
        el("td", { class: "reason" }, r.reason || (r.error ? r.error.message : "")))))));
}

function expectedOf(tests, index) {
  // What the item's tests expect of case `index`: the stdout of a stdio case, the return
  // value of a function case (as JSON); an assert test's check is the program's own.
  const cases = tests && Array.isArray(tests.cases) ? tests.cases : [];
  const one = cases[index];
  if (!one || typeof one !== "object") return null;
  if (tests.kind === "stdio") return typeof one.stdout === "string" ? one.stdout : null;
  if (tests.kind === "function") return JSON.stringify(one.expected);
  return null;
}

function actualOf(t, kind) {
  // What the program gave: the start of its stdout for a failed stdio case (kept by the
  // service); a function case's return value is compared in the service and not kept.
  if (t.verdict === "accepted") return "as expected";
  if (kind === "stdio") return t.stdout ?? "(printed nothing)";
  return kind === "function" ? "(not kept: see why)" : "";
}

function codeView(details, item) {
  const tests = item && typeof item.tests === "object" && item.tests !== null ? item.tests : {};
  const parts = [el("h3", {}, `tests: ${details.passed}/${details.total} passed`)];
  if (details.compile_message) parts.push(el("pre", { class: "output" }, details.compile_message));
  if (details.no_code_reason) parts.push(el("p", {}, "no code: ", details.no_code_reason));
  parts.push(el("table", { class: "tests" },
    el("thead", {}, el("tr", {}, ...["case", "verdict", "time ms", "expected", "actual", "why / stderr"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...details.tests.map((t) => {
      const expected = expectedOf(tests, t.index);
      return el("tr", { class: t.verdict === "accepted" ? "pass" : "failed" },
        el("td", {}, t.index), el("td", { class: "verdict" }, t.verdict), el("td", {}, num(t.time_ms, 1)),
        el("td", { class: "expected" }, expected === null ? "—" : el("pre", { class: "output" }, expected)),
        el("td", { class: "actual" }, el("pre", { class: "output" }, actualOf(t, tests.kind))),
        el("td", {}, ...[t.message, t.stderr && `stderr: ${t.stderr}`]
          .filter(Boolean).map((text) => el("pre", { class: "output" }, text))));
    }))));
  if (details.extracted_code) parts.push(el("h4", {}, "program"), el("pre", { class: "output" }, details.extracted_code));
  return el("div", {}, ...parts);
}

function runView(details) {
  return el("div", {}, el("h3", {}, `run: ${details.verdict}, exit ${details.exit_code}, ${num(details.time_ms, 1)} ms`),
    el("h4", {}, "stdout" + (details.stdout_truncated ? " (cut)" : "")), el("pre", { class: "output" }, details.stdout),
    el("h4", {}, "stderr" + (details.stderr_truncated ? " (cut)" : "")), el("pre", { class: "output" }, details.stderr));
}

function mathView(details) {
  return el("div", {}, el("h3", {}, "math"), el("table", { class: "math" }, el("tbody", {},
    el("tr", {}, el("th", {}, "answer extracted from the response"), el("td", { class: "mono" }, details.extracted_answer ?? "none found")),
    el("tr", {}, el("th", {}, "ground truth as compared"), el("td", { class: "mono" }, details.extracted_ground_truth)),
    el("tr", {}, el("th", {}, "how"), el("td", {}, details.method + (details.uncommitted ? ` (uncommitted: ${details.uncommitted})` : ""))))));
}

function specView(result, rule) {
  const details = result.details;
  const subs = Object.entries(details.sub_rewards);
  let formula;
  if (rule && rule.formula) formula = rule.formula;
  else if (details.combine === "weighted_sum") formula = subs.map(([n, s]) => `${num(s.weight)} × ${n}`).join(" + ");
  else formula = `${details.combine}(${subs.map(([n]) => n).join(", ")})`;
  const values = subs.map(([n, s]) => `${n} = ${s.reward === null ? "—" : num(s.reward)}`).join(", ");
  return el("div", {}, el("h3", {}, `spec ${details.spec.name} v${details.spec.version}`),
    el("p", { class: "formula mono" }, `reward = ${formula}`),
    el("p", { class: "mono" }, `${values} → ${result.reward === null ? "no reward" : num(result.reward, 4)}`),
    details.closed_gate ? el("p", {}, `gate closed: ${details.closed_gate}`) : null,
    details.dropped.length ? el("p", {}, `dropped for errors: ${details.dropped.join(", ")}`) : null,
    el("table", { class: "subs" },
      el("thead", {}, el("tr", {}, ...["component", "source", "weight", "reward", "status", "error"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...subs.map(([n, s]) => el("tr", {}, el("td", {}, n), el("td", {}, s.source || "—"),
        el("td", {}, num(s.weight)), el("td", {}, s.reward === null ? "—" : num(s.reward)), el("td", {}, s.status),
        el("td", {}, s.error ? `${s.error.code}: ${s.error.message}` : ""))))));
}

function renderDetail(record) {
  const { summary, item, result } = record;
  const aside = document.getElementById("detail");
  const link = location.origin + location.pathname + "?v=" + encodeURIComponent(summary.verifier) + "&rid=" + encodeURIComponent(summary.rid);
  const close = el("button", { type: "button", id: "close-detail" }, "close");
  close.addEventListener("click", () => { aside.hidden = true; });
  const head = el("div", { class: "detail-head" },
    el("h2", {}, "item ", el("span", { class: "mono", id: "detail-id" }, summary.id)), close,
    el("p", {}, `${summary.scorer || summary.verifier} · reward `, el("strong", { id: "detail-reward" }, result.reward === null ? "none" : num(result.reward, 4)),
      ` · job ${summary.job} #${summary.index}` + (summary.group ? ` · group ${summary.group}` : "") +
      (summary.latency_ms !== null ? ` · ${summary.latency_ms} ms` : "") +
      (result.cached ? " · a cache hit (answered from the result cache)" : "") +
      (record.same_id > 1 ? ` · ${record.same_id} records of this id kept, the newest shown` : "")),
    el("p", {}, "link: ", el("a", { href: link, id: "permalink" }, link)));
  const parts = [head];
  if (result.error) {
    parts.push(el("p", { class: "error", id: "detail-error" }, `${result.error.code}: ${result.error.message}` + (result.error.field ? ` (field ${result.error.field})` : "")));
  }
  if (result.details && result.details.sub_rewards) parts.push(specView(result, record.spec_rule));
  const response = item && typeof item.response === "string" ? item.response : null;
  let shownResponse = false;
  components(result).forEach(([name, details], n) => {
    if (details.claims && response !== null) { parts.push(citationView(response, details, evidenceOf(item), `c${n}-`)); shownResponse = true; }
    if (details.rubrics) parts.push(rubricView(details));
    if (details.tests) parts.push(codeView(details, item));
    if (details.stdout !== undefined && details.stderr !== undefined) parts.push(runView(details));
    if (details.extracted_ground_truth !== undefined) parts.push(mathView(details));
  });
  if (!shownResponse && response !== null) parts.push(el("h3", {}, "response"), el("pre", { class: "response" }, response));
  parts.push(el("details", {}, el("summary", {}, "the item as queued"), el("pre", { class: "json" }, JSON.stringify(item, null, 2))),
    el("details", {}, el("summary", {}, "the result"), el("pre", { class: "json" }, JSON.stringify(result, null, 2))));
  aside.replaceChildren(...parts);
  aside.hidden = false;
}

async function openItem(verifier, rid) {
  const aside = document.getElementById("detail");
  try {
    renderDetail(await getJSON(`items/${encodeURIComponent(verifier)}/${encodeURIComponent(rid)}`));
  } catch (error) {
    aside.hidden = false;
    showError(aside, error);
  }
}

// ---- views, filters, refresh --------------------------------------------------------------

async function refresh() {
  reflectFilters();
  const section = document.getElementById("view-" + view);
  try {
    await loadMeta();
    if (view === "items") await loadItems();
    else if (view === "charts") await loadCharts();
    else if (view === "monitor") await loadMonitor();
    else await loadGroups();
    section.dataset.loaded = String(Date.now());
  } catch (error) {
    if (view === "items") document.getElementById("items-count").textContent = String(error.message || error);
    else showError(section, error);
  }
}

function show(next) {
  view = next;
  for (const button of document.querySelectorAll("#tabs button")) button.classList.toggle("active", button.dataset.view === view);
  for (const name of ["items", "charts", "groups", "monitor"]) document.getElementById("view-" + name).hidden = name !== view;
  refresh();
}

function schedule() {
  clearInterval(timer);
  if (document.getElementById("live").checked) timer = setInterval(refresh, 3000);
}

form.addEventListener("submit", (event) => { event.preventDefault(); refresh(); });
document.getElementById("clear").addEventListener("click", () => {
  const live = document.getElementById("live").checked; // the refresh is not a filter
  form.reset();
  document.getElementById("live").checked = live;
  refresh();
});
document.getElementById("live").addEventListener("change", schedule);
for (const button of document.querySelectorAll("#tabs button")) button.addEventListener("click", () => show(button.dataset.view));

(function start() {
  const params = new URLSearchParams(location.search);
  for (const name of FIELDS) if (params.get(name)) field(name).value = params.get(name);
  // rid: a record; id: an item's own id (its newest record).
  const wanted = params.get("rid") || params.get("id");
  if (params.get("v") && wanted) openItem(params.get("v"), wanted);
  show(["items", "charts", "groups", "monitor"].includes(params.get("view")) ? params.get("view") : "items");
  schedule();
})();
