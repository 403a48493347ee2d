// The task's tab: snapshots through the one snapshot script, and actions executed as a user's.
//
// Clicks and typing go through chrome.debugger (Input.dispatchMouseEvent, Input.insertText,
// Input.dispatchKeyEvent): the page receives trusted events (event.isTrusted), as from a
// person, so frameworks that ignore synthetic events still act. Choosing a <select> option
// and typing into date/color/range inputs set the value and fire input + change, exactly as
// the Playwright runner does (native pickers have no trusted input path).

const ID_ATTR = "data-veriloop-id";
const ACTION_TIMEOUT_MS = 3000;
const NAVIGATION_TIMEOUT_MS = 15000;
const TRUE_WORDS = new Set(["true", "on", "yes", "1", "checked"]);
const VALUE_TYPES = new Set(["date", "time", "datetime-local", "month", "week", "range", "color"]);

/** Thrown when the browser does not let extensions into the page (chrome://, the Web Store). */
export class PageForbidden extends Error {}

const FORBIDDEN = /Cannot access|cannot be scripted|chrome:\/\/|chrome-extension:\/\/|extensions gallery|Missing host permission/i;
const GONE = /Frame with ID|frame was removed|No frame|document|navigat|Execution context|back\/forward cache|showing error page|No tab with id/i;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const PAGE_CALL_TIMEOUT_MS = 20000; // a snapshot waits at most 5 s, then serializes

