// The service worker: runs each tab's task, one step at a time, and survives its own restarts.
//
// A step: snapshot the tab (after the stability wait) -> POST /api/agent/interact -> record the
// answer -> execute its action on the tab -> snapshot again. Every phase is written to
// chrome.storage.local before it starts, so a restarted worker continues where the last one
// stopped: an interact request is resent unchanged (same requestId: the service answers it
// once), and an action whose execution had started is never executed again (the next
// snapshot goes to the service, whose verdict says whether it happened).

import { ServiceError, cancelTask, interact, taskDetail } from "./api.js";
import { PageForbidden, detach, execute, pageCall, pageError } from "./page.js";
import { loadSettings } from "./settings.js";
import { allTabs, forgetTab, forgetTabsExcept, installId, loadTab, pageSays, pendingKey, retire, updateTab, updateTask } from "./tasks.js";

const running = new Set();
const stopRequested = new Set();

chrome.sidePanel?.setPanelBehavior({ openPanelOnActionClick: true }).catch(() => {});
chrome.alarms.create("veriloop-wake", { periodInMinutes: 0.5 });
chrome.alarms.onAlarm.addListener(() => resumeAll());
// Before anything drives a task, a worker forgets the tasks of tabs that are gone (closed while no
// worker ran). The first worker of a browser session forgets every tab's: their ids are gone or,
// worse, reused by another page. A task that was running stays unfinished on the service, which
// offers it to the next tab on its site ("Continue it"). chrome.storage.session outlives worker
// restarts and is emptied by a browser restart; onStartup would race resumeAll().
const browserSession = (async () => {
  if ((await chrome.storage.session.get("sessionStarted")).sessionStarted) {
    await forgetTabsExcept(new Set((await chrome.tabs.query({})).map((tab) => tab.id)));
    return;
  }
  await forgetTabsExcept(new Set());
  await chrome.storage.session.set({ sessionStarted: true });
})();

chrome.tabs.onRemoved.addListener((tabId) => {
  stopRequested.delete(tabId);
  forgetTab(tabId);
});

chrome.runtime.onMessage.addListener((message, _sender, reply) => {
  handle(message).then(
    (result) => reply({ ok: true, ...result }),
    (error) => reply({ ok: false, error: error.message }),
  );
  return true; // the answer comes later
});

async function handle(message) {
  const tabId = Number(message.tabId);
  switch (message.type) {
    case "start":
      stopRequested.delete(tabId);
      return start(tabId, String(message.goal || "").trim());
    case "stop":
      return stop(tabId);
    case "resume":
      await updateTask(tabId, (task) => {
        if (task.state === "paused") Object.assign(task, { state: "running", message: null });
      });
      drive(tabId);
      return {};
    case "recover":
      return recover(tabId, message.summary);
    case "wake":
      resumeAll();
      return {};
    default:
      throw new Error(`unknown message ${message.type}`);
  }
}

/** Stop the tab's task here at once, then cancel it on the service, so that nothing (another tab's
 * "Continue it", a restarted worker) runs it again; the history entry says which happened. */
async function stop(tabId) {
  stopRequested.add(tabId);
  let taskId = null;
  await updateTab(tabId, (record) => {
    if (record.task && !ENDED_STATES.includes(record.task.state)) {
      taskId = record.task.taskId;
      record.task.state = "stopped";
      record.task.message = "stopped from the panel";
    }
    retire(record);
  });
  await chrome.storage.local.remove(pendingKey(tabId));
  await detach(tabId);
  // No task id yet: the first request is still on its way; send() cancels what it creates.
  if (taskId) await cancelOnService(tabId, taskId);
  return {};
}

async function cancelOnService(tabId, taskId) {
  let state = "cancelled";
  let message = "cancelled: the service takes no more steps for it";
  try {
    await cancelTask(await loadSettings(), taskId);
  } catch (error) {
    if (error instanceof ServiceError && error.status === 409 && error.body?.status) {
      state = error.body.status;
      message = `the service says this task is already ${state}`;
    } else {
      state = "stopped";
      message = `stopped here, but the service could not be told (${error.message})`;
    }
  }
  await updateTab(tabId, (record) => {
    const entry = record.history.find((h) => h.taskId === taskId);
    if (entry) Object.assign(entry, { state, message });
  });
}

