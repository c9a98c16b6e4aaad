// Compare page: pick runs, overlay their curves, and list the settings that differ.

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
  document.body.dataset.ready = "1";
}

main().catch((err) => {
  console.error(err);
  const box = document.querySelector("[data-page-error]");
  box.hidden = false;
  box.textContent = `Could not compare: ${err.message}`;
});
