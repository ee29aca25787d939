// mcpkit console: plain JavaScript, no framework, no build step.
// It reads /console/api/catalog and /console/api/state, listens to /console/events (SSE) and
// asks again when something moved, and calls tools through POST /console/api/call.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { catalog: null, live: null, clockSkew: 0 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fill(tbody, rows, emptyId) {
  tbody.replaceChildren(...rows);
  if (emptyId) $(emptyId).hidden = rows.length > 0;
}

function ago(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}

const serverNow = () => Date.now() / 1000 - state.clockSkew;
const clock = (t) => new Date(t * 1000).toLocaleTimeString();

async function getJson(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (response.status === 401 || response.status === 403) {
    showBanner("The console refused this page (token missing or wrong): reload it to sign in.", true);
    throw new Error(`refused: ${response.status}`);
  }
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

function showBanner(text, bad = false) {
  const banner = $("#banner");
  banner.textContent = text;
  banner.className = bad ? "bad" : "";
  banner.hidden = false;
}

// -- JSON Schema helpers ----------------------------------------------------------------------
function resolve(schema, root) {
  let s = schema || {};
  for (let i = 0; i < 10 && s.$ref; i++) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    s = path.reduce((node, key) => (node ? node[key] : undefined), root) || {};
  }
  return s;
}

// The kind of input one property gets: {kind, nullable, schema}
function kindOf(schema, root) {
  let s = resolve(schema, root);
  let nullable = false;
  const options = s.anyOf || s.oneOf;
  if (options) {
    const rest = options.filter((o) => resolve(o, root).type !== "null");
    nullable = rest.length < options.length;
    if (rest.length === 1) s = { ...resolve(rest[0], root), default: s.default, description: s.description || rest[0].description };
    else return { kind: "json", nullable, schema: s };
  }
  let type = s.type;
  if (Array.isArray(type)) {
    nullable = nullable || type.includes("null");
    const rest = type.filter((t) => t !== "null");
    type = rest.length === 1 ? rest[0] : undefined;
  }
  if (Array.isArray(s.enum)) return { kind: "enum", nullable, schema: s };
  if (type === "string" || type === "integer" || type === "number" || type === "boolean") return { kind: type, nullable, schema: s };
  return { kind: "json", nullable, schema: s };
}

function typeLabel(k) {
  if (k.kind === "json") return k.schema.type ? `${k.schema.type} (JSON)` : "JSON";
  return k.kind + (k.nullable ? " or null" : "");
}

function fieldFor(name, prop, required, root) {
  const k = kindOf(prop, root);
  const s = k.schema;
  const id = `arg-${Math.random().toString(36).slice(2)}`;
  const has = s.default !== undefined && s.default !== null;  // null: the same as not given
  let input;
  if (k.kind === "enum") {
    input = el("select", { id }, required ? null : el("option", { value: "", text: "(not given)" }),
      ...s.enum.map((v) => el("option", { value: JSON.stringify(v), text: String(v), selected: has && v === s.default })));
  } else if (k.kind === "boolean" && required) {
    input = el("input", { id, type: "checkbox", checked: has && s.default === true });
  } else if (k.kind === "boolean") {
    input = el("select", { id }, el("option", { value: "", text: "(not given)" }),
      el("option", { value: "true", text: "true", selected: has && s.default === true }),
      el("option", { value: "false", text: "false", selected: has && s.default === false }));
  } else if (k.kind === "integer" || k.kind === "number") {
    input = el("input", { id, type: "number", step: k.kind === "integer" ? "1" : "any", value: has ? String(s.default) : null,
      min: s.minimum, max: s.maximum });
  } else if (k.kind === "string") {
    input = el("input", { id, type: "text", value: has ? s.default : null, placeholder: s.format || null });
  } else {
    input = el("textarea", { id, placeholder: "JSON", text: has ? JSON.stringify(s.default) : "" });
  }
  input.dataset.arg = name;
  input.dataset.kind = k.kind;
  input.dataset.required = required ? "1" : "";
  const label = el("label", { for: id }, name, required ? el("span", { class: "req", text: " *" }) : null,
    el("span", { class: "type", text: typeLabel(k) }));
  const hint = s.description ? el("div", { class: "hint", text: s.description }) : null;
  return el("div", { class: "field" }, label, input, hint);
}