const ENDED_STATES = ["completed", "failed", "cancelled", "stopped"];

function newTask(goal) {
  return {
    taskId: null, goal, state: "running", message: null, phase: "observe", stepIndex: null,
    executedStep: null, lastExecution: null, steps: [], usage: null, retry: null,
    startedAt: new Date().toISOString(),
  };
}

async function start(tabId, goal) {
  if (!goal) throw new Error("write a goal first");
  const tab = await chrome.tabs.get(tabId);
  await updateTab(tabId, (record) => {
    if (record.task && ["running", "paused"].includes(record.task.state)) {
      throw new Error("this tab already has a task: stop it first");
    }
    retire(record);
    record.task = newTask(goal);
    record.task.url = tab.url;
  });
  drive(tabId);
  return {};
}

/** Continue a task the service knows (GET .../task/active) but this tab's storage lost. */
async function recover(tabId, summary) {
  await updateTab(tabId, (record) => {
    retire(record);
    record.task = {
      ...newTask(summary.goal),
      taskId: summary.taskId,
      stepIndex: summary.stepIndex,
      // Whether that answer's action ran is unknown: never run it again; the next snapshot's
      // verdict says what happened.
      executedStep: summary.stepIndex,
      message: "continued from the service's record",
    };
  });
  // The same task paused under another tab (its page moved, the tab stays open): it lives on
  // here, so it leaves that tab's record.
  for (const other of await allTabs()) {
    if (other.tabId !== tabId && other.task?.taskId === summary.taskId) {
      await updateTab(other.tabId, (record) => {
        Object.assign(record.task, { state: "paused", message: `continued in tab ${tabId}` });
        retire(record);
      });
    }
  }
  drive(tabId);
  return {};
}

async function resumeAll() {
  for (const record of await allTabs()) {
    if (record.task?.state === "running") drive(record.tabId);
  }
}

async function drive(tabId) {
  if (running.has(tabId)) return;
  running.add(tabId);
  try {
    await browserSession;
    for (;;) {
      const { task } = await loadTab(tabId);
      if (!task || task.state !== "running") return;
      await advance(tabId, task);
    }
  } catch (error) {
    await updateTask(tabId, (task) => {
      if (task.state === "running") Object.assign(task, { state: "paused", message: explain(error), retry: null });
    });
  } finally {
    running.delete(tabId);
  }
}

function explain(error) {
  if (error instanceof PageForbidden || error instanceof ServiceError) return error.message;
  if (/No tab with id/i.test(error.message)) return "the tab was closed; the task is paused";
  return `the extension failed: ${error.message}`;
}

async function advance(tabId, task) {
  if (task.phase === "observe") return observe(tabId, task);
  if (task.phase === "send") return send(tabId, task);
  return act(tabId, task);
}

async function observe(tabId, task) {
  const since = task.lastExecution?.previousUrl;
  const snap = await pageCall(tabId, "snapshot", since ? { sinceUrl: since } : {});
  const body = { url: snap.url, dom: snap.dom, activeElement: snap.activeElement, sessionId: await sessionId() };
  if (task.taskId) {
    Object.assign(body, { taskId: task.taskId, stepIndex: task.stepIndex, clientObservations: snap.clientObservations });
    if (task.lastExecution?.clientVerification) body.clientVerification = task.lastExecution.clientVerification;
    if (since) body.previousUrl = since;
  } else {
    body.query = task.goal;
  }
  body.requestId = `${body.sessionId}-${crypto.randomUUID()}`;
  // What the page says went wrong, in its words: the panel quotes it if the verdict on the last
  // action is a failure, or the agent gives up on this page.
  const error = await pageError(tabId);
  await chrome.storage.local.set({ [pendingKey(tabId)]: { requestId: body.requestId, body, pageError: error } });
  await updateTask(tabId, (t) => Object.assign(t, { phase: "send", url: snap.url, settled: snap.stability?.settled !== false }));
}

