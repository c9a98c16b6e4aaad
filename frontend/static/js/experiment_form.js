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

// How long a rollout may be, in tokens: trainers.spec.token_bounds's rule (tests/browser/test_js_units.py
// checks the two agree). Without an environment one turn of max_new_tokens; in one, turns of at most
// min(max_new_tokens, max_turn_tokens), the episode holding at most max_episode_tokens after the prompt.
export function tokenBounds(maxNewTokens, environment) {
  if (!environment) return { turn: maxNewTokens, sampled: maxNewTokens, afterPrompt: maxNewTokens };
  const turn = Math.min(maxNewTokens, environment.max_turn_tokens);
  const sampled = Math.min(environment.max_turns * turn, environment.max_episode_tokens);
  const afterPrompt = environment.max_turns === 1 ? sampled : Math.max(sampled, environment.max_episode_tokens);
  return { turn, sampled, afterPrompt };
}

// Upper bounds of one step, as studio.experiments.layout.StepCost computes them; null while an
// input is not a whole number or the budget is unknown. `inputs` holds the texts of the fields named
// in rules.cost_inputs (`dynamic` a boolean, `budget` a name, `budget_total` possibly empty), and
// `environment` the chosen environment's episode limits (none: one turn per prompt).
export function stepCost(inputs) {
  const names = ["prompts", "group", "new_tokens", "prompt_tokens", "max_rounds", "passes", "min_group", "max_group",
    "procs", "nodes"];
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
  const processes = n.procs * n.nodes;
  // Samples per prompt: knapsack's range, else the one group size (StepCost.samples).
  const samples = budget === "knapsack" ? `${local(n.min_group)}–${local(n.max_group)}` : local(budget === "brorl" ? n.max_group : n.group);
  const environment = inputs.environment || null;
  const tokens = tokenBounds(n.new_tokens, environment);
  return {
    prompts: n.prompts,
    group: samples,
    completions,
    budget,
    generated: rounds * completions * tokens.sampled,
    trained: completions * (n.prompt_tokens + tokens.afterPrompt),
    // The episode's part of the line ("" without an environment: the part is hidden).
    turns: environment ? environment.max_turns : "",
    turn_tokens: environment ? tokens.turn : "",
    episode_tokens: environment ? environment.max_episode_tokens : "",
    rounds,
    passes: n.passes,
    processes,
    // Each process takes every processes-th prompt of the step (StepCost.prompts_per_process).
    prompts_per_process: Math.ceil(n.prompts / processes),
  };
}

// The parallel group's values in a phrase, as studio.experiments.layout.parallel_summary says them;
// "" while a count is not a whole number.
export function parallelSummary(procsText, nodesText, sharding) {
  const procs = Number(String(procsText ?? "").trim());
  const nodes = Number(String(nodesText ?? "").trim());
  if (!String(procsText ?? "").trim() || !String(nodesText ?? "").trim()) return "";
  if (!Number.isInteger(procs) || !Number.isInteger(nodes)) return "";
  const total = procs * nodes;
  if (total === 1) return "1 process";
  const where = nodes === 1 ? " on one machine" : `: ${procs} per node × ${nodes} nodes (Ray)`;
  return `${total} processes${where}, ${sharding} sharding`;
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

// The episode limits of the environment (and version) the form names, from rules.environments; null
// for none (one turn per prompt).
export function chosenEnvironment(environments, environmentId, versionText) {
  const entry = environments?.[String(environmentId ?? "").trim()];
  if (!entry) return null;
  const version = String(versionText ?? "").trim() || String(entry.latest);
  return entry.versions[version] || entry.versions[String(entry.latest)] || null;
}

// After a save the server refused: the first error in view, its section open, its input focused.
export function showFirstError(form) {
  const first = form.querySelector(".field.has-error, [data-meta-error]") || form.querySelector("[data-form-errors]");
  if (!first) return null;
  const section = first.closest("details");
  if (section) section.open = true;
  first.scrollIntoView({ block: "center" });
  const input = first.matches("[data-form-errors]") ? null : first.querySelector("input:not([type=hidden]), select, textarea");
  if (input) input.focus({ preventScroll: true });
  return first;
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
    const environment = form.querySelector('[name="environment"]');
    const version = form.querySelector('[name="environment_version"]');
    inputs.environment = chosenEnvironment(rules.environments, environment?.value, version?.value);
    const cost = stepCost(inputs);
    const line = form.querySelector("[data-step-cost]");
    for (const span of line.querySelectorAll("[data-cost]")) {
      span.textContent = cost ? cost[span.dataset.cost].toLocaleString("en-US") : "—";
    }
    line.querySelector("[data-cost-part=rounds]").hidden = !cost || cost.rounds === 1;
    line.querySelector("[data-cost-part=passes]").hidden = !cost || cost.passes === 1;
    line.querySelector("[data-cost-part=budget]").hidden = !cost || cost.budget === "fixed";
    line.querySelector("[data-cost-part=processes]").hidden = !cost || cost.processes === 1;
    line.querySelector("[data-cost-part=episode]").hidden = !cost || cost.turns === "";
    showParallel();
  }

  function showParallel() {
    const summary = form.querySelector('[data-group="parallel"] [data-group-summary]');
    if (!summary) return;
    const text = (role) => (fields.has(rules.parallel_inputs[role]) ? valueOf(fields.get(rules.parallel_inputs[role])) : "");
    summary.textContent = parallelSummary(text("procs"), text("nodes"), text("sharding"));
    summary.hidden = !summary.textContent;
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
    if (["environment", "environment_version"].includes(event.target.name)) showCost();
    const field = event.target.closest("[data-field]");
    if (!field) return;
    mark(field);
    countChanges();
    showCost();
  };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  // The models known here, shown as buttons under the model field (its datalist shows only once
  // the field is focused, and an empty field looked like nothing was on offer): a click fills it.
  form.addEventListener("click", (event) => {
    const use = event.target.closest("[data-use-model]");
    const input = form.elements.model_path;
    if (!use || !input) return;
    input.value = use.dataset.useModel;
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
  showCost();
  showFirstError(form);
}
