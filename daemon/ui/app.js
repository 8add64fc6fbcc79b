// kiln's dashboard (docs/ui.md): no framework, no build step. The page
// lives at /SECRET/; it reads the daemon through api/ (the CLI's own
// requests as JSON) and follows its events over a websocket, resuming
// after the last event it saw when the connection comes back (a restarted
// daemon serves the same URL; its new epoch makes the page start over).
"use strict";

const SECRET = location.pathname.split("/")[1];
const BASE = "/" + SECRET + "/";
const ROW = 24;                  // px per row of the step list (virtualised)
const steps = new Map();         // url -> step state
const builds = new Map();        // build id -> progress
let order = [];                  // urls of the filtered list
let profile = "";
let cursor = null;               // {epoch, seq}: the last event handled
let queue = [];                  // events not drawn yet (one batch per frame)
let frame = 0;
let selected = null;
let agents = [];
let subs = [];                   // the daemon's event subscriptions
let planned = null;              // Set of the profile's step URLs (api/steps)
let stepsTimer = 0;
const thumbs = new Map();        // thumbnail URL -> its <img> (kept: a
                                 // redraw must not fetch it again)

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// 1536 -> "1.5 KiB" (as kiln status prints sizes)
function size(n) {
  n = Number(n || 0);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

// a wall-clock time in ns (a decimal string past 2^53) -> local "HH:MM:SS"
function clock(ns) {
  return new Date(Number(BigInt(ns) / 1000000n)).toLocaleTimeString();
}

function secs(ns) { return (Number(ns) / 1e9).toFixed(ns >= 1e10 ? 0 : 1) + " s"; }

async function api(path, post) {
  const r = await fetch(BASE + "api/" + path, { method: post ? "POST" : "GET" });
  const t = await r.text();
  try { return JSON.parse(t); } catch (e) { return { error: t }; }
}

function step(url) {
  let s = steps.get(url);
  if (!s) {
    s = { url: url, tool: "", status: "not built", reason: "", outputs: [],
          error: "", log: "", duration: 0, running: false, since: 0, expected: 0 };
    steps.set(url, s);
  }
  return s;
}

const RESULT = { RAN: "ran", REUSED: "reused", FAILED: "failed", SKIPPED: "skipped",
                 CANCELLED: "cancelled", WOULD_RUN: "would run" };

function buildOf(id, prof) {
  let b = builds.get(id);
  if (!b) {
    b = { id: id, profile: prof, done: 0, total: 0, left: 0, finished: null, failed: 0 };
    builds.set(id, b);
  }
  return b;
}

// One event of the wire schema (kiln.proto's Event), as JSON.
function apply(ev) {
  if (ev.step_started) {
    const e = ev.step_started, s = step(e.url);
    s.running = true; s.status = "running"; s.since = Date.now();
    s.expected = Number(e.expected_ns);
    if (e.builds.length) {
      const b = buildOf(Number(e.builds[0]), e.profile);
      b.done = e.done; b.total = e.total; b.left = Number(e.left_ns);
    }
  } else if (ev.step) {
    const e = ev.step, s = step(e.url);
    s.running = false;
    s.status = RESULT[e.result] || String(e.result).toLowerCase();
    s.reason = e.reason; s.error = e.error; s.log = e.log; s.outputs = e.outputs;
    s.duration = Number(e.duration_ns); s.profile = e.profile; s.at = Date.now();
    if (e.builds.length) {
      const b = buildOf(Number(e.builds[0]), e.profile);
      b.done = e.done; b.total = e.total; b.left = Number(e.left_ns);
      if (e.result === "FAILED") b.failed++;
    }
  } else if (ev.build_finished) {
    const e = ev.build_finished, b = buildOf(Number(e.build), e.profile);
    b.finished = e; b.total = e.total; b.done = e.total; b.left = 0;
    for (const s of steps.values()) if (s.running && s.status === "running") s.running = false;
    clearTimeout(timelineTimer);   // its trace is written as it ends
    timelineTimer = setTimeout(loadTimeline, 300);
    reloadSteps();
  } else if (ev.sources_changed) {
    reloadSteps();               // a description may have lost or gained steps
  } else if (ev.overflow && ev.overflow.new_epoch) {
    restart();                   // another daemon: what the page knew is stale
  } else if (ev.stopping) {
    setConn(false, "daemon stopping");
  }
}

function setConn(up, text) {
  const c = $("conn");
  c.className = "conn " + (up ? "up" : "down");
  c.textContent = text;
}

function schedule() {
  if (!frame) frame = requestAnimationFrame(flush);
}

function flush() {
  frame = 0;
  const batch = queue;
  queue = [];
  for (const ev of batch) apply(ev);
  draw();
}

// ---- the event stream ----

let ws = null;

function connect() {
  const since = cursor ? "&since=" + cursor.epoch + ":" + cursor.seq : "";
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  ws = new WebSocket(proto + "//" + location.host + "/ws?secret=" + SECRET + since);
  ws.onopen = () => setConn(true, "live");
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.error) { setConn(false, msg.error); return; }
    if (!msg.events) return;     // a heartbeat
    const epoch = msg.epoch;
    if (cursor && cursor.epoch !== epoch) restart();
    for (const ev of msg.events) queue.push(ev);
    cursor = { epoch: epoch, seq: msg.through };
    schedule();
  };
  ws.onclose = () => {
    setConn(false, "reconnecting");
    ws = null;
    setTimeout(connect, 1000);
  };
}