async function send(tabId, task) {
  const pending = (await chrome.storage.local.get(pendingKey(tabId)))[pendingKey(tabId)];
  if (!pending) return updateTask(tabId, (t) => Object.assign(t, { phase: "observe" }));
  const settings = await loadSettings();
  let error409 = null;
  const answer = await interact(settings, pending.body, {
    onRetry: (error, delay) =>
      updateTask(tabId, (t) => Object.assign(t, { retry: `${error.message}; sending the same request again in ${(delay / 1000).toFixed(1)} s` })),
    shouldStop: () => stopRequested.has(tabId),
  }).catch(async (error) => {
    if (error instanceof ServiceError && error.status === 409 && ["completed", "failed", "cancelled"].includes(error.body?.status)) {
      error409 = error; // the task ended in an answer this client lost: take the service's word
      return null;
    }
    throw error;
  });
  await chrome.storage.local.remove(pendingKey(tabId));
  if (answer && stopRequested.has(tabId) && !pending.body.taskId) {
    // Stopped while the request that creates the task was on its way: cancel what it created.
    await updateTab(tabId, (record) => {
      const entry = record.history.find((h) => !h.taskId);
      if (entry) entry.taskId = answer.taskId;
    });
    return cancelOnService(tabId, answer.taskId);
  }
  await updateTab(tabId, (record) => {
    const t = record.task;
    if (!t) return;
    t.retry = null;
    if (answer === null) {
      t.state = error409.body.status;
      t.message = `the service says this task is already ${error409.body.status}`;
      return;
    }
    const last = t.steps[t.steps.length - 1];
    if (last && answer.verification) Object.assign(last, { verification: answer.verification, pageError: pending.pageError ?? null });
    t.steps.push({
      stepIndex: answer.stepIndex,
      action: answer.action,
      target: answer.target ?? null,
      thought: answer.thought || "",
      correctionStrategy: answer.correctionStrategy ?? null,
      verification: null,
    });
    Object.assign(t, { taskId: answer.taskId, stepIndex: answer.stepIndex, answer, phase: "act" });
    if (answer.status !== "executing") {
      t.state = answer.status; // "completed" only from the service's status, never from text
      t.message = answer.status === "completed" ? answer.thought : `the agent gave up: ${answer.parsedAction.text || answer.thought}${pageSays(pending.pageError)}`;
    } else if (answer.parsedAction.kind === "finish" || answer.parsedAction.kind === "fail") {
      t.state = "paused";
      t.message = `the service answered ${answer.action} but left the task executing; nothing was done`;
    }
  });
  // Awaited, as part of the step: once a task is paused or ended, nothing writes its record later.
  await refreshUsage(tabId, answer?.taskId || pending.body.taskId, settings);
}

async function refreshUsage(tabId, taskId, settings) {
  if (!taskId) return;
  try {
    const detail = await taskDetail(settings, taskId);
    const usage = detail.totalUsage;
    if (!usage) return;
    await updateTab(tabId, (record) => {
      const target = record.task?.taskId === taskId ? record.task : record.history.find((h) => h.taskId === taskId);
      if (target) target.usage = usage;
    });
  } catch {
    // usage is for display only
  }
}

async function act(tabId, task) {
  if (task.executedStep === task.stepIndex) {
    // This action's execution started before a restart: it may have run. Never twice.
    return updateTask(tabId, (t) => Object.assign(t, { phase: "observe" }));
  }
  const tab = await chrome.tabs.get(tabId);
  await updateTask(tabId, (t) => Object.assign(t, { executedStep: task.stepIndex }));
  await pageCall(tabId, "markAction");
  // A page that navigates away mid-action is the action's outcome, reported like a refusal;
  // the next snapshot shows what happened.
  const result = await execute(tabId, task.answer.parsedAction).catch((error) => {
    if (error instanceof PageForbidden || /No tab with id/i.test(error.message)) throw error;
    return { ok: false, error: error.message };
  });
  await updateTask(tabId, (t) => {
    const step = t.steps[t.steps.length - 1];
    if (step) Object.assign(step, { executionOk: result.ok, executionError: result.error || null });
    t.lastExecution = { previousUrl: tab.url, clientVerification: result.clientVerification || null };
    t.phase = "observe";
  });
}

async function sessionId() {
  return `veriloop-ext-${await installId()}`;
}

// For the worker's DevTools console (and the tests): run one action or page call by hand.
globalThis.veriloop = { execute, pageCall };

resumeAll(); // a restarted worker picks up every running task