// The arguments the form holds, typed by its schema; throws with a message on a bad value.
function readArguments(form) {
  const args = {};
  for (const input of form.querySelectorAll("[data-arg]")) {
    const name = input.dataset.arg, kind = input.dataset.kind, required = input.dataset.required === "1";
    if (kind === "boolean" && input.type === "checkbox") { args[name] = input.checked; continue; }
    const raw = input.value.trim();
    if (raw === "") {
      if (required && kind === "string") args[name] = "";
      else if (required) throw new Error(`${name} is required`);
      continue;
    }
    if (kind === "integer") {
      const n = Number(raw);
      if (!Number.isInteger(n)) throw new Error(`${name} must be an integer`);
      args[name] = n;
    } else if (kind === "number") {
      const n = Number(raw);
      if (!Number.isFinite(n)) throw new Error(`${name} must be a number`);
      args[name] = n;
    } else if (kind === "boolean") {
      args[name] = raw === "true";
    } else if (kind === "enum") {
      args[name] = JSON.parse(raw);
    } else if (kind === "string") {
      args[name] = input.value;
    } else {
      try { args[name] = JSON.parse(raw); } catch (e) { throw new Error(`${name}: not valid JSON (${e.message})`); }
    }
  }
  return args;
}

function showResult(box, answer) {
  const parts = [];
  const meta = `${answer.duration_ms} ms · worker ${answer.worker}`;
  if (answer.error) {
    box.className = "result error";
    parts.push(el("div", { class: "meta" }, el("span", { class: "badge bad", text: "error" }), " ", meta));
    parts.push(el("pre", { class: "output", text: `${answer.error.code ?? ""} ${answer.error.message}` +
      (answer.error.data !== undefined ? `\n${JSON.stringify(answer.error.data, null, 2)}` : "") }));
  } else {
    const result = answer.result || {};
    box.className = result.isError ? "result error" : "result";
    parts.push(el("div", { class: "meta" }, el("span", { class: `badge ${result.isError ? "bad" : "ok"}`,
      text: result.isError ? "tool error" : "ok" }), " ", meta));
    const texts = (result.content || []).filter((c) => c.type === "text").map((c) => c.text);
    if (texts.length) parts.push(el("pre", { class: "output", text: texts.join("\n") }));
    const others = (result.content || []).filter((c) => c.type !== "text");
    if (others.length) parts.push(el("pre", { text: JSON.stringify(others, null, 2) }));
    if (result.structuredContent !== undefined) {
      parts.push(el("details", {}, el("summary", { text: "structuredContent" }),
        el("pre", { class: "structured", text: JSON.stringify(result.structuredContent, null, 2) })));
    }
  }
  if (answer.messages && answer.messages.length) {
    parts.push(el("details", {}, el("summary", { text: `${answer.messages.length} notification(s)` }),
      el("pre", { text: answer.messages.map((m) => JSON.stringify(m)).join("\n") })));
  }
  box.replaceChildren(...parts);
}

async function callTool(tool, form, box, button) {
  let args;
  try { args = readArguments(form); } catch (e) {
    box.className = "result error";
    box.replaceChildren(el("pre", { class: "output", text: e.message }));
    return;
  }
  button.disabled = true;
  box.className = "result";
  box.replaceChildren(el("div", { class: "meta", text: "calling…" }));
  try {
    const response = await fetch("/console/api/call", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tool, arguments: args }),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error ? answer.error.message : `HTTP ${response.status}`);
    showResult(box, answer);
  } catch (e) {
    box.className = "result error";
    box.replaceChildren(el("pre", { class: "output", text: String(e.message || e) }));
  } finally {
    button.disabled = false;
  }
}

function toolCard(tool) {
  const schema = tool.inputSchema || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const form = el("form", { class: "tryit", novalidate: true },
    ...Object.entries(props).map(([name, prop]) => fieldFor(name, prop, required.has(name), schema)));
  const box = el("div", { class: "result" });
  const button = el("button", { type: "submit", class: "call", text: "Call" });
  form.append(button);
  form.addEventListener("submit", (event) => { event.preventDefault(); callTool(tool.name, form, box, button); });
  const card = el("div", { class: "tool", "data-tool": tool.name },
    el("h3", {}, tool.title || tool.name, tool.title ? el("code", { text: ` ${tool.name}` }) : null,
      el("span", { class: "plugin", text: ` · ${tool.plugin || "?"}` }), tool.task ? el("span", { class: "badge", text: "task" }) : null),
    tool.description ? el("p", { class: "desc", text: tool.description }) : null,
    el("details", {}, el("summary", { text: "input schema" }), el("pre", { text: JSON.stringify(schema, null, 2) })),
    tool.outputSchema ? el("details", {}, el("summary", { text: "output schema" }),
      el("pre", { text: JSON.stringify(tool.outputSchema, null, 2) })) : null,
    form, box);
  card.dataset.signature = JSON.stringify([tool.title, tool.description, schema, tool.outputSchema, tool.plugin]);
  return card;
}

