// veriloop console: progressive enhancement of the server-rendered pages (no build step).
// The API key (when the service has keys) lives in sessionStorage and travels in X-API-Key.
// Every update asks the server for the page's main part again (X-Console: main): the server
// is the only renderer.
"use strict";

const KEY = "veriloop.apiKey";
const main = document.getElementById("main");
let following = null;
let refreshing = false;
let refreshAgain = false;
let timer = null;
const answered = {};  // form key -> what was sent: kept across re-renders until the review is gone

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = sessionStorage.getItem(KEY);
  if (key) h["X-API-Key"] = key;
  return h;
}

async function fetchMain() {
  return fetch(location.href, { headers: headers({ "X-Console": "main" }), cache: "no-store" });
}

// Swap the main part, keeping what a person is typing and where the focus is.
function swap(html) {
  const typed = {};
  main.querySelectorAll("form[data-key] textarea").forEach((t) => {
    typed[t.closest("form").dataset.key] = t.value;
  });
  const focused = document.activeElement && document.activeElement.id;
  main.innerHTML = html;
  main.querySelectorAll("form[data-key] textarea").forEach((t) => {
    const before = typed[t.closest("form").dataset.key];
    if (before) t.value = before;
  });
  main.querySelectorAll("form[data-key]").forEach((form) => {
    const note = answered[form.dataset.key];
    if (!note) return;
    form.querySelectorAll("button, textarea").forEach((b) => { b.disabled = true; });
    form.querySelector(".form-status").textContent = note;
  });
  if (focused) {
    const again = document.getElementById(focused);
    if (again) again.focus();
  }
  enhance();
}

async function refresh() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  try {
    do {
      refreshAgain = false;
      const response = await fetchMain();
      if (response.status === 401) { askForKey("That API key is not valid here."); return; }
      if (response.ok) {
        place(response);
        swap(await response.text());
      }
      else showError(response);
    } while (refreshAgain);
  } finally {
    refreshing = false;
  }
}