// A new daemon: start over from its descriptions and its events.
function restart() {
  builds.clear();
  loadTimeline();
  for (const s of steps.values()) s.running = false;
  loadSteps();
  status();
}

// ---- loading ----

// once a burst of changes is over
function reloadSteps() {
  clearTimeout(stepsTimer);
  stepsTimer = setTimeout(loadSteps, 300);
}

async function loadSteps() {
  const r = await api("steps" + (profile ? "?profile=" + encodeURIComponent(profile) : ""));
  if (!r.steps) return;
  profile = r.profile;
  // only the profile's steps are listed: a step deleted from the
  // descriptions (or seen in the events of the daemon's recent past)
  // is none of them
  planned = new Set(r.steps.map((s) => s.url));
  const sel = $("profile");
  if (sel.options.length !== r.profiles.length) {
    sel.textContent = "";
    for (const p of r.profiles) sel.appendChild(el("option", "", p));
  }
  sel.value = profile;
  for (const s of r.steps) {
    const st = step(s.url);
    st.tool = s.tool;
    st.images = s.images || [];
    // what the store recorded, until this page sees the step's own events
    if (st.status === "not built" && s.last)
      st.status = s.last === "FAILED" ? "failed" : "built";
  }
  draw();
}

async function status() {
  const r = await api("status");
  const s = r.status_reply;
  if (!s) return;
  $("project").textContent = s.project;
  $("store").textContent = "events " + s.event_seq + " · queue " + s.build_queue +
    " · clients " + s.clients + " · cache " + s.cache_mode +
    (s.cache_mode !== "off" ? " (hits " + s.cache_hits + ", misses " + s.cache_misses + ")" : "");
  agents = s.agents || [];
  subs = s.subscriptions || [];
  drawSubs();
  drawStore(s.store_stats);
  return s;
}

// ---- drawing ----

// The store panel: StatusReply.store_stats (absent from an older daemon).
function drawStore(st) {
  const gc = $("store-gc");
  if (!st || st.error) {
    $("store-blobs").textContent = "?";
    $("store-size").textContent = st && st.error ? "unknown: " + st.error : "unknown";
    gc.textContent = "";
    return;
  }
  $("store-blobs").textContent = String(st.blobs || 0);
  const bytes = BigInt(st.bytes || 0);
  $("store-size").textContent = size(st.bytes) + " (" + bytes + " bytes)" +
    (st.exact === false ? ", without an older kiln's puts" : "");
  gc.className = "figure" + (st.gc_running ? " running" : "");
  let t = st.gc_running ? "gc running since " + clock(st.gc_started_ns) + ". " : "";
  if (BigInt(st.last_gc_end_ns || 0) > 0n)
    t += "last gc " + clock(st.last_gc_end_ns) + ": removed " + (st.last_gc_removed_blobs || 0) +
      " blobs (" + size(st.last_gc_removed_bytes) + "), " + (st.last_gc_removed_actions || 0) +
      " action results";
  else if (!st.gc_running)
    t += "no gc finished yet";
  gc.textContent = t;
}