// -- rendering ------------------------------------------------------------------------------------
function renderCatalog(cat) {
  state.catalog = cat;
  $("#server-name").textContent = cat.server.name;
  $("#server-version").textContent = `mcpkit ${cat.server.version}`;
  // tool cards are kept while their schema is the same, so what is typed into a form stays
  const container = $("#tools");
  const old = new Map([...container.children].map((c) => [c.dataset.tool, c]));
  const cards = cat.tools.map((tool) => {
    const card = old.get(tool.name);
    const fresh = toolCard(tool);
    return card && card.dataset.signature === fresh.dataset.signature ? card : fresh;
  });
  container.replaceChildren(...cards);
  $("#tools-count").textContent = `(${cat.tools.length})`;
  applyFilter();
  fill($("#plugins tbody"), cat.plugins.map((p) => {
    const problems = [...p.warnings.map((w) => el("div", { class: "warn", text: `warning: ${w}` })),
      ...p.conflicts.map((c) => el("div", { class: "warn", text: `conflict: ${c.kind} ${c.name} is taken by ${c.plugin}` }))];
    const offers = Object.entries(p.items || {}).filter(([, names]) => names.length).map(([k, names]) => `${names.length} ${k}`).join(", ");
    const stateCell = p.error ? el("span", { class: "bad", text: `error: ${p.error}` })
      : p.loaded ? el("span", { class: "ok", text: p.status ? `loaded · ${p.status.state}` : "loaded" }) : "not loaded";
    return el("tr", { "data-plugin": p.name }, el("td", {}, el("b", { text: p.name })),
      el("td", { text: p.path || [p.distribution, p.version].filter(Boolean).join(" ") }), el("td", {}, stateCell),
      el("td", { text: offers || "—" }), el("td", {}, problems.length ? problems : "—"));
  }));
  renderUpstreams(cat.upstreams);
  $("#resources").replaceChildren(...(cat.resources.length ? cat.resources.map((r) => el("details", {},
    el("summary", {}, el("code", { text: r.uri || r.uriTemplate }), ` ${r.name || ""} · ${r.plugin || "?"}`),
    el("pre", { text: JSON.stringify(r, null, 2) }))) : [el("p", { class: "empty", text: "no resources" })]));
  $("#prompts").replaceChildren(...(cat.prompts.length ? cat.prompts.map((p) => el("details", {},
    el("summary", {}, el("code", { text: p.name }), ` · ${p.plugin || "?"}`),
    el("pre", { text: JSON.stringify(p, null, 2) }))) : [el("p", { class: "empty", text: "no prompts" })]));
}

function renderUpstreams(upstreams) {
  fill($("#upstreams tbody"), Object.entries(upstreams || {}).map(([name, s]) => el("tr", { "data-upstream": name },
    el("td", { text: name }), el("td", { class: s.state === "connected" ? "ok" : "bad", text: s.state }),
    el("td", {}, el("code", { text: JSON.stringify(Object.fromEntries(Object.entries(s).filter(([k]) => k !== "state"))) })))),
    "#upstreams-empty");
}

function applyFilter() {
  const text = $("#tool-filter").value.trim().toLowerCase();
  for (const card of $("#tools").children) card.hidden = text !== "" && !card.dataset.tool.toLowerCase().includes(text);
}

