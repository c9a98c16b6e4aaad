// A suite run's result as a plotly heatmap, models x tasks, coloured by pass@1; a cell opens the pair's
// samples in the inspector (its run's page). The numbers come from the server (json_script "suite-table");
// labels are set as text, never as markup.
import { chartColors } from "./theme.js";

function draw() {
  const el = document.querySelector("[data-suite-heatmap]");
  const data = JSON.parse(document.getElementById("suite-table").textContent);
  if (!el || !window.Plotly || !data.rows.length) return;
  const tasks = data.tasks.map((t) => t.name);
  const models = data.rows.map((r) => r.model.label);
  const value = (c) => (c.pass_at_1 ? c.pass_at_1.value : null);
  const z = data.rows.map((r) => r.cells.map(value));
  const text = data.rows.map((r) => r.cells.map((c) => {
    if (!c.pass_at_1) return c.state;
    const p = c.pass_at_1;
    return `${c.best ? "★ " : ""}${p.value.toFixed(2)} [${p.low.toFixed(2)}, ${p.high.toFixed(2)}]${p.delta_text ? " " + p.delta_text : ""}`;
  }));
  const colors = chartColors();
  window.Plotly.newPlot(el, [{
    type: "heatmap", x: tasks, y: models, z, text, texttemplate: "%{text}", hovertemplate: "%{y} on %{x}: pass@1 %{z:.3f}<extra></extra>",
    zmin: 0, zmax: 1, colorscale: "Viridis", colorbar: { title: { text: "pass@1" } },
  }], {
    margin: { l: 200, r: 20, t: 20, b: 40 }, paper_bgcolor: colors.panel, plot_bgcolor: colors.panel,
    font: { color: colors.text }, yaxis: { autorange: "reversed" },
  }, { displayModeBar: false, responsive: true });
  el.on("plotly_click", (event) => {
    const point = event.points[0];
    const row = data.rows[point.pointNumber[0]];
    const cell = row && row.cells[point.pointNumber[1]];
    if (cell) window.location.assign(cell.inspector);
  });
}

if (document.readyState === "complete") draw();
else window.addEventListener("load", draw);
