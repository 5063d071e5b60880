// agentgym-rl view: the page over /api (viewer/app.py). Four views by the address's hash:
// #/overview, #/episodes?<filter>, #/episode/<ref>, #/task/<item_id>. Plain DOM, no build step.
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const FILTERS = [
  ["env", "env", "select"], ["split", "split", "select"], ["version_min", "version ≥"],
  ["version_max", "version ≤"], ["outcome", "outcome", "select"], ["turns_min", "turns ≥"],
  ["turns_max", "turns ≤"], ["invalid_min", "invalid ≥"], ["drift", "drift", "select"],
  ["forks_min", "forks ≥"], ["task", "task"],
];
const CHOICES = {
  split: [["", "any"], ["train", "train"], ["held_out", "held-out"]],
  outcome: [["", "any"], ["success", "success"], ["failure", "failure"]],
  drift: [["", "any"], ["yes", "yes"], ["no", "no"]],
};
let timer = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

async function api(path) {
  const response = await fetch("/api/" + path, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function fmt(x, digits = 3) {
  return x === null || x === undefined ? "–" : typeof x === "number" ? +x.toFixed(digits) : x;
}

// ---- charts: one SVG per figure, lines over a shared x axis, dashed levels (chance, rule)
const COLORS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df"];

function chart(title, series, levels = [], yMax = null) {
  const W = 420, H = 200, L = 44, R = 10, T = 24, B = 28;
  const pts = series.flatMap((s) => s.points);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "chart");
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(svg.namespaceURI, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  add("text", { x: L, y: 14, class: "title" }, title);
  if (!pts.length) {
    add("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no records yet");
    return svg;
  }
  const xs = pts.map((p) => p[0]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const ys = [...pts.map((p) => p[1]), ...levels.map((l) => l.y).filter((y) => y !== null)];
  const y1 = yMax ?? Math.max(...ys, 1e-9) * 1.1, y0 = 0;
  const px = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  add("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
  add("text", { x: L - 4, y: py(y1) + 4, "text-anchor": "end", class: "tick" }, fmt(y1, 2));
  add("text", { x: L - 4, y: H - B, "text-anchor": "end", class: "tick" }, "0");
  add("text", { x: L, y: H - 8, class: "tick" }, fmt(x0, 0));
  add("text", { x: W - R, y: H - 8, "text-anchor": "end", class: "tick" }, fmt(x1, 0) + " (version)");
  levels.forEach((l) => {
    if (l.y === null || l.y === undefined) return;
    add("line", { x1: L, x2: W - R, y1: py(l.y), y2: py(l.y), class: "level " + l.name });
    add("text", { x: W - R - 2, y: py(l.y) - 3, "text-anchor": "end", class: "tick" }, `${l.name} ${fmt(l.y, 2)}`);
  });
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, k) => `${k ? "L" : "M"}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`).join("");
    add("path", { d, stroke: COLORS[i % COLORS.length], class: "series" });
    s.points.forEach((p) => add("circle", { cx: px(p[0]), cy: py(p[1]), r: 2.2, fill: COLORS[i % COLORS.length] }));
    add("text", { x: L + 6 + i * 120, y: T + 10, fill: COLORS[i % COLORS.length], class: "legend" }, s.name);
  });
  return svg;
}

// ---- overview
async function overview() {
  const o = await api("overview");
  document.getElementById("run").textContent = o.run;
  const figures = el("section", { class: "charts" });
  for (const h of o.held_out) {
    const train = o.training.find((t) => t.env === h.env) || { points: [] };
    figures.append(chart(`success · ${h.env ?? "all envs"}`,
      [{ name: "held-out", points: h.points }, { name: "training", points: train.points }],
      [{ name: "chance", y: h.chance }, { name: "rule", y: h.rule }], 1.0));
  }
  for (const t of o.training.filter((t) => !o.held_out.some((h) => h.env === t.env))) {
    figures.append(chart(`success · ${t.env}`, [{ name: "training", points: t.points }], [], 1.0));
  }
  const s = o.series;
  figures.append(chart("turns per episode", [{ name: "turns", points: s["turns"] }]));
  figures.append(chart("throughput (tokens/s)", [
    { name: "generated", points: s["generated tokens/s"] },
    { name: "trained", points: s["trained tokens/s"] }]));
  figures.append(chart("staleness (versions)", [{ name: "staleness", points: s["staleness"] }]));
  const e = o.episodes;
  main.replaceChildren(
    el("h2", {}, "Overview"),
    ...o.missing.map((m) => el("p", { class: "missing" }, m)),
    el("p", { class: "note" }, `${e.indexed} episodes indexed${e.complete ? "" : " so far (indexing…)"}; updates every 5 s`),
    figures);
  timer = setTimeout(route, 5000);
}

// ---- episodes table
function filterForm(params, envs) {
  const form = el("form", { class: "filters", id: "filters" });
  for (const [key, label, kind] of FILTERS) {
    let input;
    if (kind === "select") {
      const choices = key === "env" ? [["", "any"], ...envs.map((e) => [e, e])] : CHOICES[key];
      input = el("select", { name: key }, choices.map(([v, t]) => el("option", { value: v }, t)));
    } else {
      input = el("input", { name: key, size: key === "task" ? 14 : 4 });
    }
    input.value = params.get(key) || "";
    form.append(el("label", {}, label, " ", input));
  }
  form.append(el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = "#/episodes?" + q.toString();
  });
  return form;
}

