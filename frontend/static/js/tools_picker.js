// The environment editor's tools field as a picker: the tools listed one by one, a button per
// registered tool kind to add one, each tool's settings as fields made from its params schema
// (the tool-kinds JSON block the server writes: studio.environments.forms.tool_kinds), and code
// in an editor where Tab indents. The JSON textarea stays the form's input: the picker writes the
// list into it on every change, and reads it back when it is edited under "Edit as JSON". Text the
// picker cannot show (not a list of known tool kinds, or shorthand) leaves the picker read-only
// until the JSON is a list again; the server reads and checks what is submitted either way.

const INDENT = "    ";

export function initToolsPicker(field, kinds) {
  const textarea = field.querySelector("textarea");
  if (!textarea) return null;
  const byKind = new Map(kinds.map((k) => [k.kind, k]));
  let tools = parseTools(textarea.value, byKind);

  const picker = el("div", { class: "tools-picker", "data-tools-picker": "" });
  const list = el("ol", { class: "tool-list" });
  const empty = el("p", { class: "muted tool-empty" }, "No tools yet: add one below.");
  const blocked = el("p", { class: "note tool-blocked", hidden: "" },
    "The JSON below is not a list of tools the picker can show; fix it there (it is saved as written).");
  const adders = el("p", { class: "tool-add" }, "Add a tool: ");
  for (const k of kinds) {
    const add = el("button", { type: "button", "data-add-tool": k.kind, title: k.doc }, `+ ${k.kind}`);
    add.addEventListener("click", () => {
      tools.push(newTool(k));
      render();
      write();
      const last = list.lastElementChild;
      const first = last && last.querySelector("input, textarea, select");
      if (first) first.focus();
    });
    adders.append(add, " ");
  }
  const details = el("details", { class: "tools-json", "data-tools-json": "" }, el("summary", {}, "Edit as JSON"));
  picker.append(blocked, list, empty, adders);
  const label = field.querySelector("label");
  (label || textarea).after(picker, details);
  details.append(textarea);
  if (tools === null) details.open = true;

  textarea.addEventListener("input", () => {
    tools = parseTools(textarea.value, byKind);
    render();
  });
  list.addEventListener("input", () => { if (tools !== null) { read(); write(); } });
  list.addEventListener("change", () => { if (tools !== null) { read(); write(); } });
  list.addEventListener("click", (event) => {
    const remove = event.target.closest("[data-remove-tool]");
    if (!remove || tools === null) return;
    tools.splice(Number(remove.closest("[data-tool-index]").dataset.toolIndex), 1);
    render();
    write();
  });
  render();
  return { picker, details };

  function render() {
    list.replaceChildren();
    blocked.hidden = tools !== null;
    picker.classList.toggle("is-blocked", tools === null);
    for (const button of adders.querySelectorAll("button")) button.disabled = tools === null;
    empty.hidden = tools === null || tools.length > 0;
    (tools || []).forEach((tool, index) => list.append(toolItem(tool, index, byKind.get(tool.kind))));
  }

  // The picker's inputs back into `tools` (a kind's settings as its inputs say).
  function read() {
    for (const item of list.querySelectorAll("[data-tool-index]")) {
      const tool = tools[Number(item.dataset.toolIndex)];
      const params = {};
      for (const f of byKind.get(tool.kind).fields) {
        const input = item.querySelector(`[data-param="${f.name}"]`);
        const value = inputValue(f, input);
        if (value !== undefined) params[f.name] = value;
      }
      tool.params = params;
    }
  }

  // Tells listeners (system_prompt_offer.js) that the picker changed the list: setting a value fires no input event.
  function write() {
    textarea.value = JSON.stringify(tools.map(compact), null, 2);
    textarea.dispatchEvent(new CustomEvent("tools-change", { bubbles: true }));
  }
}

// The JSON text as [{kind, params}], or null when it is not a list of known tool kinds.
export function parseTools(text, byKind) {
  if (!text.trim()) return [];
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(value)) return null;
  const tools = [];
  for (const entry of value) {
    if (!entry || typeof entry !== "object" || Array.isArray(entry) || !byKind.has(entry.kind)) return null;
    const params = entry.params === undefined ? {} : entry.params;
    if (!params || typeof params !== "object" || Array.isArray(params)) return null;
    tools.push({ kind: entry.kind, params: { ...params } });
  }
  return tools;
}

function newTool(kind) {
  const params = {};
  for (const f of kind.fields) if (f.initial !== null && f.initial !== undefined) params[f.name] = f.initial;
  return { kind: kind.kind, params };
}

// {"kind"} alone when there are no settings, as the server's examples write it.
function compact(tool) {
  return Object.keys(tool.params).length ? { kind: tool.kind, params: tool.params } : { kind: tool.kind };
}

