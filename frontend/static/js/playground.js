// The playground: each column is one model's side of the same conversation; a message goes to every
// column at once and each reply streams in as the studio relays the model's events (server-sent events
// over a fetch). Text is set with textContent: what a model or a person wrote is never markup.

const form = document.getElementById("playground");
const runId = form.dataset.run;
const columnsEl = form.querySelector("[data-columns]");
const status = form.querySelector("[data-status]");
let columns = [];

function cookie(name) {
  const m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  return m ? decodeURIComponent(m[1]) : "";
}

function chosenModels() {
  return [...form.querySelectorAll("[data-model]")].map((s) => s.value).filter(Boolean);
}

function reset() {
  columns = chosenModels().map((model) => {
    const el = document.createElement("section");
    el.className = "panel";
    el.dataset.column = model;
    const h = document.createElement("h2");
    h.textContent = model;
    el.append(h);
    columnsEl.append(el);
    return { model, el, messages: [] };
  });
  for (const old of [...columnsEl.children]) if (!columns.some((c) => c.el === old)) old.remove();
}

function turn(column, role, text) {
  const div = document.createElement("div");
  div.className = "pg-turn";
  div.dataset.role = role;
  div.textContent = text;
  column.el.append(div);
  return div;
}

function sampling() {
  const out = {};
  for (const name of ["temperature", "top_p", "max_tokens", "seed"]) {
    const raw = form.elements[name].value;
    if (raw !== "") out[name] = name === "max_tokens" || name === "seed" ? parseInt(raw, 10) : parseFloat(raw);
  }
  return out;
}

function useTools() {
  const box = form.elements.use_run_tools;
  return box ? { use_run_tools: box.checked } : {};
}

async function reply(column) {
  const system = form.elements.system.value.trim();
  const messages = system ? [{ role: "system", content: system }, ...column.messages] : column.messages;
  let el = turn(column, "assistant", "");
  el.dataset.streaming = "1";
  const resp = await fetch(`/runs/${runId}/playground/generate`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": cookie("csrftoken") },
    body: JSON.stringify({ model: column.model, messages, ...sampling(), ...useTools() }),
  });
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    el.dataset.error = "1";
    el.textContent = (body.error && body.error.message) || `HTTP ${resp.status}`;
    delete el.dataset.streaming;
    return;
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const line = buffer.slice(0, cut).trim();
      buffer = buffer.slice(cut + 2);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") continue;
      const event = JSON.parse(data);
      // The run's tools: each call as soon as the turn is read, its result once the worker ran it;
      // the model's next turn goes into a new reply below them.
      if (event.tool_call || event.tool_result || event.tool_notice) {
        if (el.dataset.streaming) {
          delete el.dataset.streaming;
          el.dataset.done = "1";
          column.messages.push({ role: "assistant", content: text });
        }
        if (event.tool_call) {
          const shown = turn(column, "tool-call", `${event.tool_call.name}(${JSON.stringify(event.tool_call.arguments)})`);
          shown.dataset.tool = event.tool_call.name;
        } else if (event.tool_result) {
          const shown = turn(column, "tool-result", event.tool_result.content);
          shown.dataset.tool = event.tool_result.name;
          if (event.tool_result.error) shown.dataset.error = "1";
          column.messages.push({ role: "tool", content: event.tool_result.content });
        } else turn(column, "tool-notice", event.tool_notice);
        continue;
      }
      if (!el.dataset.streaming && (event.choices || []).length) {
        el = turn(column, "assistant", "");
        el.dataset.streaming = "1";
        text = "";
      }
      if (event.error) {
        el.dataset.error = "1";
        text += `\n[${event.error.message}]`;
      }
      for (const choice of event.choices || []) {
        const delta = choice.delta || {};
        if (delta.content) text += delta.content;
        for (const call of delta.tool_calls || []) text += `\n[tool call ${call.function.name}(${call.function.arguments})]`;
      }
      el.textContent = text;
    }
  }
  if (el.dataset.streaming) {
    delete el.dataset.streaming;
    el.dataset.done = "1";
    column.messages.push({ role: "assistant", content: text });
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = form.elements.message.value;
  if (!message.trim()) return;
  if (!columns.length || columns.map((c) => c.model).join() !== chosenModels().join()) reset();
  form.elements.message.value = "";
  status.textContent = "generating…";
  for (const column of columns) {
    column.messages.push({ role: "user", content: message });
    turn(column, "user", message);
  }
  await Promise.all(columns.map(reply));
  status.textContent = "";
});

form.querySelector("[data-clear]").addEventListener("click", () => {
  columnsEl.replaceChildren();
  columns = [];
});

// The first column's conversation (with the system prompt), saved as a note or as a dataset's row.
function savedConversation() {
  const column = columns[0];
  if (!column || !column.messages.length) return null;
  const system = form.elements.system.value.trim();
  const messages = system ? [{ role: "system", content: system }, ...column.messages] : column.messages;
  return { model: column.model, messages };
}

async function post(path, body) {
  const resp = await fetch(`/runs/${runId}/playground/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": cookie("csrftoken") },
    body: JSON.stringify(body),
  });
  let answer = {};
  try {
    answer = await resp.json();
  } catch {
    /* a proxy's error page: the status says enough */
  }
  return { ok: resp.ok, status: resp.status, answer };
}

const save = form.querySelector("[data-save]");
if (save) {
  save.addEventListener("click", async () => {
    const conversation = savedConversation();
    if (!conversation) return;
    const { ok, status: code } = await post("save", conversation);
    status.textContent = ok ? "saved as a note on the run" : `could not save (HTTP ${code})`;
  });
}

const saveRow = form.querySelector("[data-save-row]");
if (saveRow) {
  saveRow.addEventListener("click", async () => {
    const conversation = savedConversation();
    if (!conversation) return;
    const picker = form.querySelector("[data-row-dataset]");
    const { ok, status: code, answer } = await post("save-row", { ...conversation, dataset: picker.value });
    if (!ok) {
      status.textContent = `could not save the row: ${answer.error?.message || `HTTP ${code}`}`;
      return;
    }
    status.textContent = `saved as row ${answer.rows} of dataset ${answer.name} (#${answer.dataset})`;
    if (picker.value === "new") {
      const option = new Option(`${answer.name} (#${answer.dataset}, ${answer.rows} rows)`, String(answer.dataset), true, true);
      picker.append(option); // the next save goes to the same new dataset, not another
    }
  });
}
