// The tools environment's system prompt starts from one that names the tools chosen and the answer
// format: the server writes it (POST /api/environment-kinds/tools/system-prompt/, from
// trainers.rollout.environments.system_prompt); this only asks and places it. When the tools (or the
// answer setting) change, a prompt the user has not written (empty, the default, or the last
// suggestion) is replaced; text the user typed is kept, and the suggestion is offered beside it with
// one button. On load nothing is replaced (a saved environment keeps its prompt): it is only offered.

import { Api } from "./api.js";

const URL = "/api/environment-kinds/tools/system-prompt/";

export function initSystemPromptOffer(form, api = new Api()) {
  const prompt = form.querySelector('[name="config.params.system_prompt"]');
  const tools = form.querySelector('[name="config.params.tools"]');
  if (!prompt || !tools) return null;
  const answer = form.querySelector('[name="config.params.answer"]');
  const tag = form.querySelector('[name="config.params.answer_tag"]');
  const offer = document.createElement("p");
  offer.className = "note";
  offer.dataset.systemPromptOffer = "";
  offer.hidden = true;
  const text = document.createElement("q");
  const use = document.createElement("button");
  use.type = "button";
  use.dataset.useSuggestedPrompt = "";
  use.textContent = "Use the suggested system prompt";
  offer.append("For the tools chosen: ", text, " ", use);
  const filled = document.createElement("small");
  filled.className = "help";
  filled.dataset.systemPromptFilled = "";
  filled.hidden = true;
  filled.textContent = "Filled in for the tools chosen (edit it freely: your text is kept when tools change).";
  prompt.after(offer, filled);

  let suggested = null;  // the last suggestion, so a prompt still equal to it is not the user's text
  let asked = 0;
  use.addEventListener("click", () => place(suggested));
  prompt.addEventListener("input", () => { filled.hidden = true; });

  async function refresh(changed) {
    let list;
    try {
      list = tools.value.trim() ? JSON.parse(tools.value) : [];
    } catch {
      return;  // shorthand or half-typed JSON: the server reads it on save and says why
    }
    if (!Array.isArray(list)) return;
    const entries = list.map((t) => (typeof t === "string" ? { kind: t } : t)).filter((t) => t && typeof t === "object");
    const body = { tools: entries, answer: answer ? answer.value : "no_tool_call" };
    if (tag && /^[A-Za-z_][\w-]*$/.test(tag.value)) body.answer_tag = tag.value;
    const mine = ++asked;
    let reply;
    try {
      reply = await api.post(URL, body);
    } catch {
      return;  // no suggestion: the prompt stays as it is
    }
    if (mine !== asked) return;  // a later change asked again
    const current = prompt.value.trim();
    const untouched = !current || current === reply.default || current === suggested;
    suggested = reply.system_prompt;
    if (changed && untouched && current !== suggested) place(suggested, true);
    else offer.hidden = prompt.value.trim() === suggested;
    text.textContent = suggested;
  }

  function place(value, automatic = false) {
    prompt.value = value;
    prompt.dispatchEvent(new Event("input", { bubbles: true }));
    offer.hidden = true;
    filled.hidden = !automatic;
  }

  tools.addEventListener("tools-change", () => refresh(true));
  tools.addEventListener("input", () => refresh(true));
  for (const input of [answer, tag]) if (input) input.addEventListener("change", () => refresh(true));
  refresh(false);
  return { offer, refresh };
}

const form = document.getElementById("environment-form");
if (form) initSystemPromptOffer(form);