/** `promise`, or an error that reads as a document gone away when it takes longer than `ms`. */
function bounded(promise, ms, what) {
  let timer;
  const expiry = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} got no answer in ${ms} ms: the document was probably navigated away`)), ms);
  });
  return Promise.race([promise, expiry]).finally(() => clearTimeout(timer));
}

async function waitForLoad(tabId, timeoutMs = NAVIGATION_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const tab = await chrome.tabs.get(tabId);
    if (tab.status === "complete") return tab;
    await sleep(50);
  }
  return chrome.tabs.get(tabId);
}

async function inPage(tabId, func, args = [], world = "MAIN") {
  const [result] = await bounded(
    chrome.scripting.executeScript({ target: { tabId }, world, func, args }),
    PAGE_CALL_TIMEOUT_MS,
    "the page",
  );
  return result ? result.result : undefined;
}

/** window.__veriloop[method](arg) in the tab; installs the script into a document it missed. */
export async function pageCall(tabId, method, arg = null) {
  let lastError = null;
  for (let attempt = 0; attempt < 8; attempt++) {
    try {
      const result = await inPage(tabId, (name, value) =>
        window.__veriloop ? window.__veriloop[name](value) : "__veriloop_missing__", [method, arg]);
      if (result === "__veriloop_missing__") {
        // A document opened before the extension was installed: install the script now.
        await chrome.scripting.executeScript({ target: { tabId }, world: "MAIN", files: ["snapshot.js"] });
        continue;
      }
      if (result != null || method !== "snapshot") return result; // null: the document went away
      lastError = new Error("the page went away during the snapshot");
    } catch (error) {
      if (FORBIDDEN.test(error.message)) {
        throw new PageForbidden(`this page does not let extensions run scripts (${error.message}); open an ordinary web page in this tab`);
      }
      if (!GONE.test(error.message)) throw error;
      lastError = error;
    }
    await sleep(100);
    await waitForLoad(tabId);
  }
  throw lastError || new Error(`the snapshot script did not answer in tab ${tabId}`);
}

// ---- the page's own error ------------------------------------------------------------------

const PAGE_ERROR_CHARS = 200;

/** The error the page shows, in its own words: a visible alert (role=alert, an assertive live
 * region), the message of a field marked invalid, or an element styled as an error; null if none. */
function pageErrorInPage(limit) {
  const shown = (el) => el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const messages = [...document.querySelectorAll('[aria-invalid="true"]')].flatMap((field) =>
    `${field.getAttribute("aria-errormessage") || ""} ${field.getAttribute("aria-describedby") || ""}`
      .split(/\s+/).filter(Boolean).map((id) => document.getElementById(id)));
  const candidates = [
    ...document.querySelectorAll('[role="alert"], [aria-live="assertive"]'),
    ...messages,
    ...document.querySelectorAll(".error, .alert-danger, .invalid-feedback, .field-error"),
  ];
  for (const el of candidates) {
    if (!shown(el)) continue;
    const text = (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim();
    if (text) return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
  }
  return null;
}

/** The error the tab's page shows now (null if none, or if the page cannot be read). */
export const pageError = (tabId) =>
  inPage(tabId, pageErrorInPage, [PAGE_ERROR_CHARS], "ISOLATED").catch(() => null);

// ---- chrome.debugger ----------------------------------------------------------------------

const attached = new Set();
chrome.debugger.onDetach.addListener((source) => attached.delete(source.tabId));

async function cdp(tabId, method, params = {}) {
  if (!attached.has(tabId)) {
    try {
      await chrome.debugger.attach({ tabId }, "1.3");
    } catch (error) {
      if (!/already attached/i.test(error.message)) throw error;
    }
    attached.add(tabId);
  }
  return bounded(chrome.debugger.sendCommand({ tabId }, method, params), ACTION_TIMEOUT_MS * 2, method);
}

export async function detach(tabId) {
  if (!attached.has(tabId)) return;
  attached.delete(tabId);
  await chrome.debugger.detach({ tabId }).catch(() => {});
}

// ---- finding elements ---------------------------------------------------------------------

/** Scrolls the element into view and says where to click it, or why it cannot be clicked. */
function locateInPage(attr, id) {
  const el = document.querySelector(`[${attr}="${id}"]`);
  if (!el) return { found: false };
  el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const rect = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  const kind = el.tagName === "SELECT" ? "select" : (el.type || "").toLowerCase();
  const info = { found: true, kind, tag: el.tagName.toLowerCase(), checked: !!el.checked };
  if (rect.width === 0 || rect.height === 0 || style.visibility === "hidden") return { ...info, problem: "is not visible" };
  if (el.disabled) return { ...info, problem: "is disabled" };
  const x = rect.left + rect.width / 2;
  const y = rect.top + rect.height / 2;
  const hit = document.elementFromPoint(x, y);
  if (hit && hit !== el && !el.contains(hit)) {
    const label = hit.closest("label");
    if (!(label && (label.control === el || label.contains(el)))) {
      return { ...info, problem: `is covered by <${hit.tagName.toLowerCase()}>` };
    }
  }
  return { ...info, x, y };
}

async function locate(tabId, id) {
  const deadline = Date.now() + ACTION_TIMEOUT_MS;
  for (;;) {
    const where = await inPage(tabId, locateInPage, [ID_ATTR, id], "ISOLATED");
    if (!where.found || !where.problem || Date.now() > deadline) return where;
    await sleep(100);
  }
}

// ---- trusted input ------------------------------------------------------------------------

async function clickAt(tabId, x, y) {
  const base = { x, y, button: "left", clickCount: 1 };
  await cdp(tabId, "Input.dispatchMouseEvent", { type: "mouseMoved", x, y });
  await cdp(tabId, "Input.dispatchMouseEvent", { type: "mousePressed", ...base });
  await cdp(tabId, "Input.dispatchMouseEvent", { type: "mouseReleased", ...base });
}

const KEYS = {
  Enter: [13, "\r"], Tab: [9, ""], Escape: [27, ""], Backspace: [8, ""], Delete: [46, ""],
  ArrowLeft: [37, ""], ArrowUp: [38, ""], ArrowRight: [39, ""], ArrowDown: [40, ""],
  Home: [36, ""], End: [35, ""], PageUp: [33, ""], PageDown: [34, ""], Space: [32, " "],
};
const MODIFIERS = { Alt: 1, Control: 2, Meta: 4, Shift: 8 };

/** A Playwright-style key ("Enter", "a", "Control+a") as CDP key events. */
export function keyEvents(combo) {
  const parts = combo.split("+");
  const name = parts.pop() || "+";
  let modifiers = 0;
  for (const part of parts) {
    if (!(part in MODIFIERS)) throw new Error(`unknown modifier ${part} in ${combo}`);
    modifiers |= MODIFIERS[part];
  }
  let keyCode, text, key = name, code;
  if (name in KEYS) {
    [keyCode, text] = KEYS[name];
    key = name === "Space" ? " " : name;
    code = name;
  } else if ([...name].length === 1) {
    const upper = name.toUpperCase();
    keyCode = upper.charCodeAt(0);
    text = name;
    code = /[A-Z]/.test(upper) ? `Key${upper}` : /[0-9]/.test(name) ? `Digit${name}` : "";
  } else {
    throw new Error(`unknown key ${JSON.stringify(name)}`);
  }
  if (modifiers & (MODIFIERS.Control | MODIFIERS.Meta | MODIFIERS.Alt)) text = "";
  const common = { key, code, windowsVirtualKeyCode: keyCode, nativeVirtualKeyCode: keyCode, modifiers };
  return [
    { type: text ? "keyDown" : "rawKeyDown", text, unmodifiedText: text, ...common },
    { type: "keyUp", ...common },
  ];
}

async function press(tabId, combo) {
  for (const event of keyEvents(combo)) await cdp(tabId, "Input.dispatchKeyEvent", event);
}

function focusAndSelectInPage(attr, id) {
  const el = document.querySelector(`[${attr}="${id}"]`);
  el.focus();
  if (typeof el.select === "function") el.select();
  else if (el.isContentEditable) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  return document.activeElement === el || el.contains(document.activeElement);
}

function setValueInPage(attr, id, value) {
  const el = document.querySelector(`[${attr}="${id}"]`);
  el.focus();
  el.value = value;
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return el.value === value;
}

function selectOptionInPage(attr, id, wanted) {
  const el = document.querySelector(`[${attr}="${id}"]`);
  if (el.tagName !== "SELECT") return "the element is not a <select>";
  const option = [...el.options].find((o) => o.value === wanted) || [...el.options].find((o) => o.label === wanted);
  if (!option) return `no option with the value or label ${JSON.stringify(wanted)}`;
  if (option.disabled) return `the option ${JSON.stringify(wanted)} is disabled`;
  el.focus();
  option.selected = true;
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return null;
}

function scrollInPage(direction) {
  const step = Math.round(window.innerHeight * 0.8);
  if (direction === "up") window.scrollBy(0, -step);
  else if (direction === "down") window.scrollBy(0, step);
  else if (direction === "top") window.scrollTo(0, 0);
  else window.scrollTo(0, document.documentElement.scrollHeight);
}

// ---- actions ------------------------------------------------------------------------------

/**
 * Execute one parsed action (the service's parsedAction) on the tab; the same grammar and
 * meaning as the Playwright runner. Returns {ok, error?, clientVerification?}: a missing or
 * refusing element is reported, never thrown.
 */
export async function execute(tabId, action) {
  const { kind, elementId: id, text } = action;
  if (kind === "finish" || kind === "fail") return { ok: true };
  if (kind === "wait") {
    await sleep(Math.min(Number(action.seconds) || 0, 30) * 1000);
    return { ok: true };
  }
  if (kind === "navigate") {
    let target;
    try {
      target = new URL(text);
    } catch {
      return { ok: false, error: `navigate(): not a URL: ${String(text).slice(0, 100)}` };
    }
    if (!["http:", "https:"].includes(target.protocol)) {
      return { ok: false, error: `navigate(): only http and https pages are opened, not ${target.protocol}` };
    }
    await chrome.tabs.update(tabId, { url: target.href });
    await sleep(100);
    await waitForLoad(tabId);
    return { ok: true };
  }
  if (kind === "go_back") {
    try {
      await chrome.tabs.goBack(tabId);
    } catch {
      return { ok: false, error: "goBack(): there is no previous page" };
    }
    await sleep(100);
    await waitForLoad(tabId);
    return { ok: true };
  }
  if (kind === "refresh") {
    await pageCall(tabId, "refresh").catch(() => {}); // the document is gone as it answers
    await sleep(100);
    await waitForLoad(tabId);
    return { ok: true };
  }
  if (kind === "press" && id == null) {
    await press(tabId, text);
    return { ok: true };
  }
  if (kind === "scroll" && id == null) {
    await inPage(tabId, scrollInPage, [text], "ISOLATED");
    return { ok: true };
  }
  const selector = `[${ID_ATTR}="${id}"]`;
  const where = await locate(tabId, id);
  if (!where.found) {
    return {
      ok: false,
      error: `${action.kind}: no element ${id} on the page`,
      clientVerification: { elementFound: false, selector },
    };
  }
  if (kind === "scroll") return { ok: true }; // locate scrolled it into view
  if (kind === "select_option" || (kind === "set_value" && where.kind === "select")) {
    const problem = await inPage(tabId, selectOptionInPage, [ID_ATTR, id, text], "ISOLATED");
    return problem ? { ok: false, error: `element ${id}: ${problem}` } : { ok: true };
  }
  if (where.problem && kind !== "press") return { ok: false, error: `element ${id} ${where.problem}` };
  if (kind === "click") {
    await clickAt(tabId, where.x, where.y);
    return { ok: true };
  }
  if (kind === "press") {
    await inPage(tabId, focusAndSelectInPage, [ID_ATTR, id], "ISOLATED");
    await press(tabId, text);
    return { ok: true };
  }
  // set_value
  if (where.kind === "checkbox" || where.kind === "radio") {
    const wanted = TRUE_WORDS.has(String(text).trim().toLowerCase());
    if (where.checked === wanted) return { ok: true };
    if (!wanted && where.kind === "radio") return { ok: false, error: `element ${id}: a radio button cannot be unchecked` };
    await clickAt(tabId, where.x, where.y);
    return { ok: true };
  }
  if (VALUE_TYPES.has(where.kind)) {
    const ok = await inPage(tabId, setValueInPage, [ID_ATTR, id, text], "ISOLATED");
    return ok ? { ok: true } : { ok: false, error: `element ${id}: ${JSON.stringify(text)} is not a valid ${where.kind}` };
  }
  if (!(await inPage(tabId, focusAndSelectInPage, [ID_ATTR, id], "ISOLATED"))) {
    return { ok: false, error: `element ${id} cannot take the focus` };
  }
  if (text) await cdp(tabId, "Input.insertText", { text });
  else await press(tabId, "Delete");
  return { ok: true };
}
