// The environment editor's "try it" while the episodes run on a worker: the page asks where the try is
// every POLL_MS (waiting for a worker and why, the worker's stage, then the episodes or the error) instead
// of the request hanging until they are done; "Stop" asks the worker to stop. Text goes in as textContent;
// the episodes come drawn by the studio's own template (environments/tried.html), which escapes them.

const POLL_MS = 1000;
const pending = document.querySelector("[data-try-pending]");
const stage = pending.querySelector("[data-try-stage]");
const waited = pending.querySelector("[data-try-waited]");
const stopButton = pending.querySelector("[data-try-stop]");
const episodes = document.getElementById("tried-episodes");
const url = `/environments/tries/${encodeURIComponent(pending.dataset.tryId)}/`;

function cookie(name) {
  const m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  return m ? decodeURIComponent(m[1]) : "";
}

function fail(message) {
  const p = document.createElement("p");
  p.className = "error";
  p.dataset.tryError = "";
  p.textContent = message;
  pending.replaceWith(p);
}

async function poll() {
  let now;
  try {
    const resp = await fetch(url, { headers: { Accept: "application/json" } });
    if (!resp.ok) return fail(`could not read the try's progress (HTTP ${resp.status})`);
    now = await resp.json();
  } catch (err) {
    stage.textContent = `could not reach the studio (${err.message}); asking again…`;
    return setTimeout(poll, POLL_MS * 3);
  }
  if (now.state === "done") {
    episodes.innerHTML = now.html; // the studio's template, escaped server-side
    episodes.hidden = false;
    pending.remove();
    return;
  }
  if (now.state === "failed") return fail(now.message);
  stage.textContent = now.message;
  waited.textContent = `(${Math.round(now.waited_s)} s)`;
  setTimeout(poll, POLL_MS);
}

stopButton.addEventListener("click", async () => {
  stopButton.disabled = true;
  await fetch(`${url}stop`, { method: "POST", headers: { "X-CSRFToken": cookie("csrftoken") } });
  stage.textContent = "asked the worker to stop…";
});

setTimeout(poll, 300);
