// Small fetch wrapper shared by the run page modules.
// Every call carries the CSRF token (session auth) and, on a share page, the share token,
// so the server can authorise a read-only visitor without a session.

function cookie(name) {
  const m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  return m ? decodeURIComponent(m[1]) : "";
}

export class Api {
  constructor({ shareToken = null } = {}) {
    this.shareToken = shareToken;
  }

  url(path, params = {}) {
    const u = new URL(path, window.location.origin);
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, v);
    }
    if (this.shareToken) u.searchParams.set("share", this.shareToken);
    return u.toString();
  }

  async request(method, path, { params = {}, body = undefined, signal = undefined } = {}) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET") headers["X-CSRFToken"] = cookie("csrftoken");
    const resp = await fetch(this.url(path, params), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      signal,
    });
    if (!resp.ok) {
      let detail = resp.statusText;
      let data = null;
      try {
        data = await resp.json();
        detail = data.detail || JSON.stringify(data);
      } catch (_) {
        /* not JSON: keep the status text */
      }
      const err = new Error(`${method} ${path}: ${resp.status} ${detail}`);
      err.status = resp.status;
      err.data = data; // the server's answer as sent: {detail} or {field: message}
      throw err;
    }
    return resp.status === 204 ? null : resp.json();
  }

  get(path, params, signal) {
    return this.request("GET", path, { params, signal });
  }
  post(path, body) {
    return this.request("POST", path, { body });
  }
  del(path) {
    return this.request("DELETE", path);
  }
}

// Escape text for innerHTML. Completions are model output: never trust them as markup.
export function esc(value) {
  return String(value ?? "")
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

// A number for a label, a hover or a table cell: `digits` significant digits, but never fewer
// than the whole part (1500.25 -> "1,500", not "15" or "1.5e+3"), with thousands separators as
// whole numbers get; tiny values in exponent form with the mantissa's trailing zeros dropped
// (3e-5 -> "3e-5", 2.5e-4 -> "2.5e-4"). Zeros are only ever dropped after a decimal point.
export function fmt(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "-∞";
  if (value === 0) return "0"; // -0 too
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  const abs = Math.abs(value);
  if (abs < 1e-3) {
    const [mantissa, exponent] = value.toExponential(digits - 1).split("e");
    return `${mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa}e${exponent}`;
  }
  const whole = Math.floor(Math.log10(abs)) + 1; // digits before the point; 0 or less below 1
  if (whole >= digits) return value.toLocaleString("en-US", { maximumFractionDigits: 0 });
  return value.toLocaleString("en-US", { maximumSignificantDigits: digits });
}

export function duration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

export function readConfig(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : {};
}

// The server's rules (studio/sharing/client_rules.py: rollout filters and orders, note limits,
// curve panels), which the page carries as JSON. Unlike the config there is no fallback: a page
// without them would filter, sort and chart by guesses, so it fails and says why.
export function readRules() {
  const el = document.getElementById("client-rules");
  if (!el) {
    throw new Error('this page carries no "client-rules" JSON: its template needs {% client_rules as rules %}{{ rules|json_script:"client-rules" }}');
  }
  return JSON.parse(el.textContent);
}

// The part of the rules a module needs, or an error naming it (a stale page, a test forgetting them).
export function needRules(rules, part, who) {
  if (!rules || rules[part] === undefined || rules[part] === null) {
    throw new Error(`${who} needs the server's "${part}" rules (readRules() of the page's client-rules JSON)`);
  }
  return rules[part];
}
