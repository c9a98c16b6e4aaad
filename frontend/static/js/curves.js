// Live training curves with plotly.js.
//
// The server sends each curve downsampled to about `points` buckets (mean x, mean y, and
// the min/max of the bucket so a one-step spike still shows as a band). Live metric events
// are appended with Plotly.extendTraces, so a chart grows in place.
// One CurveBoard draws one run (the run page) or several overlaid (the compare page). A run resumed
// from another (its `lineage`, from the server) also shows the runs it continues, each up to the step
// it was resumed from, as lighter lines in its keys' colours, with a dotted line at that step.
//
// What a live step costs: each extendTraces is a full plotly redraw of that chart (about
// 10 ms of main thread), and the browser often shares a laptop's cores with the studio and
// the run it shows. So a step's points enter the board's data at once, but charts are drawn
// in animation frames: only charts that got points and are near the screen (one scrolled
// away is redrawn when it comes back), and no more of the main thread than DRAW_SHARE.

import { esc, fmt } from "./api.js";
import { chartColors } from "./theme.js";

const POINTS = 1000;
// After a live frame that drew for t ms the next waits t·(1/DRAW_SHARE - 1) ms, so a fast
// run's steps merge into fewer redraws instead of taking the main thread (the paint that
// follows a redraw costs about as much again, so the charts take about twice this share).
// At 0.1 the 9 charts a laptop shows still redraw once or twice a second.
const DRAW_SHARE = 0.1;
// A chart this close to the viewport counts as on screen, so it is current when scrolled to.
const NEAR_SCREEN = "100px";
// A series drawn from fewer points than this shows markers: one point makes no line. Up to
// MARKED_POINTS its points are marked on the line too (a few steps' line hides where the steps are);
// a panel with such a series is drawn again, not extended, so its marks go once it has more.
const MIN_LINE_POINTS = 2;
const MARKED_POINTS = 12;
const traceMode = (n) => (n < MIN_LINE_POINTS ? "markers" : n < MARKED_POINTS ? "lines+markers" : "lines");
// Steps spanning fewer than this get a tick at every step: plotly's own ticks for a short span are
// fractions (0.5, 1.5), which a step never is.
const FEW_STEPS = 8;

// Panels come from the server (studio/runs/panels.py), in the order the page shows them: a
// metric key lands in the first panel whose pattern matches it; keys nobody claims get a
// panel per namespace ("custom/...").
export function panelDefs(panels) {
  if (!Array.isArray(panels)) throw new Error("CurveBoard needs the server's panel rules (readRules().panels)");
  return panels.map((p) => {
    const pattern = new RegExp(p.pattern);
    return { ...p, match: (k) => pattern.test(k) };
  });
}

// Within a panel the summary statistic comes first (so it gets the first colour), then the rest.
const KEY_ORDER = ["mean", "length_mean", "tokens_per_s", "generate_s", "score_s", "train_s", "std", "min", "max"];
function keyRank(key) {
  const last = key.split("/").pop();
  const i = KEY_ORDER.indexOf(last);
  return i < 0 ? KEY_ORDER.length : i;
}
export function sortKeys(keys) {
  return [...keys].sort((a, b) => keyRank(a) - keyRank(b) || a.localeCompare(b));
}

export function panelFor(key, defs) {
  const known = defs.find((p) => p.match(key));
  if (known) return known;
  const ns = key.includes("/") ? key.split("/")[0] : "other";
  return { id: `ns-${ns}`, title: ns, match: (k) => k.startsWith(`${ns}/`) };
}

// Debiased exponential moving average (as TensorBoard does), with its running state so
// live points continue the same smoothed line.
export class Ema {
  constructor(alpha) {
    this.alpha = alpha;
    this.last = 0;
    this.weight = 0;
  }
  push(v) {
    if (this.alpha <= 0) return v;
    this.last = this.last * this.alpha + (1 - this.alpha) * v;
    this.weight = this.weight * this.alpha + (1 - this.alpha);
    return this.last / this.weight;
  }
}

// Plotly shows dates as naive UTC; shift by the browser's offset so the axis reads local time.
const TZ_MS = new Date().getTimezoneOffset() * 60000;
const toAxis = (x, mode) => (mode === "time" ? x * 1000 - TZ_MS : x);
function fromAxis(v, mode) {
  if (mode !== "time") return Number(v);
  const ms = typeof v === "number" ? v : Date.parse(String(v).replace(" ", "T") + "Z");
  return (ms + TZ_MS) / 1000;
}

