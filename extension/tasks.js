// Task records in chrome.storage.local, keyed by tab: the one place the panel reads from and
// the service worker writes to, so a service-worker restart loses nothing.
//
//   "tab:<tabId>"      {tabId, task, history}: the tab's current task and its finished ones
//   "pending:<tabId>"  {requestId, body}: the interact request being sent (resent unchanged)

const HISTORY_LENGTH = 20;
const chains = new Map();

export const tabKey = (tabId) => `tab:${tabId}`;
export const pendingKey = (tabId) => `pending:${tabId}`;

export async function loadTab(tabId) {
  const key = tabKey(tabId);
  const stored = (await chrome.storage.local.get(key))[key];
  return stored || { tabId, task: null, history: [] };
}

/** Read-modify-write of a tab's record, one at a time per tab; `change` may return a new record. */
export function updateTab(tabId, change) {
  const previous = chains.get(tabId) || Promise.resolve();
  const next = previous.catch(() => {}).then(async () => {
    const record = await loadTab(tabId);
    const changed = (await change(record)) || record;
    await chrome.storage.local.set({ [tabKey(tabId)]: changed });
    return changed;
  });
  chains.set(tabId, next);
  return next;
}

/** Updates the tab's current task (when there is one). */
export const updateTask = (tabId, change) =>
  updateTab(tabId, async (record) => {
    if (record.task) await change(record.task, record);
  });

/** Moves the current task into the tab's history (newest first). */
export function retire(record) {
  const task = record.task;
  if (!task) return;
  const { taskId, goal, state, message, usage, steps, startedAt } = task;
  record.history = [
    { taskId, goal, state, message, usage, steps: steps.length, startedAt, endedAt: new Date().toISOString() },
    ...record.history,
  ].slice(0, HISTORY_LENGTH);
  record.task = null;
}

export async function allTabs() {
  const everything = await chrome.storage.local.get(null);
  return Object.entries(everything)
    .filter(([key]) => key.startsWith("tab:"))
    .map(([, record]) => record);
}

export async function installId() {
  const { installId: stored } = await chrome.storage.local.get("installId");
  if (stored) return stored;
  const created = crypto.randomUUID();
  await chrome.storage.local.set({ installId: created });
  return created;
}