// The page's title and current nav link, from the main part's answer (see routes._page).
function place(response) {
  const title = response.headers.get("X-Console-Title");
  if (title) document.title = decodeURIComponent(title);
  const nav = response.headers.get("X-Console-Nav");
  if (nav === null) return;
  document.querySelectorAll("nav a[data-nav]").forEach((link) => {
    if (link.dataset.nav === nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
}

async function showError(response) {
  if ((response.headers.get("Content-Type") || "").startsWith("text/html")) {
    swap(await response.text());  // the server's own error page
    return;
  }
  const body = await response.json().catch(() => ({}));
  const note = document.createElement("p");
  note.className = "banner error";
  note.setAttribute("role", "alert");
  note.textContent = `${response.status}: ${body.message || body.detail || response.statusText}`;
  main.replaceChildren(note);
}

function askForKey(message) {
  sessionStorage.removeItem(KEY);
  if (message) sessionStorage.setItem("veriloop.keyError", message);
  location.reload();
}

// Follow a run's or a task's Server-Sent Events with fetch (EventSource cannot send the key header);
// each event re-renders the page, the end of the stream re-renders it and follows again
// while a server still executes it.
async function follow(url) {
  if (following === url) return;
  following = url;
  try {
    const response = await fetch(url, { headers: headers({ Accept: "text/event-stream" }) });
    if (response.ok && response.body) {
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        const blocks = buffer.split(/\r?\n\r?\n/);
        buffer = blocks.pop();
        if (blocks.some((b) => /^data:/m.test(b))) refresh();
      }
    }
  } catch (error) {
    // the connection dropped: the re-render below says where the run is
  }
  following = null;
  await refresh();
  const live = liveView();
  if (live) setTimeout(() => follow(live.dataset.events), 300);
}

// The run or task the page follows while it executes (its event stream in data-events).
const liveView = () => main.querySelector("[data-events][data-state='live']");

async function answer(form, approved) {
  const status = form.querySelector(".form-status");
  const comment = form.querySelector("textarea").value;
  const decisions = {};
  decisions[form.dataset.step] = { approved: approved, comment: comment };
  form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  status.textContent = "Sending…";
  const response = await fetch(`/api/plans/${encodeURIComponent(form.dataset.run)}/reviews`, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify({ decisions: decisions }),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    status.textContent = `Not sent: ${body.message || body.detail || response.status}`;
    form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    return;
  }
  form.querySelector("textarea").value = "";
  // Say what was sent, and what follows from it: a rejection fails the step, and its failure
  // policy decides whether the run goes on.
  const next = approved ? "the run continues" : "the step fails; its failure policy decides what follows";
  answered[form.dataset.key] = approved ? "Approved." : "Rejected.";
  status.textContent = answered[form.dataset.key];
  document.getElementById("notice").textContent =
    `${approved ? "Approved" : "Rejected"}: step ${form.dataset.step} of run ${form.dataset.run}; ${next}.`;
  await refresh();
}

function readManifestFile(input, textarea) {
  const file = input.files && input.files[0];
  if (!file) return;
  file.text().then((text) => {
    textarea.value = text;
    textarea.dispatchEvent(new Event("input"));
  });
}

async function checkManifest(form, result, start) {
  const body = { manifest: form.manifest.value, goal: form.goal.value || null };
  const response = await fetch("/new/check", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await response.json().catch(() => ({}));
    result.textContent = `Cannot check: ${error.message || error.detail || response.status}`;
    start.disabled = true;
    return;
  }
  result.innerHTML = await response.text();
  const check = result.querySelector(".manifest-check");
  start.disabled = !(check && check.dataset.runnable === "true");
}

async function startRun(form, result, start) {
  start.disabled = true;
  const body = { manifest: form.manifest.value, goal: form.goal.value || null };
  const response = await fetch("/api/plans", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    result.textContent = `Not started: ${answer.message || answer.detail || response.status}`;
    return;
  }
  location.assign(`/runs/${encodeURIComponent(answer.runId)}`);
}

// Cancel and Resume buttons: POST to the API, say what happened, show the page as it is now.
async function act(button) {
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  const notice = document.getElementById("notice");
  button.disabled = true;
  const response = await fetch(button.dataset.post, { method: "POST", headers: headers() });
  const body = await response.json().catch(() => ({}));
  notice.textContent = response.ok
    ? button.dataset.done
    : `Not done: ${body.message || body.detail || response.status}`;
  await refresh();
}

// Wire the current main part (after each swap).
function enhance() {
  main.querySelectorAll("button.action[data-post]").forEach((button) => {
    button.addEventListener("click", () => act(button));
  });
  main.querySelectorAll("form.review").forEach((form) => {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const button = event.submitter;
      answer(form, !(button && button.value === "reject"));
    });
  });
  const live = liveView();
  if (live) follow(live.dataset.events);
  const list = main.querySelector("[data-refresh]");
  clearTimeout(timer);
  if (list) timer = setTimeout(refresh, Number(list.dataset.refresh));
  const form = document.getElementById("new-run");
  if (form && !form.dataset.wired) {
    form.dataset.wired = "true";
    const result = document.getElementById("check-result");
    const start = document.getElementById("start-run");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      checkManifest(form, result, start);
    });
    form.manifest.addEventListener("input", () => { start.disabled = true; });
    document.getElementById("manifest-file").addEventListener("change", (event) => {
      readManifestFile(event.target, form.manifest);
    });
    start.addEventListener("click", () => startRun(form, result, start));
  }
}

function keyForm() {
  const form = document.getElementById("key-form");
  if (!form) return;
  const error = sessionStorage.getItem("veriloop.keyError");
  if (error) {
    document.getElementById("key-error").textContent = error;
    sessionStorage.removeItem("veriloop.keyError");
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("api-key").value.trim());
    forget.hidden = false;
    refresh();
  });
}

const forget = document.getElementById("forget-key");
forget.addEventListener("click", () => { askForKey(); });
if (sessionStorage.getItem(KEY)) forget.hidden = false;
if (document.body.dataset.needsKey === "true" && sessionStorage.getItem(KEY)) {
  refresh();
} else {
  keyForm();
  enhance();
}
