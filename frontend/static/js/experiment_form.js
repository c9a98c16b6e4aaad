// The experiment form, live. The server renders it laid out (studio.experiments.layout): the
// preset's settings in the "set by the preset" section, each field marked where it differs from
// what the preset (or the schema default) gives, the step cost beside the batch settings. This
// keeps that true while the user edits: a new preset moves its settings up and fills them in, a
// field edited away from the preset is marked, the step cost follows. The rules (each preset's
// values, the fields the cost reads, the field order) come from the page's payload.

// Input text in a form where equal values compare equal ("0.20" and "2e-1"); as
// studio.lib.schema_form.normalized does on the server.
export function normalized(kind, text) {
  const value = String(text ?? "").trim();
  if ((kind === "integer" || kind === "number") && value) {
    const n = Number(value);
    return Number.isFinite(n) ? String(n) : value;
  }
  if (kind === "boolean") return String(["true", "1", "on"].includes(value.toLowerCase()));
  if (kind === "list") return value.split(/\r?\n/).map((line) => line.trim()).filter(Boolean).join("\n");
  if (kind === "json" && value) {
    try {
      return JSON.stringify(sortKeys(JSON.parse(value)));
    } catch {
      return value;
    }
  }
  return value;
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys(value[key])]));
  }
  return value;
}

// Upper bounds of one step, as studio.experiments.layout.StepCost computes them; null while an
// input is not a whole number or the budget is unknown. `inputs` holds the texts of the fields named
// in rules.cost_inputs (`dynamic` a boolean, `budget` a name, `budget_total` possibly empty).
export function stepCost(inputs) {
  const names = ["prompts", "group", "new_tokens", "prompt_tokens", "max_rounds", "passes", "min_group", "max_group"];
  const n = {};
  for (const name of names) {
    const text = String(inputs[name] ?? "").trim();
    n[name] = Number(text);
    if (!text || !Number.isInteger(n[name])) return null;
  }
  const totalText = String(inputs.budget_total ?? "").trim();
  const total = totalText ? Number(totalText) : null;
  if (totalText && !Number.isInteger(total)) return null;
  const budget = String(inputs.budget ?? "fixed");
  const completions = stepRollouts(budget, n.prompts, n.group, total, n.max_group);
  if (completions === null) return null;
  const rounds = inputs.dynamic ? n.max_rounds : 1;
  const local = (x) => x.toLocaleString("en-US");
  // Samples per prompt: knapsack's range, else the one group size (StepCost.samples).
  const samples = budget === "knapsack" ? `${local(n.min_group)}–${local(n.max_group)}` : local(budget === "brorl" ? n.max_group : n.group);
  return {
    prompts: n.prompts,
    group: samples,
    completions,
    budget,
    generated: rounds * completions * n.new_tokens,
    trained: completions * (n.prompt_tokens + n.new_tokens),
    rounds,
    passes: n.passes,
  };
}

// Rollouts one round of a step samples under the curriculum's budget: trainers.spec.step_rollouts's
// rule (tests/browser/test_js_units.py checks the two agree); null for a budget it does not know.
export function stepRollouts(budget, prompts, groupSize, rolloutsPerStep, maxGroupSize) {
  if (budget === "fixed") return prompts * groupSize;
  if (budget === "knapsack") return rolloutsPerStep || prompts * groupSize;
  if (budget === "brorl") return prompts * maxGroupSize;
  return null;
}

function control(field) {
  return field.querySelector("input, select, textarea");
}

function valueOf(field) {
  const input = control(field);
  return input.type === "checkbox" ? String(input.checked) : input.value;
}

function setValue(field, text) {
  const input = control(field);
  if (input.type === "checkbox") input.checked = normalized("boolean", text) === "true";
  else input.value = text;
}

export function initExperimentForm(form, rules) {
  const presetSelect = form.querySelector("#preset");
  const presetInput = form.querySelector(`input[type=hidden][name="${rules.preset_field}"]`);
  const fields = new Map([...form.querySelectorAll("[data-field]")].map((el) => [el.dataset.field, el]));
  const grid = (group) => form.querySelector(`[data-group="${group}"] [data-group-fields]`);
  const home = (name) => (rules.batch_fields.includes(name) ? "batch" : name.split(".")[0]);
  let preset = presetSelect.value;
  const presetValues = () => rules.presets[preset]?.values || {};

  function same(field, text) {
    return normalized(field.dataset.kind, valueOf(field)) === normalized(field.dataset.kind, text);
  }

  function mark(field) {
    const values = presetValues();
    const baseline = values[field.dataset.field] ?? field.dataset.default;
    const changed = !same(field, baseline);
    field.classList.toggle("changed", changed);
    const note = field.querySelector("[data-changed-note]");
    if (!note) return;
    note.hidden = !changed;
    note.querySelector("[data-baseline]").textContent = baseline === "" ? "empty" : baseline;
    note.querySelector("[data-baseline-from]").textContent = rules.presets[preset] ? "preset" : "default";
  }

  function countChanges() {
    for (const group of form.querySelectorAll("details[data-group]")) {
      const changed = group.querySelectorAll("[data-field].changed").length;
      const count = group.querySelector("[data-changed-count]");
      count.hidden = changed === 0;
      count.textContent = `${changed} changed`;
      group.hidden = group.querySelectorAll("[data-field]").length === 0;
    }
  }

  function showCost() {
    const inputs = {};
    for (const [role, name] of Object.entries(rules.cost_inputs)) {
      const field = fields.get(name);
      inputs[role] = role === "dynamic" ? Boolean(field && control(field).checked) : field ? valueOf(field) : "";
    }
    const cost = stepCost(inputs);
    const line = form.querySelector("[data-step-cost]");
    for (const span of line.querySelectorAll("[data-cost]")) {
      span.textContent = cost ? cost[span.dataset.cost].toLocaleString("en-US") : "—";
    }
    line.querySelector("[data-cost-part=rounds]").hidden = !cost || cost.rounds === 1;
    line.querySelector("[data-cost-part=passes]").hidden = !cost || cost.passes === 1;
    line.querySelector("[data-cost-part=budget]").hidden = !cost || cost.budget === "fixed";
  }

  // The settings the preset sets go to its section, in schema order; the rest back home.
  function place() {
    const values = presetValues();
    for (const name of rules.field_order) {
      const field = fields.get(name);
      if (field) grid(name in values ? "preset" : home(name)).appendChild(field);
    }
    const named = form.querySelector("[data-preset-name]");
    named.textContent = preset;
    named.hidden = !preset;
    form.querySelector("[data-preset-empty]").hidden = Object.keys(values).length > 0;
    form.querySelector("[data-preset-description]").textContent = rules.presets[preset]?.description || "";
  }

  // A new preset fills in what it sets; what only the old one set, left as it set it, goes back
  // to the default (the preset is a bundle over the defaults, as trainers.spec.apply_preset reads it).
  function choosePreset(next) {
    const before = presetValues();
    const after = rules.presets[next]?.values || {};
    for (const [name, text] of Object.entries(before)) {
      const field = fields.get(name);
      if (field && !(name in after) && same(field, text)) setValue(field, field.dataset.default);
    }
    for (const [name, text] of Object.entries(after)) {
      if (fields.has(name)) setValue(fields.get(name), text);
    }
    preset = next;
    presetInput.value = next;
    place();
    fields.forEach(mark);
    countChanges();
    showCost();
  }

  presetSelect.addEventListener("change", () => choosePreset(presetSelect.value));
  const edited = (event) => {
    const field = event.target.closest("[data-field]");
    if (!field) return;
    mark(field);
    countChanges();
    showCost();
  };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  showCost();
}
