// The rollout list's filter bar: the API parameters its form asks for, the choices it suggests
// (criteria, tools, note tags seen so far), and whether a rollout that just arrived on the
// websocket passes it, decided by the rules the server hands the page (rollout_query's filters).

import { needRules } from "./api.js";

// The form's notes select (a form field, not an API parameter) and its value for "any note";
// every other value is a tag.
const NOTE_FIELD = "note";
const ANY_NOTE = "*";

// The API parameters the filter form may send, from the server's rollout rules.
function filterParams(r) {
  return [...r.bounds.map((b) => b.param), ...r.equals, ...r.flags, ...r.counts, ...r.members.map((m) => m.param),
    r.criterion.param, r.criterion.min, r.criterion.max, r.prompt.param, r.text, r.split.param, "order"];
}

function addOptions(select, values, fill) {
  const have = new Set([...select.options].map((o) => o.value));
  for (const value of values) {
    if (have.has(value)) continue;
    const opt = document.createElement("option");
    fill(opt, value);
    select.appendChild(opt);
  }
}

export class RolloutFilters {
  /**
   * @param form      the filter form (form.filters)
   * @param rules     the server's rules (readRules()): its `rollouts` filters and orders
   * @param criteria  criterion names the run is known to score, offered before any row shows them
   * @param notes     NotesClient whose tags join the notes select (may be null)
   * @param onChange  called when the form changes (typing settles after 250 ms), is submitted or reset
   */
  constructor(form, { rules, criteria = [], notes = null, onChange = () => {} }) {
    this.rules = needRules(rules, "rollouts", "RolloutFilters");
    this.names = filterParams(this.rules);
    this.form = form;
    this.notes = notes;
    this.criteria = new Set(criteria);
    this.tools = new Set(); // tools the listed episodes called: suggestions for the tool filter
    this.fillCriteria();
    let timer = null;
    form.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(onChange, 250);
    });
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      onChange();
    });
    form.addEventListener("reset", () => setTimeout(onChange, 0));
  }

  // Filters named in the page's address (?prompt=<id> from the prompts view) fill the form.
  prefill(search) {
    for (const name of this.names) {
      const control = this.form.elements[name];
      if (control && search.get(name)) control.value = search.get(name);
    }
  }

  params() {
    const { criterion, notes } = this.rules;
    const data = new FormData(this.form);
    const params = {};
    for (const name of [...this.names, NOTE_FIELD]) {
      const v = (data.get(name) || "").toString().trim();
      if (v) params[name] = v;
    }
    if (!params[criterion.param]) {
      delete params[criterion.min]; // the API refuses a score range without a criterion
      delete params[criterion.max];
    }
    const note = params[NOTE_FIELD];
    if (note) {
      if (note === ANY_NOTE) params[notes.any] = "1";
      else params[notes.tag] = note;
      delete params[NOTE_FIELD];
    }
    return params;
  }

  // Whether `params` filter by notes, which only the server can answer.
  byNotes(params) {
    return Boolean(params[this.rules.notes.any] || params[this.rules.notes.tag]);
  }

  // The criteria and tools of rows just listed join the form's suggestions.
  suggestFrom(items) {
    for (const it of items) {
      for (const c of Object.keys(it.scores || {})) this.criteria.add(c);
      for (const t of it.tools_used || []) this.tools.add(t);
    }
    this.fillCriteria();
    this.fillTools();
  }

  // Tags of the run's notes join the suggested ones in the notes filter.
  fillNoteTags() {
    const select = this.form.elements[NOTE_FIELD];
    if (!select || !this.notes) return;
    const tags = [...new Set(this.notes.notes.map((n) => n.tag).filter(Boolean))].sort();
    addOptions(select, tags, (opt, tag) => {
      opt.value = tag;
      opt.textContent = `tagged ${tag}`;
    });
  }

  fillCriteria() {
    addOptions(this.form.elements.criterion, [...this.criteria].sort(), (opt, name) => {
      opt.value = opt.textContent = name;
    });
  }

  fillTools() {
    const list = document.getElementById?.("rollout-tools");
    if (!list) return;
    addOptions(list, [...this.tools].sort(), (opt, name) => {
      opt.value = name;
    });
  }

  // Whether a rollout summary passes the filters in `p`: the server's filters (rollout_query),
  // applied by the rules it hands the page.
  matches(it, p) {
    const r = this.rules;
    const num = (v) => (v === undefined ? null : Number(v));
    const within = (v, lo, hi) => (lo === null || v >= lo) && (hi === null || v <= hi);
    for (const { param, field, bound } of r.bounds) {
      const limit = num(p[param]);
      if (limit !== null && !(bound === "min" ? within(it[field], limit, null) : within(it[field], null, limit))) return false;
    }
    for (const field of r.equals) if (p[field] && it[field] !== p[field]) return false;
    for (const field of r.flags) {
      if (p[field] && it[field] !== r.flag_true.includes(p[field].trim().toLowerCase())) return false;
    }
    for (const field of r.counts) {
      if (p[field] && (it[field] > 0) !== r.flag_true.includes(p[field].trim().toLowerCase())) return false;
    }
    for (const { param, field } of r.members) if (p[param] && !(it[field] || []).includes(p[param].trim())) return false;
    const row = (p[r.prompt.param] || "").trim(); // a dataset row: its id, or a repeat's "<id>@<k>"
    if (row && it[r.prompt.field] !== row && !String(it[r.prompt.field]).startsWith(row + r.prompt.repeat_mark)) return false;
    const split = p[r.split.param] || r.split.default;
    if (split !== r.split.all && (it.split || r.split.default) !== split) return false;
    if (this.byNotes(p)) return false; // a rollout that just arrived carries no note yet
    const criterion = p[r.criterion.param];
    if (criterion) {
      const s = (it.scores || {})[criterion];
      if (s === undefined || !within(s, num(p[r.criterion.min]), num(p[r.criterion.max]))) return false;
    }
    return true;
  }
}