function hoverText(raw, lo, hi, smoothed) {
  let text = fmt(raw, 5);
  if (lo !== hi) text += ` [min ${fmt(lo)}, max ${fmt(hi)}]`;
  if (smoothed !== raw) text += ` · smoothed ${fmt(smoothed)}`;
  return text;
}

function withAlpha(color, alpha) {
  const hex = color.replace("#", "");
  if (hex.length !== 6) return color;
  const n = parseInt(hex, 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

export class CurveBoard {
  /**
   * @param container element that receives one .chart-panel per group of keys
   * @param api       Api instance
   * @param sources   [{runId, label}]: one for the run page, several on the compare page
   * @param panels    the server's panel rules (readRules().panels)
   * @param onCursor  called with the cursor of the first source's response
   * @param lineage   one source only: the runs it continues, oldest first, each with the steps of it that
   *                  it goes on from ({id, name, step_min, step_max}: studio.runs.lifecycle.lineage)
   * @param reserved  ids of panels the run will fill later (its validation's): their place is kept in the
   *                  grid from the first chart on, so the others do not move when they appear
   */
  constructor(container, { api, sources, panels, onCursor = () => {}, lineage = [], reserved = [] }) {
    this.panelDefs = panelDefs(panels);
    this.container = container;
    this.api = api;
    this.sources = sources;
    this.onCursor = onCursor;
    this.lineage = sources.length === 1 ? lineage : [];
    this.reserved = reserved;
    this.xMode = "step";
    this.smoothing = 0;
    this.logY = false;
    this.range = null; // [start, end] in x units while zoomed
    // `${runId}|${key}` -> {x, y, lo, hi, steps, lastStep}: `steps` holds the step of each live
    // point (null for the server's, which may be bucket means); lastStep is the highest step
    // drawn. Live points are matched by step, never by x: in wall-time mode the server's x is
    // MetricPoint.wall_time and a live point's is its event's time, a little later.
    this.data = new Map();
    this.keys = new Set();
    // panel id -> {def, el, chart, keys, slots, visible, stale, sparse}. A slot per drawn series:
    // {runId, key, line, band: [lo, hi] | null, ema}, the indices of its traces and the running
    // smoothing that live points continue.
    this.panels = new Map();
    this.fresh = []; // live points accepted since the last frame drew: [{step, time, values}]
    this.newKeys = false;
    this.frameAsked = false;
    this.nextFrameAt = 0; // performance.now() before which no live frame draws
    this.syncing = false;
    this.abort = null;
    this.observer =
      typeof IntersectionObserver === "undefined"
        ? null
        : new IntersectionObserver((entries) => this.onVisibility(entries), { rootMargin: NEAR_SCREEN });
    window.addEventListener("themechange", () => this.redrawAll());
  }

  // The first curves a user looks at; on the run page they are fetched (and drawn) first.
  static FIRST_KEYS = ["reward/mean", "reward/std", "actor/kl", "actor/entropy", "response/length_mean"];

  async load() {
    if (this.abort) this.abort.abort();
    this.abort = new AbortController();
    const params = { x: this.xMode, points: POINTS };
    if (this.range) [params.start, params.end] = this.range;
    const fetchRun = (runId, keys, steps = {}) =>
      this.api.get(`/api/runs/${runId}/metrics/`, { ...params, ...steps, ...(keys ? { keys: keys.join(",") } : {}) }, this.abort.signal);
    // The runs this one continues, each over its own steps (a run the viewer may not open is left out).
    const ancestors = () =>
      Promise.all(
        this.lineage.map((a) =>
          fetchRun(a.id, null, { step_min: a.step_min, step_max: a.step_max })
            .then((resp) => this.ingest(a.id, resp))
            .catch((e) => {
              if (e.name === "AbortError") throw e;
              console.warn(`run #${a.id}'s curves: ${e.message}`);
            }),
        ),
      );
    if (this.sources.length > 1 || this.range) {
      const [responses] = await Promise.all([Promise.all(this.sources.map((s) => fetchRun(s.runId))), ancestors()]);
      responses.forEach((resp, i) => this.ingest(this.sources[i].runId, resp));
      this.redrawAll();
      return responses[0]?.cursor ?? 0;
    }
    // One run, whole range: the headline curves first, so the page shows something at once,
    // then the rest. Both responses are drawn in place; the cursor is the first one's.
    const runId = this.sources[0].runId;
    const first = await fetchRun(runId, CurveBoard.FIRST_KEYS);
    this.ingest(runId, first);
    this.onCursor(first.cursor);
    this.redrawAll();
    const rest = first.keys.filter((k) => !CurveBoard.FIRST_KEYS.includes(k));
    const [restResp] = await Promise.all([rest.length ? fetchRun(runId, rest) : null, ancestors()]);
    if (restResp) this.ingest(runId, restResp);
    if (restResp || this.lineage.length) this.redrawAll();
    return first.cursor;
  }

  // Store a metrics response; live points newer than what the server sent are kept.
  ingest(runId, resp) {
    for (const key of resp.keys) this.keys.add(key);
    for (const [key, s] of Object.entries(resp.series)) {
      const id = `${runId}|${key}`;
      const lastStep = s.last_step ?? null;
      const fresh = { x: s.x, y: s.y, lo: s.y_min, hi: s.y_max, steps: s.x.map(() => null), lastStep };
      const old = this.data.get(id);
      const last = fresh.x.length ? fresh.x[fresh.x.length - 1] : -Infinity;
      if (old && !this.range) {
        old.x.forEach((x, i) => {
          const step = old.steps?.[i] ?? null;
          if (step !== null && lastStep !== null ? step <= lastStep : x <= last) return;
          fresh.x.push(x);
          fresh.y.push(old.y[i]);
          fresh.lo.push(old.lo[i]);
          fresh.hi.push(old.hi[i]);
          fresh.steps.push(step);
          if (step !== null) fresh.lastStep = Math.max(fresh.lastStep ?? step, step);
        });
      }
      this.data.set(id, fresh);
    }
  }

  // The latest points of the first source's `key` as [step, value] (step mode only), oldest first.
  recentPoints(key, count = 6) {
    const d = this.data.get(`${this.sources[0].runId}|${key}`);
    if (!d || this.xMode !== "step") return [];
    const from = Math.max(0, d.x.length - count);
    return d.x.slice(from).map((x, i) => [x, d.y[from + i]]);
  }

  // Whether a live point is already drawn. The REST load and the websocket can overlap by a
  // step or two (the cursor is read before the points).
  drawn(d, step, x) {
    if (step !== null && step !== undefined && d.lastStep !== null && d.lastStep !== undefined) return step <= d.lastStep;
    return d.x.length > 0 && x <= d.x[d.x.length - 1];
  }

  setSmoothing(alpha) {
    this.smoothing = alpha;
    this.redrawAll();
  }

  setLog(on) {
    this.logY = on;
    for (const p of this.panels.values()) {
      if (!p.plotted) continue; // reserved, not drawn yet
      p.flat = this.flatRange(p);
      const y = p.flat ? { "yaxis.range": p.flat } : { "yaxis.autorange": true };
      Plotly.relayout(p.chart, { "yaxis.type": on ? "log" : "linear", ...y });
    }
  }

  async setXMode(mode) {
    this.xMode = mode;
    this.range = null;
    await this.reload();
  }

  // Everything read again from the server: the run was rewound (a restart from a checkpoint), so
  // points drawn after its step are gone and will be reported again.
  async reload() {
    this.data.clear();
    return this.load();
  }

  panelOrder(id) {
    const i = this.panelDefs.findIndex((p) => p.id === id);
    return i < 0 ? this.panelDefs.length : i;
  }

  groups() {
    const groups = new Map();
    for (const key of sortKeys(this.keys)) {
      const def = panelFor(key, this.panelDefs);
      if (!groups.has(def.id)) groups.set(def.id, { def, keys: [] });
      groups.get(def.id).keys.push(key);
    }
    const order = (id) => this.panelOrder(id);
    return [...groups.values()].sort((a, b) => order(a.def.id) - order(b.def.id) || a.def.id.localeCompare(b.def.id));
  }

  // The panels in the grid in their order, reserved ones (no points yet) included: a panel made later
  // goes to its place, not to the end.
  placePanels(groups) {
    const ids = groups.map((g) => g.def.id);
    for (const id of this.reserved) {
      const def = this.panelDefs.find((p) => p.id === id);
      if (!def || ids.includes(id)) continue;
      const entry = this.panelElement(def);
      if (!entry.plotted && !entry.chart.querySelector(".chart-waiting")) {
        entry.chart.innerHTML = '<div class="chart-waiting muted">No points yet: they come with the run\'s first validation.</div>';
      }
      ids.push(id);
    }
    ids.sort((a, b) => this.panelOrder(a) - this.panelOrder(b) || a.localeCompare(b));
    let cursor = this.container.firstElementChild;
    for (const id of ids) {
      const el = this.panels.get(id)?.el;
      if (!el) continue;
      if (el === cursor) cursor = cursor.nextElementSibling;
      else this.container.insertBefore(el, cursor);
    }
  }

  panelElement(def) {
    let entry = this.panels.get(def.id);
    if (entry) return entry;
    const el = document.createElement("section");
    el.className = "chart-panel";
    el.dataset.panel = def.id;
    el.innerHTML = `<header><h3>${esc(def.title)}</h3><span class="latest"></span></header><div class="chart"></div>`;
    this.container.appendChild(el);
    entry = { def, el, chart: el.querySelector(".chart"), keys: [], slots: [], visible: true, stale: false, sparse: false, plotted: false };
    this.panels.set(def.id, entry);
    this.observer?.observe(el);
    const chart = entry.chart;
    // plotly attaches .on() to the div after the first plot; register once it exists.
    entry.bind = () => {
      chart.on("plotly_relayout", (ev) => this.onRelayout(ev));
      entry.bind = () => {};
    };
    return entry;
  }

  // The traces of one series: its line, and before it the min/max band of the server's buckets
  // when they have a spread (a run shorter than POINTS steps has none: no band to draw).
  traceSet(panel, runId, key, colorIndex, dashIndex) {
    const colors = chartColors();
    const color = colors.series[colorIndex % colors.series.length];
    const d = this.data.get(`${runId}|${key}`) || { x: [], y: [], lo: [], hi: [] };
    const ema = new Ema(this.smoothing);
    const smooth = d.y.map((v) => ema.push(v));
    const x = d.x.map((v) => toAxis(v, this.xMode));
    const source = this.sources.find((s) => s.runId === runId);
    const name = this.sources.length > 1 ? `${source.label} · ${key}` : key;
    const stacked = panel.def.stacked && this.sources.length === 1;
    const sparse = d.x.length < MARKED_POINTS;
    const line = {
      x,
      y: smooth,
      name,
      mode: traceMode(d.x.length),
      marker: { color, size: 7 },
      line: { color, width: 1.8, dash: ["solid", "dot", "dash", "dashdot"][dashIndex % 4] },
      text: d.y.map((v, i) => hoverText(v, d.lo[i], d.hi[i], smooth[i])),
      hovertemplate: `${esc(name)}: %{text}<extra></extra>`,
      ...(this.lineage.length ? { legendgroup: key } : {}), // its legend entry shows and hides the earlier runs' line too
      ...(stacked ? { stackgroup: "time", line: { color, width: 1 } } : {}),
    };
    if (stacked || !d.lo.some((lo, i) => lo !== d.hi[i])) return { ema, sparse, bands: [], line };
    // Bands carry an empty `text` so one extendTraces call can extend a series' three traces.
    const band = { x, text: d.lo.map(() => ""), mode: "lines", line: { width: 0, color }, hoverinfo: "skip", showlegend: false };
    const bands = [
      { ...band, y: d.lo },
      { ...band, y: d.hi, fill: "tonexty", fillcolor: withAlpha(color, 0.18) },
    ];
    return { ema, sparse, bands, line };
  }

  layout(panel) {
    const c = chartColors();
    const axis = { gridcolor: c.grid, zerolinecolor: c.grid, linecolor: c.grid, tickfont: { color: c.muted }, automargin: true };
    const layout = {
      margin: { l: 48, r: 12, t: 8, b: 32 },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: c.text, size: 11 },
      hovermode: "x unified",
      hoverlabel: { bgcolor: c.panel, font: { color: c.text } },
      showlegend: true,
      // "normal": plotly reverses the legend when traces fill (our min/max bands) unless told not to
      legend: { orientation: "h", y: -0.22, traceorder: "normal", font: { size: 10, color: c.muted } },
      xaxis: { ...axis, type: this.xMode === "time" ? "date" : "linear", title: { text: "" } },
      yaxis: { ...axis, type: this.logY ? "log" : "linear" },
      uirevision: `${this.xMode}`,
    };
    const flat = this.flatRange(panel);
    if (flat) layout.yaxis.range = flat;
    if (this.range) {
      layout.xaxis.range = this.range.map((v) => toAxis(v, this.xMode));
      layout.xaxis.autorange = false;
    } else {
      Object.assign(layout.xaxis, this.stepAxis(panel) || {});
    }
    return layout;
  }

  // A step axis for few steps (step mode, not zoomed): one step is drawn at the middle of step ± 0.5
  // with its one tick (plotly's own pad gave a lone step-0 point a -1..1 axis ticked in halves), a
  // short span ticks every step; null leaves plotly's ticks. Counts the runs this one continues too.
  stepAxis(panel) {
    if (this.xMode !== "step") return null;
    let lo = Infinity;
    let hi = -Infinity;
    const ids = [...new Set([...(panel.slots || []).map((s) => s.runId), ...this.lineage.map((a) => a.id)])];
    for (const id of ids) {
      for (const key of panel.keys || []) {
        for (const x of this.data.get(`${id}|${key}`)?.x || []) {
          if (x < lo) lo = x;
          if (x > hi) hi = x;
        }
      }
    }
    if (lo === Infinity) return null;
    if (hi - lo >= FEW_STEPS) return { autorange: true, tickmode: "auto" };
    const ticks = { tickmode: "linear", tick0: 0, dtick: 1 };
    return lo === hi ? { ...ticks, autorange: false, range: [lo - 0.5, lo + 0.5] } : { ...ticks, autorange: true };
  }

  // The step axis again after new points, when its kind changed (one step, a few, many).
  restepAxis(panel) {
    if (this.range) return;
    const axis = this.stepAxis(panel);
    const kind = axis && (axis.range ? `one ${axis.range[0]}` : axis.tickmode);
    if (kind === (panel.stepAxisKind || null)) return;
    panel.stepAxisKind = kind;
    if (!axis) return;
    const update = {};
    for (const [name, value] of Object.entries(axis)) update[`xaxis.${name}`] = value;
    Plotly.relayout(panel.chart, update);
  }

  drawPanel(def, keys) {
    const panel = this.panelElement(def);
    panel.keys = keys;
    panel.slots = [];
    panel.stale = false;
    panel.sparse = false;
    const traces = [];
    const overlay = this.sources.length > 1;
    if (!overlay) keys.forEach((key, i) => traces.push(...this.lineageTraces(key, i, def.stacked)));
    this.sources.forEach((source, s) => {
      keys.forEach((key, i) => {
        // one run: a colour per key; several runs: a colour per run, a dash per key
        const set = this.traceSet(panel, source.runId, key, overlay ? s : i, overlay ? i : 0);
        const band = set.bands.length ? [traces.length, traces.length + 1] : null;
        traces.push(...set.bands, set.line);
        panel.slots.push({ runId: source.runId, key, line: traces.length - 1, band, ema: set.ema });
        panel.sparse ||= set.sparse;
      });
    });
    const layout = this.layout(panel);
    if (!overlay) Object.assign(layout, this.resumeMarks(keys));
    panel.flat = layout.yaxis.range || null;
    const axis = this.range ? null : this.stepAxis(panel);
    panel.stepAxisKind = axis && (axis.range ? `one ${axis.range[0]}` : axis.tickmode);
    panel.chart.querySelector(".chart-waiting")?.remove();
    panel.plotted = true;
    Plotly.react(panel.chart, traces, layout, {
      responsive: true,
      displaylogo: false,
      modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d", "toggleSpikelines"],
    });
    panel.bind();
    this.showLatest(panel);
  }

  // The lines of `key` in the runs this one continues: lighter, in the key's colour, hovered by run.
  lineageTraces(key, colorIndex, stacked = false) {
    const colors = chartColors();
    const color = colors.series[colorIndex % colors.series.length];
    const traces = [];
    for (const a of this.lineage) {
      const d = this.data.get(`${a.id}|${key}`);
      if (!d || !d.x.length) continue;
      const ema = new Ema(this.smoothing);
      const smooth = d.y.map((v) => ema.push(v));
      const name = `run #${a.id} · ${key}`;
      traces.push({
        x: d.x.map((v) => toAxis(v, this.xMode)),
        y: smooth,
        name,
        legendgroup: key,
        showlegend: false,
        mode: traceMode(d.x.length),
        marker: { color: withAlpha(color, 0.45), size: 6 },
        line: { color: withAlpha(color, 0.45), width: 1.6 },
        text: d.y.map((v, i) => hoverText(v, d.lo[i], d.hi[i], smooth[i])),
        hovertemplate: `${esc(name)}: %{text}<extra></extra>`,
        meta: { resumedFrom: a.id },
        ...(stacked ? { stackgroup: `run-${a.id}`, fillcolor: withAlpha(color, 0.12) } : {}),
      });
    }
    return traces;
  }

  // A dotted line where the run (or a run it continues) went on from the one before, with its words.
  resumeMarks(keys) {
    const c = chartColors();
    const shapes = [];
    const annotations = [];
    for (const a of this.lineage) {
      let x = a.step_max;
      if (this.xMode === "time") {
        // the wall time of its last point drawn: where the next run took over
        const lasts = keys.map((k) => this.data.get(`${a.id}|${k}`)?.x.at(-1)).filter((v) => v !== undefined);
        if (!lasts.length) continue;
        x = Math.max(...lasts);
      }
      const at = toAxis(x, this.xMode);
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: at, x1: at, y0: 0, y1: 1, line: { color: c.muted, width: 1, dash: "dot" } });
      annotations.push({
        x: at, xref: "x", y: 1, yref: "paper", xanchor: "left", yanchor: "top", showarrow: false,
        text: esc(`resumed from run #${a.id} at step ${a.step_max}`), font: { size: 10, color: c.muted },
      });
    }
    return shapes.length ? { shapes, annotations } : {};
  }

  redrawAll() {
    const groups = this.groups();
    let empty = this.container.querySelector(".curves-empty");
    if (!groups.length && !empty) {
      empty = document.createElement("div");
      empty.className = "curves-empty";
      empty.textContent = "No metrics yet: the curves appear with the first training step.";
      this.container.appendChild(empty);
    } else if (groups.length && empty) {
      empty.remove();
    }
    for (const { def, keys } of groups) this.drawPanel(def, keys);
    if (groups.length) this.placePanels(groups);
  }

  showLatest(panel) {
    if (this.sources.length !== 1) return;
    const { runId, key } = panel.slots[0] || {};
    const d = this.data.get(`${runId}|${key}`);
    const label = panel.el.querySelector(".latest");
    label.textContent = d && d.y.length ? `${key.split("/").pop()} ${fmt(d.y[d.y.length - 1])}` : "";
  }

  // Live metrics of the first source: stored at once, drawn in the next frame the budget allows.
  push(step, time, values) {
    const runId = this.sources[0].runId;
    const x = this.xMode === "time" ? time : step;
    const kept = {}; // the values minus points already drawn
    for (const [key, value] of Object.entries(values)) {
      if (typeof value !== "number" || !Number.isFinite(value)) continue;
      const id = `${runId}|${key}`;
      if (!this.data.has(id)) this.data.set(id, { x: [], y: [], lo: [], hi: [], steps: [], lastStep: null });
      const d = this.data.get(id);
      if (this.drawn(d, step, x)) continue;
      kept[key] = value;
      d.x.push(x);
      d.y.push(value);
      d.lo.push(value);
      d.hi.push(value);
      d.steps.push(step ?? null);
      if (step !== null && step !== undefined) d.lastStep = Math.max(d.lastStep ?? step, step);
      if (!this.keys.has(key)) {
        this.keys.add(key);
        this.newKeys = true;
      }
    }
    this.fresh.push({ step, time, values: kept });
    this.askFrame();
  }

  askFrame() {
    if (this.frameAsked) return;
    this.frameAsked = true;
    const frame = () =>
      requestAnimationFrame(() => {
        this.frameAsked = false;
        this.drawFrame();
      });
    const wait = this.nextFrameAt - performance.now();
    if (wait > 0) setTimeout(frame, wait);
    else frame();
  }

  drawFrame() {
    const started = performance.now();
    const batch = this.fresh;
    this.fresh = [];
    if (this.newKeys) {
      this.newKeys = false;
      this.redrawAll(); // a new key may need a new panel, or a new trace in one
    } else {
      for (const panel of this.panels.values()) {
        const touched = batch.some((b) => panel.slots.some((slot) => slot.key in b.values));
        if (!panel.visible) panel.stale ||= touched;
        else if (panel.stale || (touched && panel.sparse)) this.drawPanel(panel.def, panel.keys);
        else if (touched) this.extendPanel(panel, batch);
      }
    }
    const cost = performance.now() - started;
    this.nextFrameAt = performance.now() + cost * (1 / DRAW_SHARE - 1);
  }

  onVisibility(entries) {
    let wanted = false;
    for (const entry of entries) {
      const panel = this.panels.get(entry.target.dataset.panel);
      if (!panel) continue;
      panel.visible = entry.isIntersecting;
      wanted ||= panel.visible && panel.stale;
    }
    if (wanted) this.askFrame();
  }

  extendPanel(panel, batch) {
    const runId = this.sources[0].runId;
    const update = { x: [], y: [], text: [] };
    const indices = [];
    for (const slot of panel.slots) {
      if (slot.runId !== runId) continue;
      const xs = [];
      const raw = [];
      const smooth = [];
      const texts = [];
      for (const { step, time, values } of batch) {
        const v = values[slot.key];
        if (v === undefined) continue;
        const s = slot.ema.push(v);
        xs.push(toAxis(this.xMode === "time" ? time : step, this.xMode));
        raw.push(v);
        smooth.push(s);
        texts.push(hoverText(v, v, v, s));
      }
      if (!xs.length) continue;
      if (slot.band) {
        const blanks = texts.map(() => "");
        indices.push(...slot.band);
        update.x.push(xs, xs);
        update.y.push(raw, raw);
        update.text.push(blanks, blanks);
      }
      indices.push(slot.line);
      update.x.push(xs);
      update.y.push(smooth);
      update.text.push(texts);
    }
    if (!indices.length) return;
    Plotly.extendTraces(panel.chart, update, indices);
    this.showLatest(panel);
    const flat = this.flatRange(panel);
    if (flat || panel.flat) Plotly.relayout(panel.chart, flat ? { "yaxis.range": flat } : { "yaxis.autorange": true });
    panel.flat = flat;
    this.restepAxis(panel);
  }

  // Plotly pads a constant series to value ± 1, which draws a constant learning rate of 2e-3
  // as a line at "0". A constant non-zero series gets [0, 2·value] instead (linear axis only).
  flatRange(panel) {
    if (this.logY) return null;
    let lo = Infinity;
    let hi = -Infinity;
    for (const { runId, key } of panel.slots || []) {
      for (const v of this.data.get(`${runId}|${key}`)?.y || []) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    return lo === hi && lo !== 0 ? [lo - Math.abs(lo), lo + Math.abs(lo)] : null;
  }

  onRelayout(ev) {
    if (this.syncing) return;
    let range = null;
    if (ev["xaxis.range[0]"] !== undefined) range = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
    else if (Array.isArray(ev["xaxis.range"])) range = ev["xaxis.range"];
    else if (!ev["xaxis.autorange"]) return;
    this.range = range ? range.map((v) => fromAxis(v, this.xMode)) : null;
    // Zoom one chart, zoom them all; then fetch the detail of the new window.
    this.syncing = true;
    const update = range ? { "xaxis.range": range, "xaxis.autorange": false } : { "xaxis.autorange": true };
    const drawn = [...this.panels.values()].filter((p) => p.plotted);
    Promise.all(drawn.map((p) => Plotly.relayout(p.chart, update))).finally(() => {
      this.syncing = false;
    });
    clearTimeout(this.zoomTimer);
    this.zoomTimer = setTimeout(() => this.load().catch((e) => e.name !== "AbortError" && console.error(e)), 150);
  }
}
