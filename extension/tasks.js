// Task records in chrome.storage.local, keyed by tab: the one place the panel reads from and
// the service worker writes to, so a service-worker restart loses nothing.
//
//   "tab:<tabId>"      {tabId, task, history}: the tab's current task and its finished ones (with
//                      their steps, so the panel opens an earlier task as it was)
//   "pending:<tabId>"  {requestId, body, pageError}: the interact request being sent (resent
//                      unchanged) and the error the page showed in that snapshot, if any
//
// A tab's records live as long as the tab: a closed tab's are removed, and so are those of tabs
// gone while no worker ran (a later tab may be given the same id).

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
    // An empty record is no record: a step that lands after its tab was forgotten leaves nothing.
    if (changed.task || changed.history.length) await chrome.storage.local.set({ [tabKey(tabId)]: changed });
    else await chrome.storage.local.remove(tabKey(tabId));
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
    { taskId, goal, state, message, usage, steps, startedAt, endedAt: new Date().toISOString() },
    ...record.history,
  ].slice(0, HISTORY_LENGTH);
  record.task = null;
}

/** Removes the records of every tab but those in `live` (each through its tab's queue of updates). */
export async function forgetTabsExcept(live) {
  const everything = await chrome.storage.local.get(null);
  const gone = new Set(
    Object.keys(everything)
      .map((key) => /^(?:tab|pending):(\d+)$/.exec(key))
      .filter((match) => match && !live.has(Number(match[1])))
      .map((match) => Number(match[1])),
  );
  await Promise.all([...gone].map(forgetTab));
}

/** Removes a tab's records, after any update of them already under way. */
export function forgetTab(tabId) {
  return updateTab(tabId, (record) => {
    record.task = null;
    record.history = [];
  }).then(() => chrome.storage.local.remove(pendingKey(tabId)));
}

/** `; the page says “...”` after a failure message when the page showed an error, else nothing. */
export const pageSays = (error) => (error ? `; the page says “${error}”` : "");

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
