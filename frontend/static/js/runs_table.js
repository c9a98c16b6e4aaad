// The runs table (runs/run_table.html): a seed group's ▸ shows or hides its runs; the header's box selects every
// row; "Compare selected" opens the compare page with the chosen runs (a group's box stands for all its runs).

function setExpanded(button, open) {
  button.setAttribute("aria-expanded", open ? "true" : "false");
  button.textContent = open ? "▾" : "▸";
  for (const row of document.querySelectorAll(`[data-group-member="${button.dataset.expand}"]`)) row.hidden = !open;
}

function selectedIds(table) {
  const ids = [];
  for (const box of table.querySelectorAll("[data-select-row]:checked")) ids.push(...box.value.split(","));
  return [...new Set(ids)];
}

function main() {
  const table = document.querySelector("[data-runs-table]");
  if (!table) return;
  for (const button of table.querySelectorAll("[data-expand]")) {
    button.addEventListener("click", () => setExpanded(button, button.getAttribute("aria-expanded") !== "true"));
  }
  const all = table.querySelector("[data-select-all]");
  all?.addEventListener("change", () => {
    for (const box of table.querySelectorAll("[data-select-row]")) box.checked = all.checked;
  });
  const form = document.querySelector("[data-compare-form]");
  form?.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ids = selectedIds(table);
    window.location.href = `${form.action}${ids.length ? `?runs=${ids.join(",")}` : ""}`;
  });
  table.dataset.ready = "1";
}

main();
