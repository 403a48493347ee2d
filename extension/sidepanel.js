// The side panel: start a task on the tab, watch every step with its evidence and verdict.
// It only reads chrome.storage (the service worker writes there) and sends messages; page
// and service text is shown with textContent, never as markup.

import { activeTask, health } from "./api.js";
import { loadSettings } from "./settings.js";
import { installId, loadTab, pageSays, tabKey } from "./tasks.js";

const $ = (id) => document.getElementById(id);
let tabId = null;
let pageUrl = "";
let announced = "";

/** Tell a screen reader each new step once (the #progress live region), not every re-render. */
function announce(task) {
  const last = task.steps[task.steps.length - 1];
  const text = last
    ? `Step ${last.stepIndex + 1}: ${last.action}${last.target ? ` on ${last.target}` : ""}. Task ${task.state}.`
    : `Task ${task.state}.`;
  if (text !== announced) $("progress").textContent = announced = text;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

async function currentTab() {
  // ?tab=ID pins the panel to a tab (a panel opened as a page); otherwise it follows the window's active tab.
  const pinned = new URLSearchParams(location.search).get("tab");
  if (pinned) return chrome.tabs.get(Number(pinned));
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  return tab;
}

async function send(message) {
  $("error").textContent = "";
  const reply = await chrome.runtime.sendMessage({ tabId, ...message });
  if (!reply?.ok) $("error").textContent = reply?.error || "the extension's worker did not answer";
  return reply;
}

const STATE_WORDS = {
  running: "running", paused: "paused", completed: "completed", failed: "failed", stopped: "stopped",
  cancelled: "cancelled",
};

function verdictLine(v, error) {
  if (!v) return el("div", "verdict waiting", "verdict: comes with the next step");
  const parts = [
    v.success ? "✓ worked" : `✗ did not work${v.failureCategory ? ` (${v.failureCategory})` : ""}${pageSays(error)}`,
    `confidence ${Number(v.confidence).toFixed(2)}`,
    v.modelCalled ? "model asked" : "no model call",
  ];
  if (v.goalAchieved) parts.push("goal achieved");
  return el("div", `verdict ${v.success ? "ok" : "bad"}`, parts.join(" · "));
}

function renderStep(step, isLast, task) {
  const li = el("li", "step");
  li.dataset.stepIndex = step.stepIndex;
  const head = el("div", "action");
  head.append(el("code", null, step.action));
  if (step.target) head.append(" ", el("span", "target", `“${step.target}”`));
  if (step.correctionStrategy) head.append(" ", el("span", "source", `correction: ${step.correctionStrategy}`));
  li.append(head);
  if (step.thought) li.append(el("div", "thought", step.thought));
  if (step.executionError) li.append(el("div", "exec-error", `not executed as asked: ${step.executionError}`));
  const terminal = /^(finish|fail)\(/.test(step.action);
  if (!terminal && !(isLast && task.state !== "running")) li.append(verdictLine(step.verification, step.pageError));
  if (step.verification?.observations?.length) {
    const list = el("ul", "observations");
    for (const line of step.verification.observations) list.append(el("li", null, line));
    li.append(list);
  }
  return li;
}

function usageLine(usage) {
  if (!usage) return "";
  const tokens = (usage.inputTokens || 0) + (usage.outputTokens || 0);
  return `${tokens} tokens · $${Number(usage.costUsd || 0).toFixed(4)} · ${usage.calls || 0} model calls`;
}

function render(record) {
  const task = record.task;
  $("task").hidden = !task;
  const busy = task && ["running", "paused"].includes(task.state);
  $("start-form").hidden = busy;
  $("goal-label").textContent = task ? "Follow-up task on this page:" : "What should the agent do on this page?";
  if (task) {
    $("status").textContent = STATE_WORDS[task.state] || task.state;
    $("status").className = `badge ${task.state}`;
    $("task-goal").textContent = task.goal;
    $("message").textContent = task.message || "";
    $("retry").hidden = !task.retry;
    $("retry").textContent = task.retry || "";
    $("usage").textContent = usageLine(task.usage);
    $("stop").hidden = !busy;
    // Resume only where the extension can work: never on chrome:// and other internal pages.
    $("resume").hidden = task.state !== "paused" || !/^https?:/.test(pageUrl);
    announce(task);
    $("steps").replaceChildren(...task.steps.map((s, i) => renderStep(s, i === task.steps.length - 1, task)));
  }
  $("history-section").hidden = !record.history.length;
  // Each earlier task opens (a native disclosure) to its steps as they were when it ended; the
  // open ones stay open while the panel re-renders.
  const open = new Set([...document.querySelectorAll("#history details[open]")].map((d) => d.dataset.task));
  $("history").replaceChildren(
    ...record.history.map((h, i) => {
      const steps = Array.isArray(h.steps) ? h.steps : []; // entries of older versions kept a count
      const count = Array.isArray(h.steps) ? h.steps.length : h.steps ?? 0;
      const key = h.taskId || `${h.startedAt}-${i}`;
      const details = el("details");
      details.dataset.task = key;
      details.open = open.has(key);
      const summary = el("summary");
      summary.append(el("span", `badge ${h.state}`, h.state), " ", el("span", null, h.goal),
        el("span", "muted", ` · ${count} steps${h.usage ? ` · ${usageLine(h.usage)}` : ""}`));
      details.append(summary);
      if (h.message) details.append(el("p", "message", h.message));
      const list = el("ol", "steps");
      list.append(...steps.map((s, j) => renderStep(s, j === steps.length - 1, h)));
      details.append(list);
      const li = el("li");
      li.append(details);
      return li;
    }),
  );
}

async function offerRecovery(tab, record) {
  if (record.task) return;
  try {
    const settings = await loadSettings();
    const summary = await activeTask(settings, `veriloop-ext-${await installId()}`, tab.url);
    $("recover").hidden = false;
    $("recover-goal").textContent = summary.goal;
    $("recover-button").onclick = async () => {
      $("recover").hidden = true;
      await send({ type: "recover", summary });
    };
  } catch {
    // 404 (nothing to continue), or the service is not reachable: nothing to offer
  }
}

async function showModel() {
  try {
    const status = await health(await loadSettings());
    $("scripted").hidden = !status.model?.scripted;
  } catch {
    // the service is not reachable: a task's own message says so
  }
}

async function show() {
  const tab = await currentTab();
  tabId = tab.id;
  pageUrl = tab.url || "";
  $("page").textContent = tab.url;
  const record = await loadTab(tabId);
  render(record);
  offerRecovery(tab, record);
}

$("start-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const reply = await send({ type: "start", goal: $("goal").value });
  if (reply?.ok) $("goal").value = "";
});
$("goal").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("start-form").requestSubmit();
  }
});
$("stop").addEventListener("click", () => send({ type: "stop" }));
$("resume").addEventListener("click", () => send({ type: "resume" }));
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && tabId !== null && changes[tabKey(tabId)]) {
    render(changes[tabKey(tabId)].newValue || { tabId, task: null, history: [] });
  }
});
chrome.tabs.onActivated.addListener(() => {
  if (!new URLSearchParams(location.search).get("tab")) show();
});
chrome.runtime.sendMessage({ type: "wake" }).catch(() => {}); // a stopped worker resumes its tasks
show();
showModel();
