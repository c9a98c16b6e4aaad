// A sweep's plots from the numbers the server sends (json_script "sweep-plot"): the objective over trials
// (each trial a point, the best so far a line), plotly's parcoords of the settings against the objective
// (log ranges drawn on a log10 axis), and Optuna's parameter importances as bars. Names are set as text.
// While the sweep is active the page follows it: the sweep's API is read every POLL_MS, and when its state or
// a trial's (state, objective, run state) changed, the page's live part is read again and drawn anew (the
// server renders the table and the importances, so the page shows what a reload would). A studio that does not
// answer (restarting) is read again at the next tick.
import { Api } from "./api.js";
import { chartColors } from "./theme.js";

const POLL_MS = 4000;

const CONFIG = { displayModeBar: false, responsive: true };

function layout(colors, extra) {
  return { margin: { l: 60, r: 20, t: 20, b: 50 }, paper_bgcolor: colors.panel, plot_bgcolor: colors.panel,
    font: { color: colors.text }, ...extra };
}

function history(el, data, colors) {
  const scored = data.trials.filter((t) => t.objective !== null);
  const better = data.direction === "maximize" ? Math.max : Math.min;
  let best = null;
  const bestSoFar = scored.map((t) => (best = best === null ? t.objective : better(best, t.objective)));
  window.Plotly.newPlot(el, [
    { type: "scatter", mode: "markers", name: "trial", x: scored.map((t) => t.number), y: scored.map((t) => t.objective),
      text: scored.map((t) => t.state), hovertemplate: "trial %{x}: %{y:.4f} (%{text})<extra></extra>" },
    { type: "scatter", mode: "lines", name: "best so far", x: scored.map((t) => t.number), y: bestSoFar, line: { shape: "hv" } },
  ], layout(colors, { xaxis: { title: { text: "trial" } }, yaxis: { title: { text: data.objective } } }), CONFIG);
}

function parcoords(el, data, colors) {
  const scored = data.trials.filter((t) => t.objective !== null);
  const dimensions = data.parameters.map((p) => {
    const raw = scored.map((t) => t.values[p.name]);
    if (p.kind === "choice") {
      const labels = p.choices.map(String);
      return { label: p.name, values: raw.map((v) => labels.indexOf(String(v))), tickvals: labels.map((_, i) => i), ticktext: labels };
    }
    if (p.log) return { label: `log10 ${p.name}`, values: raw.map((v) => Math.log10(v)), range: [Math.log10(p.low), Math.log10(p.high)] };
    return { label: p.name, values: raw, range: [p.low, p.high] };
  });
  const objective = scored.map((t) => t.objective);
  dimensions.push({ label: data.objective, values: objective });
  window.Plotly.newPlot(el, [{ type: "parcoords", dimensions, line: { color: objective, colorscale: "Viridis", showscale: true } }],
    layout(colors, { margin: { l: 80, r: 80, t: 40, b: 30 } }), CONFIG);
}

function importances(el, data, colors) {
  const names = Object.keys(data.importances);
  if (!names.length) {
    el.textContent = "Importances appear once two completed trials differ.";
    return;
  }
  window.Plotly.newPlot(el, [{ type: "bar", orientation: "h", y: names, x: names.map((n) => data.importances[n]),
    hovertemplate: "%{y}: %{x:.3f}<extra></extra>" }],
  layout(colors, { margin: { l: 200, r: 20, t: 10, b: 40 }, xaxis: { title: { text: "importance" }, range: [0, 1] } }), CONFIG);
}

function draw() {
  const data = JSON.parse(document.getElementById("sweep-plot").textContent);
  if (!window.Plotly) return;
  const colors = chartColors();
  const parts = [["[data-sweep-history]", history], ["[data-sweep-parcoords]", parcoords], ["[data-sweep-importances]", importances]];
  for (const [selector, fn] of parts) {
    const el = document.querySelector(selector);
    if (el) fn(el, data, colors);
  }
  document.body.dataset.sweepDrawn = "1";
}

function signature(sweep) {
  return JSON.stringify([sweep.state, sweep.trials.map((t) => [t.number, t.state, t.objective, t.run_state])]);
}

async function swap(live) {
  const resp = await fetch(window.location.pathname, { credentials: "same-origin", headers: { Accept: "text/html" } });
  if (!resp.ok) throw new Error(`GET ${window.location.pathname}: ${resp.status}`);
  const fresh = new DOMParser().parseFromString(await resp.text(), "text/html").querySelector("[data-sweep-live]");
  if (!fresh) throw new Error("the sweep page came back without its live part");
  live.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
  draw();
  document.body.dataset.sweepRefreshed = String(Number(document.body.dataset.sweepRefreshed || 0) + 1);
}

function follow() {
  const live = document.querySelector("[data-sweep-live]");
  if (!live) return;
  const api = new Api();
  let seen = null;
  const tick = async () => {
    try {
      const sweep = await api.get(`/api/sweeps/${live.dataset.sweepId}/`);
      const now = signature(sweep);
      const shown = () => live.querySelector("[data-sweep-state]")?.textContent;
      if ((seen !== null && now !== seen) || shown() !== sweep.state) await swap(live);
      seen = now;
      if (sweep.state !== "active" && shown() === sweep.state) return; // it ended, and the page says so
    } catch (err) {
      console.warn(`could not read the sweep again: ${err.message}`);
    }
    setTimeout(tick, POLL_MS);
  };
  if (live.querySelector("[data-sweep-state]")?.textContent === "active") setTimeout(tick, POLL_MS);
}

function start() {
  draw();
  follow();
}

if (document.readyState === "complete") start();
else window.addEventListener("load", start);