function globRe(g) {
  let re = "";
  for (let i = 0; i < g.length; i++) {
    const c = g[i];
    if (c === "*" && g[i + 1] === "*") { re += ".*"; i++; }
    else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp("^" + re + (g.includes("*") || g.includes("?") ? "$" : ""));
}

function draw() {
  drawBuilds();
  drawSlots();
  drawFailures();
  drawList();
}

function drawBuilds() {
  const box = $("builds");
  box.textContent = "";
  const list = [...builds.values()].sort((a, b) => b.id - a.id).slice(0, 5);
  if (!list.length) box.appendChild(el("p", "empty", "no build running"));
  for (const b of list) {
    const d = el("div", "build" + (b.failed || (b.finished && b.finished.failed) ? " failed" : ""));
    d.dataset.build = b.id;
    const f = b.finished;
    const head = "build " + b.id + " (" + b.profile + ") " + b.done + "/" + b.total +
      (f ? " · done in " + secs(f.duration_ns) + ": " + f.ran + " ran, " + f.reused +
           " up to date, " + f.failed + " failed" + (f.error ? " · " + f.error : "")
         : b.left ? " · about " + secs(b.left) + " left" : " · time left unknown (no earlier runs)");
    d.appendChild(el("div", "head", head));
    const bar = el("div", "bar"), fill = el("div");
    fill.style.width = (b.total ? 100 * b.done / b.total : 0) + "%";
    bar.appendChild(fill);
    d.appendChild(bar);
    if (!f) {
      const c = el("button", "cancel", "cancel");
      c.onclick = () => api("cancel?build=" + b.id, true);
      d.appendChild(c);
    }
    box.appendChild(d);
  }
}

function drawSlots() {
  const box = $("slots");
  box.textContent = "";
  const now = Date.now();
  const run = [...steps.values()].filter((s) => s.running);
  if (!run.length) box.appendChild(el("p", "empty", "no tool running"));
  run.sort((a, b) => a.since - b.since).forEach((s, i) => {
    const d = el("div", "slot");
    d.appendChild(el("span", "n", "#" + (i + 1)));
    d.appendChild(el("span", "t", ((now - s.since) / 1000).toFixed(1) + " s"));
    d.appendChild(el("span", "u", s.url));
    if (s.expected) d.appendChild(el("span", "x", "(usually " + secs(s.expected) + ")"));
    box.appendChild(d);
  });
  const ag = $("agents");
  ag.textContent = "";
  for (const a of agents)
    ag.appendChild(el("div", "agent", "agent " + a.name + ": " + a.running + "/" + a.slots +
                      " slots busy, " + a.ran + " ran, " + a.failed + " failed"));
}

// Who follows what: editors' live builds, kiln watch, kiln events, pages.
function drawSubs() {
  const box = $("subs");
  box.textContent = "";
  if (!subs.length) box.appendChild(el("p", "empty", "no subscriber"));
  for (const s of subs) {
    const what = (s.urls.length ? s.urls.join(" ") : "every URL") +
      (s.profile ? " (" + s.profile + ")" : "");
    box.appendChild(el("div", "subscriber", (s.dashboard ? "a dashboard page" :
      "client " + s.client) + ": " + what));
  }
}

function lastLines(text, n) {
  const lines = text.replace(/\n$/, "").split("\n");
  return lines.slice(-n).join("\n");
}

function drawFailures() {
  const box = $("failures");
  box.textContent = "";
  const failed = [...steps.values()].filter((s) => s.status === "failed" &&
                                             (!planned || planned.has(s.url)))
    .sort((a, b) => (b.at || 0) - (a.at || 0));
  if (!failed.length) box.appendChild(el("p", "empty", "no failures"));
  for (const s of failed.slice(0, 20)) {
    const d = el("div", "failure");
    d.dataset.url = s.url;
    d.appendChild(el("strong", "", s.url));
    d.appendChild(el("pre", "tail", lastLines(s.error, 12)));
    // what it last made (the run that failed published nothing)
    for (const name of s.images || []) {
      const t = thumb(s.url, name, s.log || s.at);
      if (t) d.appendChild(t);
    }
    if (s.log) {
      const a = el("a", "", "whole log");
      a.href = BASE + "api/log?id=" + s.log;
      a.target = "_blank";
      d.appendChild(a);
    }
    box.appendChild(d);
  }
}

function drawList() {
  const g = $("glob").value.trim(), want = $("status").value;
  const re = g ? globRe(g) : null;
  order = [...steps.keys()].filter((u) => {
    const s = steps.get(u);
    return (!planned || planned.has(u)) && (!re || re.test(u)) &&
      (!want || s.status === want);
  }).sort();
  $("count").textContent = "(" + order.length + ")";
  $("spacer").style.height = order.length * ROW + "px";
  drawRows();
}

// Only the rows in view exist: thousands of steps stay cheap.
function drawRows() {
  const list = $("list"), rows = $("rows");
  const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
  const last = Math.min(order.length, first + Math.ceil(list.clientHeight / ROW) + 10);
  rows.style.top = first * ROW + "px";
  rows.textContent = "";
  for (let i = first; i < last; i++) {
    const s = steps.get(order[i]);
    const r = el("div", "row" + (s.url === selected ? " sel" : ""));
    r.dataset.url = s.url;
    r.appendChild(el("span", "st " + s.status.replace(" ", "-"), s.status));
    r.appendChild(el("span", "u", s.url));
    r.appendChild(el("span", "d", s.duration ? secs(s.duration) : ""));
    const b = el("button", "rebuild", "rebuild");
    b.onclick = (e) => { e.stopPropagation(); rebuild(s.url); };
    r.appendChild(b);
    r.onclick = () => select(s.url);
    rows.appendChild(r);
  }
}

async function rebuild(url) {
  const r = await api("build?url=" + encodeURIComponent(url) +
                      "&profile=" + encodeURIComponent(profile), true);
  if (r.build_reply) buildOf(Number(r.build_reply.build), r.build_reply.profile).total =
    r.build_reply.steps;
  schedule();
}

// An image output of a step as a thumbnail (api/image: PNG, JPEG, a
// folder's first); gone when the output is none (not built, not an
// image). v only tells one version of the output from the next.
function thumb(url, name, v) {
  const src = BASE + "api/image?profile=" + encodeURIComponent(profile) + "&url=" +
    encodeURIComponent(url) + "&output=" + encodeURIComponent(name) + "&v=" + (v || "");
  let img = thumbs.get(src);
  if (!img) {
    if (thumbs.size > 1000) thumbs.clear();
    img = el("img", "thumb");
    img.alt = name;
    img.title = name;
    img.dataset.output = name;
    img.onerror = () => { img.dataset.failed = "1"; img.remove(); };
    img.src = src;
    thumbs.set(src, img);
  }
  return img.dataset.failed ? null : img;
}

// ---- one step ----

function dl(pairs) {
  const d = el("dl");
  for (const [k, v] of pairs) {
    d.appendChild(el("dt", "", k));
    if (v instanceof Node) d.appendChild(v); else d.appendChild(el("dd", "", v));
  }
  return d;
}

async function select(url) {
  selected = url;
  drawRows();
  $("detail-url").textContent = url;
  const box = $("detail"), s = steps.get(url);
  const q = "?profile=" + encodeURIComponent(profile) + "&url=" + encodeURIComponent(url);
  const [why, deps] = await Promise.all([api("why" + q), api("deps" + q)]);
  if (selected !== url) return;
  box.textContent = "";
  const rec = why.why_reply && why.why_reply.record;
  const d = deps.deps_reply;
  const outs = el("dd");
  const outputs = s.outputs && s.outputs.length ? s.outputs : (rec ? rec.outputs : []);
  for (const o of outputs) outs.appendChild(el("div", "", o.name + " " + o.id + " " + o.size + " B " + o.path));
  if (!outputs.length) outs.textContent = "none recorded";
  // images are looked at, not read: each image output as a thumbnail
  for (const name of s.images || []) {
    const o = outputs.find((x) => x.name === name), t = thumb(url, name, o ? o.id : s.at);
    if (t) outs.appendChild(t);
  }
  const log = s.log || (rec ? rec.log : "");
  const pairs = [
    ["status", s.status + (s.reason ? ": " + s.reason : "")],
    ["why", rec ? rec.decision + ": " + rec.reason +
      rec.changes.map((c) => "\n  " + c.label).join("") : (why.error || "never built")],
    ["inputs", d ? d.inputs.concat(d.prerequisites.map((p) => "@" + p)).join("\n") || "none" : deps.error],
    ["discovered", d ? d.files.map((f) => f.path + (f.hash ? "" : " (missing)")).join("\n") || "none" : ""],
    ["outputs", outs],
  ];
  box.appendChild(dl(pairs));
  if (log) {
    const a = el("a", "", "whole log");
    a.href = BASE + "api/log?id=" + log;
    a.target = "_blank";
    box.appendChild(a);
    const pre = el("pre", "log", "");
    box.appendChild(pre);
    fetch(a.href).then((r) => r.text()).then((t) => { pre.textContent = lastLines(t, 40); });
  }
}

// ---- the last build's timeline (its trace, as kiln trace writes it) ----

let timelineTimer = 0;
let slices = [];                 // drawn, for the tooltip: {x, y, w, h, text}
let timelineLanes = [];          // the lanes' names, top to bottom

async function loadTimeline() {
  const r = await fetch(BASE + "api/trace");
  if (!r.ok) return;
  drawTimeline(await r.json());
}

function drawTimeline(trace) {
  const c = $("timeline"), g = c.getContext("2d");
  const evs = trace.traceEvents || [];
  const lanes = new Map();       // tid -> {name, sort}
  let span = 1, head = "";
  for (const e of evs) {
    if (e.ph === "M" && e.name === "thread_name") lanes.set(e.tid, { name: e.args.name, sort: e.tid });
    if (e.ph === "M" && e.name === "thread_sort_index" && lanes.has(e.tid)) lanes.get(e.tid).sort = e.args.sort_index;
    if (e.ph === "X" && e.cat === "build") { span = Math.max(span, e.dur); head = e.name + ", " + (e.dur / 1e6).toFixed(2) + " s"; }
  }
  const order = [...lanes.entries()].sort((a, b) => a[1].sort - b[1].sort).map((x) => x[0]);
  timelineLanes = order.map((tid) => lanes.get(tid).name);
  const LANE = 18, LEFT = 110;
  c.width = c.clientWidth;
  c.height = Math.max(1, order.length) * LANE + 4;
  g.fillStyle = "#1e2126";
  g.fillRect(0, 0, c.width, c.height);
  g.font = "11px monospace";
  const scale = (c.width - LEFT - 4) / span;
  order.forEach((tid, i) => {
    const name = lanes.get(tid).name;
    // publishing apart: a line between the slots and its lanes
    if (name.startsWith("publishing") && i > 0 && !timelineLanes[i - 1].startsWith("publishing")) {
      g.fillStyle = "#8a9099";
      g.fillRect(0, i * LANE, c.width, 1);
    }
    g.fillStyle = "#8a9099";
    g.fillText(name, 2, i * LANE + 13);
  });
  slices = [];
  for (const e of evs) {
    if (e.ph !== "X") continue;
    const row = order.indexOf(e.tid);
    if (row < 0) continue;
    const x = LEFT + e.ts * scale, w = Math.max(1, e.dur * scale), y = row * LANE + 2;
    const d = e.args && e.args.decision;
    g.fillStyle = e.cat === "build" ? "#3a4350" : e.cat === "need" ? "#6cb6ff" :
                  e.cat === "publish" ? "#8f7fd1" :
                  d === "failed" ? "#e5534b" : d === "cancelled" ? "#666" : "#4caf7a";
    g.fillRect(x, y, w, LANE - 4);
    if (w > 40 && (e.cat === "step" || e.cat === "publish")) {
      g.fillStyle = "#000";
      g.save();
      g.beginPath(); g.rect(x, y, w, LANE - 4); g.clip();
      g.fillText(e.name, x + 2, y + 11);
      g.restore();
    }
    slices.push({ x: x, y: y, w: w, h: LANE - 4, cat: e.cat,
                  text: (e.cat === "publish" ? "publishing " : "") + e.name + " " +
                    (e.dur / 1e6).toFixed(2) + " s" + (d ? " (" + d + ")" : "") });
  }
  $("timeline-title").textContent = head;
}

$("timeline").onmousemove = (m) => {
  const r = $("timeline").getBoundingClientRect(), x = m.clientX - r.left, y = m.clientY - r.top;
  const hit = slices.filter((s) => x >= s.x && x <= s.x + s.w && y >= s.y && y <= s.y + s.h).pop();
  $("timeline").title = hit ? hit.text : "";
};

// ---- start ----

// What hold and release do, said on the page (a tooltip is not read).
function holdNote(text) {
  const n = $("hold-note");
  n.textContent = text;
  n.hidden = !text;
}
$("hold").onclick = async () => {
  const r = await api("hold", true);
  const ok = r.status === "STATUS_OK";
  $("hold").textContent = ok ? "holding" : "hold";
  holdNote(ok ? "holding change reports: edits are gathered, not reported, so nothing " +
                "rebuilds until release (as kiln hold)"
              : "hold refused: " + (r.error || "?"));
};
$("release").onclick = async () => {
  const r = await api("release", true);
  $("hold").textContent = "hold";
  holdNote(r.status === "STATUS_OK" ? "released every hold (yours, kiln hold's): the " +
           "edits held meanwhile are reported now, as one batch" : "release refused: " +
           (r.error || "?"));
};
$("glob").oninput = schedule;
$("status").onchange = schedule;
$("profile").onchange = () => { profile = $("profile").value; loadSteps(); };
$("list").onscroll = drawRows;
setInterval(() => { drawSlots(); }, 1000);
setInterval(status, 2000);
// The first connection replays what the daemon still holds (its ring of
// recent events), so results of builds before the page opened show too.
status().then((st) => {
  if (st && !cursor)
    cursor = { epoch: BigInt(st.event_epoch).toString(16).padStart(16, "0"), seq: 0 };
  connect();
});
loadSteps();
loadTimeline();