function toolItem(tool, index, kind) {
  const item = el("li", { class: "tool", "data-tool-index": String(index), "data-tool-kind": tool.kind });
  const head = el("div", { class: "tool-item-head" }, el("b", { class: "tool-name" }, tool.kind), " ",
    el("small", { class: "muted" }, kind.doc), " ",
    el("button", { type: "button", class: "link", "data-remove-tool": "", "aria-label": `Remove ${tool.kind}` }, "Remove"));
  item.append(head);
  if (!kind.fields.length) item.append(el("small", { class: "muted" }, "No settings."));
  for (const f of kind.fields) item.append(paramField(f, tool.params[f.name], `${tool.kind} ${index + 1}`));
  return item;
}

function paramField(f, value, owner) {
  const shown = value === undefined ? f.default : value;
  const wrap = el("label", { class: "tool-param" }, f.label + (f.required ? " (required)" : "") + " ");
  let input;
  if (f.widget === "checkbox") {
    input = el("input", { type: "checkbox" });
    input.checked = Boolean(shown);
    wrap.prepend(input);
  } else if (f.widget === "select") {
    input = el("select", {}, ...f.choices.map((c) => el("option", { value: c }, c || "—")));
    input.value = shown === null || shown === undefined ? "" : String(shown);
  } else if (f.widget === "number") {
    input = el("input", { type: "number", step: f.step });
    if (f.minimum !== null) input.min = f.minimum;
    if (f.maximum !== null) input.max = f.maximum;
    input.value = shown === null || shown === undefined ? "" : String(shown);
  } else if (f.widget === "textarea") {
    const rows = f.code ? 12 : 3;
    input = el("textarea", { rows: String(rows), class: "mono", spellcheck: "false" });
    if (f.code) {
      input.classList.add("code-editor");
      codeEditor(input);
    }
    input.value = shown === null || shown === undefined ? "" : f.kind === "list" ? shown.join("\n")
      : f.kind === "json" ? JSON.stringify(shown, null, 2) : String(shown);
  } else {
    input = el("input", { type: "text" });
    input.value = shown === null || shown === undefined ? "" : String(shown);
  }
  if (f.placeholder && input.placeholder !== undefined && f.widget !== "checkbox") input.placeholder = f.placeholder;
  input.dataset.param = f.name;
  input.setAttribute("aria-label", `${owner}: ${f.label}`);
  if (f.widget !== "checkbox") wrap.append(input);
  if (f.help) wrap.append(el("small", { class: "help" }, f.help + (f.code ? " Tab indents; Esc, then Tab, leaves the editor." : "")));
  return wrap;
}

// What an input holds, as the setting's JSON value; undefined leaves the setting out (its default).
function inputValue(f, input) {
  if (f.widget === "checkbox") return input.checked === Boolean(f.default) && !f.required ? undefined : input.checked;
  const text = input.value;
  if (f.kind === "string" && f.widget === "textarea") return text.trim() ? text : undefined;
  if (!text.trim()) return f.nullable && f.default !== null ? null : undefined;
  if (f.kind === "integer" || f.kind === "number") {
    const n = Number(text);
    if (!Number.isFinite(n)) return text;  // a word goes to the server as typed: it says why
    return n === f.default && !f.required ? undefined : n;
  }
  if (f.kind === "list") return text.split("\n").map((line) => line.trim()).filter(Boolean);
  if (f.kind === "json") {
    try { return JSON.parse(text); } catch { return text; }
  }
  return text.trim() === String(f.default ?? "") && !f.required ? undefined : text.trim();
}

// A textarea for code: Tab indents (Shift+Tab dedents) the line or the selected lines; Esc, then
// Tab, moves on (the usual keyboard way out of a code editor).
export function codeEditor(textarea) {
  let escaped = false;
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { escaped = true; return; }
    if (event.key !== "Tab" || event.ctrlKey || event.altKey || event.metaKey || escaped) {
      escaped = false;
      return;
    }
    event.preventDefault();
    const { selectionStart: start, selectionEnd: end, value } = textarea;
    const lineStart = value.lastIndexOf("\n", start - 1) + 1;
    if (!event.shiftKey && start === end) {
      textarea.setRangeText(INDENT, start, end, "end");
    } else {
      const lines = value.slice(lineStart, end).split("\n");
      const changed = lines.map((line) => event.shiftKey ? line.replace(/^ {1,4}/, "") : INDENT + line).join("\n");
      textarea.setRangeText(changed, lineStart, end, "select");
    }
    textarea.dispatchEvent(new Event("input", { bubbles: true }));
  });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

const field = document.querySelector('[data-picker="tools"]');
const data = document.getElementById("tool-kinds");
if (field && data) initToolsPicker(field, JSON.parse(data.textContent));
