// Light/dark theme: follows prefers-color-scheme until the user picks one with the toggle;
// the choice is kept in localStorage. Charts listen for "themechange" to recolour.

const KEY = "studio-theme";

export function currentTheme() {
  const forced = document.documentElement.dataset.theme;
  if (forced === "dark" || forced === "light") return forced;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function apply(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
  window.dispatchEvent(new CustomEvent("themechange", { detail: currentTheme() }));
}

export function initTheme() {
  apply(localStorage.getItem(KEY));
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
    if (!localStorage.getItem(KEY)) apply(null);
  });
  for (const button of document.querySelectorAll("[data-theme-toggle]")) {
    button.addEventListener("click", () => {
      const next = currentTheme() === "dark" ? "light" : "dark";
      localStorage.setItem(KEY, next);
      apply(next);
    });
  }
}

// Colours the charts take from the CSS variables, so one palette serves both themes.
export function chartColors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  return {
    text: v("--text"),
    muted: v("--muted"),
    grid: v("--grid"),
    panel: v("--panel"),
    series: v("--series").split(",").map((c) => c.trim()),
  };
}
