// Compare page: pick runs, overlay their curves, and list the settings that differ; seed repeats among them
// (runs whose settings differ only in optim.seed: the API's `groups`) are drawn as bands too, a mean line with a
// min-max or +-std fill from /api/runs/band/.

import { Api, esc, readConfig, readRules } from "./api.js";
import { CurveBoard } from "./curves.js";
import { initTheme } from "./theme.js";

function show(value) {
  if (value === undefined) return '<span class="muted">–</span>';
  if (value === null) return '<span class="muted">null</span>';
  return esc(typeof value === "object" ? JSON.stringify(value) : String(value));
}

function renderDiff(table, data) {
  const head = `<tr><th>setting</th>${data.runs.map((r) => `<th><a href="/runs/${r.id}/">${esc(r.name)}</a><div class="muted">#${r.id} · ${esc(r.state)}</div></th>`).join("")}</tr>`;
  const rows = data.differences
    .map((d) => `<tr><th class="mono">${esc(d.path)}</th>${d.values.map((v) => `<td class="mono">${show(v)}</td>`).join("")}</tr>`)
    .join("");
  table.innerHTML = `<thead>${head}</thead><tbody>${rows || `<tr><td colspan="${data.runs.length + 1}" class="muted">These runs share every setting.</td></tr>`}</tbody>`;
}

const BAND_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2"];

function fillColor(hex) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, 0.2)`;
}

// The traces of one band: its upper edge, its lower edge filled up to it, and the mean line.
export function bandTraces(band, label, color, fill) {
  const upper = fill === "std" ? band.mean.map((m, i) => m + (band.std[i] ?? 0)) : band.max;
  const lower = fill === "std" ? band.mean.map((m, i) => m - (band.std[i] ?? 0)) : band.min;
  const edge = { x: band.step, mode: "lines", line: { width: 0, color }, hoverinfo: "skip", showlegend: false, legendgroup: label };
  return [
    { ...edge, y: upper, name: `${label} upper` },
    { ...edge, y: lower, name: `${label} lower`, fill: "tonexty", fillcolor: fillColor(color) },
    { x: band.step, y: band.mean, mode: "lines", name: label, legendgroup: label, line: { color, width: 2 },
      customdata: band.n, hovertemplate: "step %{x}: %{y:.4g} (mean of %{customdata})<extra>%{fullData.name}</extra>" },
  ];
}

async function drawBands(api, section, groups, names) {
  const chart = section.querySelector("[data-band-chart]");
  const key = section.querySelector("[data-band-key]").value;
  const fill = section.querySelector("[name=bandfill]:checked").value;
  const traces = [];
  for (const [i, ids] of groups.entries()) {
    const band = await api.get("/api/runs/band/", { ids: ids.join(","), key });
    const label = `${names.get(ids[0])} ×${ids.length}`;
    traces.push(...bandTraces(band, label, BAND_COLORS[i % BAND_COLORS.length], fill));
  }
  const dark = document.documentElement.dataset.theme === "dark";
  window.Plotly.react(chart, traces, {
    margin: { l: 50, r: 10, t: 10, b: 40 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: dark ? "#ddd" : "#222" }, xaxis: { title: { text: "step" } }, yaxis: { title: { text: key } },
    legend: { orientation: "h" },
  }, { displaylogo: false, responsive: true });
  chart.dataset.key = key;
  chart.dataset.fill = fill;
  chart.dataset.ready = "1";
}

async function showBands(api, data) {
  const groups = data.groups.filter((ids) => ids.length > 1);
  const section = document.querySelector("[data-bands]");
  if (!groups.length || !section) return;
  section.hidden = false;
  const names = new Map(data.runs.map((r) => [r.id, r.name]));
  const { keys } = await api.get(`/api/runs/${groups[0][0]}/metrics/`, { keys: "reward/mean", points: 1 });
  const select = section.querySelector("[data-band-key]");
  select.innerHTML = keys.map((k) => `<option value="${esc(k)}">${esc(k)}</option>`).join("");
  select.value = keys.includes("reward/mean") ? "reward/mean" : keys[0];
  const redraw = () => drawBands(api, section, groups, names);
  select.addEventListener("change", redraw);
  for (const radio of section.querySelectorAll("[name=bandfill]")) radio.addEventListener("change", redraw);
  await redraw();
}

async function main() {
  initTheme();
  const config = readConfig("compare-config");
  const rules = readRules();
  const api = new Api();
  const picker = document.querySelector("[data-run-picker]");
  picker.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ids = [...picker.querySelectorAll("input[name=run]:checked")].map((i) => i.value);
    window.location.search = ids.length ? `?runs=${ids.join(",")}` : "";
  });
  if (config.selected.length < 1) return;
  const data = await api.get("/api/compare/", { runs: config.selected.join(",") });
  renderDiff(document.querySelector("[data-diff-table]"), data);
  const board = new CurveBoard(document.querySelector("[data-curves]"), {
    api,
    sources: data.runs.map((r) => ({ runId: r.id, label: r.name })),
    panels: rules.panels,
  });
  const controls = document.querySelector("[data-curve-controls]");
  controls.querySelector("[name=smoothing]").addEventListener("input", (ev) => board.setSmoothing(Number(ev.target.value)));
  controls.querySelector("[name=log]").addEventListener("change", (ev) => board.setLog(ev.target.checked));
  for (const radio of controls.querySelectorAll("[name=xaxis]")) {
    radio.addEventListener("change", () => radio.checked && board.setXMode(radio.value));
  }
  await board.load();
  await showBands(api, data);
  document.body.dataset.ready = "1";
}

main().catch((err) => {
  console.error(err);
  const box = document.querySelector("[data-page-error]");
  box.hidden = false;
  box.textContent = `Could not compare: ${err.message}`;
});