async function episodes(params) {
  const data = await api("episodes?" + params.toString());
  const head = ["episode", "task", "env", "split", "version", "outcome", "reward", "turns", "invalid", "drift", "forks", "status"];
  const rows = data.rows.map((r) => el("tr", { "data-ref": r.ref, class: r.success ? "ok" : "failed", onclick: () => (location.hash = `#/episode/${r.ref}`) },
    el("td", {}, el("a", { href: `#/episode/${r.ref}` }, r.ref)),
    el("td", {}, el("a", { href: `#/task/${encodeURIComponent(r.item_id)}`, onclick: (ev) => ev.stopPropagation() }, r.item_id)),
    el("td", {}, r.env), el("td", {}, r.split), el("td", {}, r.version),
    el("td", {}, r.success ? "success" : "failure"), el("td", {}, fmt(r.reward)),
    el("td", {}, `${r.turns}/${r.turn_cap}`), el("td", {}, fmt(r.invalid)),
    el("td", {}, r.drift ? "yes" : ""), el("td", {}, fmt(r.forks)), el("td", {}, r.status)));
  const page = data.page, last = data.complete ? Math.max(0, Math.ceil(data.matched / data.size) - 1) : null;
  const go = (p) => { params.set("page", p); location.hash = "#/episodes?" + params.toString(); };
  const total = data.complete ? `${data.matched} episodes` : `${data.matched}+ episodes (${data.indexed} lines indexed so far)`;
  main.replaceChildren(
    el("h2", {}, "Episodes"), filterForm(params, data.envs),
    el("p", { class: "note", id: "matched" }, `${total} · page ${page + 1}${last !== null ? " of " + (last + 1) : ""}`),
    el("table", { class: "episodes" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    el("p", { class: "pager" },
      el("button", { onclick: () => go(page - 1), id: "prev" }, "← previous"),
      el("button", { onclick: () => go(page + 1), id: "next" }, "next →")));
  document.getElementById("prev").disabled = page === 0;
  document.getElementById("next").disabled = last !== null && page >= last;
}

// ---- one episode
const TOOL = /(<tool_call>[\s\S]*?<\/tool_call>|<tool_response>[\s\S]*?<\/tool_response>)/g;

function textNodes(text) {
  // tool calls and their responses as boxes, their JSON laid out; the rest verbatim
  return text.split(TOOL).filter((x) => x).map((piece) => {
    const m = piece.match(/^<(tool_call|tool_response)>([\s\S]*)<\/\1>$/);
    if (!m) return document.createTextNode(piece);
    let body = m[2].trim();
    try { body = JSON.stringify(JSON.parse(body), null, 1); } catch (_) { /* not JSON: as it is */ }
    return el("span", { class: m[1].replace("_", "-") }, el("span", { class: "tag" }, m[1].replace("_", " ")), body);
  });
}

// the token view: each trained token coloured by one of the learner's per-token figures
const TOKEN_COLOURS = {
  learner: ["learner log-prob", (t) => (t.learner + 8) / 8],
  behaviour: ["behaviour log-prob", (t) => (t.behaviour + 8) / 8],
  shift: ["learner − behaviour", (t) => (t.learner - t.behaviour + 1) / 2],
  entropy: ["entropy", (t) => t.entropy / 4],
  weight: ["off-policy weight", (t) => t.weight / 2],
};

function tokenSpans(b, fields, mode) {
  const [, scale] = TOKEN_COLOURS[mode];
  return b.tokens.map((values) => {
    const t = Object.fromEntries(fields.map((f, k) => [f, values[k]]));
    const x = Math.max(0, Math.min(1, scale(t) ?? 0));
    const title = fields.slice(1).map((f) => `${f} ${fmt(t[f])}`).join(" · ");
    return el("span", {
      class: "tok" + (t.clipped ? " clipped" : ""), title, style: `background: hsl(${Math.round(120 * x)}, 75%, 82%)`,
      "data-learner": t.learner, "data-entropy": t.entropy ?? "", "data-weight": t.weight, "data-clipped": t.clipped,
    }, t.text);
  });
}

function transcript(ep, mode = "") {
  const columns = [];
  let current = el("pre", { class: "transcript" });
  columns.push(current);
  ep.blocks.forEach((b, i) => {
    if (b.kind === "part") {
      current = el("pre", { class: "transcript" });
      columns.push(current);
      current.append(el("div", { class: "part-line" }, b.text));
    } else if (b.kind === "turn") {
      current.append(el("div", { class: "turn-line", "data-turn": b.turn }, b.text));
    } else {
      const body = mode && b.tokens ? tokenSpans(b, ep.token_fields, mode) : textNodes(b.text);
      current.append(el("span", { class: b.trained ? "trained" : "context", "data-block": i, "data-trained": b.trained ? "1" : "0", ...(b.turn !== null ? { "data-turn": b.turn } : {}) }, body));
    }
  });
  return el("div", { class: columns.length > 1 ? "parts side-by-side" : "parts" }, columns);
}

async function episode(ref) {
  const ep = await api("episode/" + encodeURIComponent(ref));
  const s = ep.summary;
  const turns = el("table", { class: "turns" },
    el("thead", {}, el("tr", {}, ["turn", "part", "versions", "tokens", "mean log-prob", "advantage", "reward", "state shared with"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ep.turns.map((t) => el("tr", {}, el("td", {}, t.turn), el("td", {}, t.part + 1),
      el("td", {}, t.versions.map((v) => "v" + v).join("→")), el("td", {}, t.tokens),
      el("td", {}, fmt(t.logprob)), el("td", { class: t.advantage > 0 ? "pos" : t.advantage < 0 ? "neg" : "" }, fmt(t.advantage)),
      el("td", {}, fmt(t.reward)),
      el("td", { class: "shared", title: "turns of its group that acted from the same state (its step group)" },
        t.shared === null ? "-" : t.shared === 0 ? "none" : `${t.shared} other turn${t.shared > 1 ? "s" : ""}`)))));
  main.replaceChildren(
    el("h2", {}, `Episode ${ref} · `, el("a", { href: `#/task/${encodeURIComponent(s.item_id)}` }, s.item_id),
      ` · ${s.split === "held_out" ? "held-out" : "training"} · v${s.version} · ${s.success ? "success" : "failure"}`),
    el("pre", { class: "header" }, ep.header.join("\n")),
    ep.judge_prompt ? el("details", { class: "judge" }, el("summary", {}, "what the judge read"), el("pre", {}, ep.judge_prompt)) : "",
    ep.decoded ? "" : el("p", { class: "missing" }, "no tokenizer found: token ids shown (pass --model DIR)"),
    turns,
    el("p", { class: "note" }, `${ep.trained_tokens} trained tokens, `, el("span", { class: "trained" }, "highlighted"),
      ep.parts > 1 ? `; ${ep.parts} samples side by side` : ""),
    tokenControl(ep),
    ...ep.token_problems.map((p) => el("p", { class: "missing" }, p)),
    transcript(ep));
}

function tokenControl(ep) {
  // shown when the learner's token log holds this episode (learn.token_log samples a few a step)
  if (!ep.blocks.some((b) => b.tokens)) {
    return ep.summary.split === "train" ? el("p", { class: "note" }, "token view: the learner's token log (learn.token_log) did not sample this episode") : "";
  }
  const select = el("select", { id: "token-view" }, el("option", { value: "" }, "off"),
    Object.entries(TOKEN_COLOURS).map(([k, [label]]) => el("option", { value: k }, label)));
  select.addEventListener("change", () => {
    document.querySelector("div.parts").replaceWith(transcript(ep, select.value));
  });
  return el("p", { class: "token-control" }, el("label", {}, "token view: colour trained tokens by ", select),
    el("span", { class: "note" }, " (red low, green high; hover a token for its figures; outlined: clipped or truncated)"));
}

// ---- one task across versions
async function task(item) {
  const t = await api("task/" + encodeURIComponent(item));
  const rows = t.versions.map((v) => el("tr", { "data-version": v.version }, el("td", {}, "v" + v.version),
    el("td", {}, v.episodes.length ? v.episodes.map((e) => el("a", { href: `#/episode/${e.ref}`, class: e.success ? "ok" : "failed" },
      `${e.success ? "✓" : "✗"} ${fmt(e.reward)} · ${e.turns} turns`))
      : v.outcomes.length ? v.outcomes.map((e) => el("span", { class: "outcome " + (e.success ? "ok" : "failed"), title: "outcome only: this run did not log held-out episodes whole" },
        `${e.success ? "✓" : "✗"} ${fmt(e.reward)} · ${e.turns} turns`))
      : el("span", { class: "note" }, "no episode logged"))));
  main.replaceChildren(el("h2", {}, `Task ${item}: held-out episodes by version`),
    t.complete ? "" : el("p", { class: "note" }, "indexing the logs: more may appear"),
    el("table", { class: "versions" }, el("thead", {}, el("tr", {}, el("th", {}, "version"), el("th", {}, "episodes"))), el("tbody", {}, rows)));
}

async function route() {
  clearTimeout(timer);
  const hash = location.hash || "#/overview";
  const [path, query] = hash.slice(1).split("?");
  const parts = path.split("/").filter((x) => x);
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === parts[0]));
  statusLine.textContent = "";
  try {
    if (parts[0] === "episodes") await episodes(new URLSearchParams(query || ""));
    else if (parts[0] === "episode") await episode(decodeURIComponent(parts[1]));
    else if (parts[0] === "task") await task(decodeURIComponent(parts.slice(1).join("/")));
    else await overview();
  } catch (err) {
    main.replaceChildren(el("p", { class: "missing" }, String(err.message || err)));
    timer = setTimeout(route, 5000);
  }
}

window.addEventListener("hashchange", route);
route();