function renderState(live) {
  state.live = live;
  state.clockSkew = Date.now() / 1000 - live.now;
  const many = live.workers.length > 1;
  $("#count-sessions").textContent = live.open_sessions;
  $("#count-inflight").textContent = live.inflight_count;
  $("#count-streams").textContent = live.streams;
  $("#count-tasks").textContent = live.live_tasks ?? "?";
  $("#count-workers").textContent = live.workers.length;
  fill($("#inflight tbody"), live.inflight.map((c) => el("tr", { "data-method": c.method, "data-target": c.target || "" },
    el("td", { text: c.method }), el("td", {}, el("b", { text: c.target || "" })), el("td", { text: c.client || "—" }),
    el("td", { text: many ? c.worker : "this" }), el("td", { class: "running", "data-started": c.started, text: ago(serverNow() - c.started) }))),
    "#inflight-empty");
  fill($("#recent tbody"), live.recent.slice().reverse().slice(0, 50).map((c) => el("tr", { "data-target": c.target || "" },
    el("td", { text: clock(c.started + c.duration_ms / 1000) }), el("td", { text: c.method }), el("td", { text: c.target || "" }),
    el("td", { text: c.duration_ms.toFixed(1) }), el("td", { class: c.outcome === "ok" ? "ok" : "bad", text: c.outcome }),
    el("td", { text: c.client || "—" }), el("td", { text: c.transport }), el("td", { text: many ? c.worker : "this" }))));
  fill($("#latency tbody"), Object.entries(live.tools).sort(([a], [b]) => a.localeCompare(b)).map(([name, t]) =>
    el("tr", { "data-tool": name }, el("td", { text: name }), el("td", { text: t.calls }),
      el("td", { class: t.errors ? "bad" : "", text: t.errors }), el("td", { text: t.p50_ms ?? "—" }), el("td", { text: t.p99_ms ?? "—" }))));
  fill($("#sessions tbody"), live.sessions.map((s) => el("tr", {}, el("td", {}, el("code", { text: s.id.slice(0, 12) })),
    el("td", { text: s.transport }), el("td", { text: ago(serverNow() - s.opened) }), el("td", { text: many ? s.worker : "this" }))),
    "#sessions-empty");
  fill($("#tasks tbody"), live.tasks.map((t) => el("tr", {}, el("td", {}, el("code", { text: t.taskId.slice(0, 12) })),
    el("td", { text: t.tool }), el("td", { text: t.status }), el("td", { text: t.statusMessage || "" }),
    el("td", { text: many ? t.worker : "this" }))), "#tasks-empty");
  $("#task-updates").replaceChildren(...live.task_updates.slice().reverse().slice(0, 10).map((u) =>
    el("li", {}, `${clock(u.at)} `, el("code", { text: u.taskId.slice(0, 12) }), ` ${u.status}${u.statusMessage ? ": " + u.statusMessage : ""}`)));
  renderUpstreams(live.upstreams);
  $("#reloads").replaceChildren(...live.reloads.slice().reverse().map(reloadLine));
  $("#reloads-empty").hidden = live.reloads.length > 0;
}

function reloadLine(r) {
  const marks = [];
  for (const kind of ["tools", "prompts", "resources"]) {
    const m = [...(r.added[kind] || []).map((n) => `+${n}`), ...(r.removed[kind] || []).map((n) => `-${n}`),
      ...(r.changed[kind] || []).map((n) => `~${n}`)];
    if (m.length) marks.push(`${kind} ${m.join(" ")}`);
  }
  const text = r.ok ? `reloaded ${r.plugin} in ${(r.seconds * 1000).toFixed(0)} ms${marks.length ? ": " + marks.join("; ") : ""}`
    : `plugin ${r.plugin}: reload failed, the last good version keeps serving: ${r.error}`;
  return el("li", { class: r.ok ? "" : "bad" }, r.at ? `${clock(r.at)} ` : "", text);
}

// -- live updates ---------------------------------------------------------------------------------
const pending = { catalog: null, state: null };
function soon(what, delay = 120) {
  if (pending[what]) return;
  pending[what] = setTimeout(async () => {
    pending[what] = null;
    try {
      if (what === "catalog") renderCatalog(await getJson("/console/api/catalog"));
      else renderState(await getJson("/console/api/state"));
    } catch (e) { console.warn(e); }
  }, delay);
}

function connect() {
  const live = $("#live");
  const events = new EventSource("/console/events");
  events.addEventListener("hello", () => { live.textContent = "live"; live.className = "live on"; soon("state", 0); soon("catalog", 0); });
  for (const name of ["call", "sessions", "streams", "rejected", "tick"]) events.addEventListener(name, () => soon("state"));
  events.addEventListener("changed", (e) => { soon("state"); if (JSON.parse(e.data).event !== "task") soon("catalog"); });
  events.addEventListener("reload", (e) => {
    const r = JSON.parse(e.data);
    showBanner(reloadLine(r).textContent, !r.ok);
    soon("catalog", 0);
    soon("state", 0);
  });
  events.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
}

function tick() {  // the "running" column counts up between updates
  for (const cell of document.querySelectorAll("#inflight td.running")) cell.textContent = ago(serverNow() - Number(cell.dataset.started));
}

document.addEventListener("DOMContentLoaded", () => {
  $("#tool-filter").addEventListener("input", applyFilter);
  soon("catalog", 0);
  soon("state", 0);
  connect();
  setInterval(tick, 500);
  setInterval(() => soon("state"), 5000);  // what moves without an event (an upstream's state, task counts)
});
