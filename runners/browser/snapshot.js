/*
 * veriloop page snapshot script: the page contract every browser client uses.
 *
 * Load it once per document, as early as possible, in the page's own JavaScript
 * world (Playwright: context.addInitScript; an extension: a content script with
 * world "MAIN" at document_start). It defines window.__veriloop:
 *
 *   markAction()        call right before executing an action: starts the witness window.
 *   snapshot(options)   waits for stability, then resolves to
 *                       {url, dom, activeElement, clientObservations, stability}.
 *   refresh()           the refresh() action: marks it (unless marked) and reloads the page.
 *
 * The attribute names below equal veriloop.schemas.page_contract (a test checks it).
 * Only ELEMENT_ID_ATTR is written to the live page (so actions can find elements);
 * hidden and background marks, scroll position, viewport and live form state go into the
 * serialized copy only.
 */
(function () {
  "use strict";
  if (window.__veriloop && window.__veriloop.version) return; // already installed in this document

  const ELEMENT_ID_ATTR = "data-veriloop-id";
  const HIDDEN_ATTR = "data-veriloop-hidden";
  const BACKGROUND_ATTR = "data-veriloop-background";
  const SCROLL_ATTR = "data-veriloop-scroll";
  const VIEWPORT_ATTR = "data-veriloop-viewport";
  const BACKGROUND_ATTRIBUTES = new Set(["href", "src"]);
  const MARK_KEY = "__veriloop_mark";
  const REDACTED = "********";
  const DEFAULTS = { networkIdleMs: 500, domQuietMs: 300, minWaitMs: 500, maxWaitMs: 5000, pollMs: 50 };
  const INTERACTIVE = [
    "a[href]", "button", "input:not([type=hidden])", "select", "textarea", "summary",
    "[contenteditable]:not([contenteditable=false])", "[tabindex]:not([tabindex='-1'])", "[onclick]",
    "[role=button]", "[role=link]", "[role=checkbox]", "[role=radio]", "[role=switch]", "[role=tab]",
    "[role=menuitem]", "[role=menuitemcheckbox]", "[role=menuitemradio]", "[role=option]",
    "[role=combobox]", "[role=textbox]", "[role=searchbox]", "[role=slider]", "[role=spinbutton]",
    "[role=treeitem]",
  ].join(",");
  // Text changes here are messages to the user, never background churn.
  const ANNOUNCEMENTS = "[aria-live]:not([aria-live=off]),[role=status],[role=alert],[role=log]";
  const NOT_RENDERED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "OPTION", "OPTGROUP", "HEAD"]);
  const now = () => performance.now();

  const state = {
    pendingRequests: 0,
    lastNetworkAt: now(),
    lastMutationAt: now(),
    markAt: -Infinity,
    markUrl: null,
    networkSinceMark: false,
    mutationSinceMark: false,
    actionWindowOpen: false,
    highestId: 0,
    snapshots: 0,
  };
  // Elements whose text changed while no action was pending (clocks, tickers, counters; not
  // live regions): their later text-only changes are background, neither a witness nor unrest.
  const backgroundText = new WeakSet();
  // What the snapshot marks with BACKGROUND_ATTR: element -> kinds ("text", "href", "src") that
  // changed while no action was pending, counted once this document has been snapshotted (what a
  // page does while it first renders is not background).
  const backgroundKinds = new WeakMap();
  function noteBackground(el, kind) {
    if (!el || state.actionWindowOpen || state.snapshots === 0) return;
    if (kind === "text" && el.closest(ANNOUNCEMENTS)) return;
    const kinds = backgroundKinds.get(el) || new Set();
    kinds.add(kind);
    backgroundKinds.set(el, kinds);
  }

  // A mark left by the previous document of this tab: this document was loaded by the action.
  const inherited = readMark();
  if (inherited) {
    state.markAt = 0;
    state.markUrl = inherited.url;
    state.networkSinceMark = true;
    state.mutationSinceMark = true;
    state.actionWindowOpen = true;
  }

  // ---- network witness: fetch, XHR and resource timing -------------------------------------
  function networkActivity(at) {
    state.lastNetworkAt = Math.max(state.lastNetworkAt, at);
    if (at >= state.markAt) state.networkSinceMark = true;
  }
  function requestStarted() {
    state.pendingRequests += 1;
    networkActivity(now());
  }
  function requestEnded() {
    state.pendingRequests = Math.max(0, state.pendingRequests - 1);
    networkActivity(now());
  }

  const originalFetch = window.fetch;
  if (typeof originalFetch === "function") {
    window.fetch = function (...args) {
      requestStarted();
      let pending;
      try {
        pending = originalFetch.apply(this, args);
      } catch (error) {
        requestEnded();
        throw error;
      }
      return Promise.resolve(pending).then(
        (response) => { requestEnded(); return response; },
        (error) => { requestEnded(); throw error; },
      );
    };
  }

  const XHR = window.XMLHttpRequest;
  if (XHR && XHR.prototype) {
    const originalSend = XHR.prototype.send;
    XHR.prototype.send = function (...args) {
      requestStarted();
      this.addEventListener("loadend", requestEnded, { once: true });
      try {
        return originalSend.apply(this, args);
      } catch (error) {
        this.removeEventListener("loadend", requestEnded);
        requestEnded();
        throw error;
      }
    };
  }

  try {
    new PerformanceObserver((list) => {
      // Entries arrive late and in batches: judge each by when it ended, not when it was delivered.
      for (const entry of list.getEntries()) networkActivity(entry.responseEnd || entry.startTime);
    }).observe({ type: "resource", buffered: false });
  } catch (error) {
    // No resource timing here (old browser, opaque frame): fetch/XHR still count.
  }

  // ---- DOM witness --------------------------------------------------------------------------
  function isTextOnly(record) {
    if (record.type === "characterData") return true;
    if (record.type !== "childList") return false;
    for (const node of record.addedNodes) if (node.nodeType === Node.ELEMENT_NODE) return false;
    for (const node of record.removedNodes) if (node.nodeType === Node.ELEMENT_NODE) return false;
    return true;
  }

  function takeMutations(records) {
    let significant = false;
    for (const record of records) {
      // Our own id numbering is not a change of the page.
      if (record.type === "attributes" && record.attributeName === ELEMENT_ID_ATTR) continue;
      if (record.type === "attributes" && BACKGROUND_ATTRIBUTES.has(record.attributeName)) {
        noteBackground(record.target, record.attributeName);
      }
      if (isTextOnly(record)) {
        const owner = record.type === "characterData" ? record.target.parentElement : record.target;
        noteBackground(owner, "text");
        if (owner && backgroundText.has(owner)) continue;
        if (owner && !state.actionWindowOpen && !owner.closest(ANNOUNCEMENTS)) backgroundText.add(owner);
      }
      significant = true;
    }
    if (!significant) return;
    state.lastMutationAt = now();
    if (state.actionWindowOpen) state.mutationSinceMark = true;
  }

  const observer = new MutationObserver(takeMutations);
  observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  const flushMutations = () => takeMutations(observer.takeRecords());

  // ---- action window --------------------------------------------------------------------------
  function readMark() {
    try {
      const raw = window.sessionStorage.getItem(MARK_KEY);
      return raw ? JSON.parse(raw) : null;
    } catch (error) {
      return null; // storage blocked (opaque origin, sandbox): the caller passes sinceUrl instead
    }
  }

  function writeMark(mark) {
    try {
      if (mark) window.sessionStorage.setItem(MARK_KEY, JSON.stringify(mark));
      else window.sessionStorage.removeItem(MARK_KEY);
    } catch (error) {
      // see readMark
    }
  }

  function markAction() {
    flushMutations(); // what happened before the action is not its effect
    state.markAt = now();
    state.markUrl = location.href;
    state.networkSinceMark = false;
    state.mutationSinceMark = false;
    state.actionWindowOpen = true;
    // Survives a same-origin navigation caused by the action (the next document reads it).
    writeMark({ url: location.href });
    return { url: location.href };
  }

  // ---- stability ----------------------------------------------------------------------------
  function waitForStability(options, startedAt) {
    return new Promise((resolve) => {
      const check = () => {
        flushMutations();
        const t = now();
        const elapsed = t - startedAt;
        const networkIdle = state.pendingRequests === 0 && t - state.lastNetworkAt >= options.networkIdleMs;
        const domQuiet = t - state.lastMutationAt >= options.domQuietMs;
        if (elapsed >= options.minWaitMs && networkIdle && domQuiet) resolve(true);
        else if (elapsed >= options.maxWaitMs) resolve(false);
        else setTimeout(check, options.pollMs);
      };
      check();
    });
  }

  // ---- numbering ----------------------------------------------------------------------------
  function startsPointer(el) {
    // Clickable-looking elements without semantics (div onclick via addEventListener).
    if (getComputedStyle(el).cursor !== "pointer") return false;
    const parent = el.parentElement;
    return !parent || getComputedStyle(parent).cursor !== "pointer";
  }

  function numberElements() {
    let highest = state.highestId;
    for (const el of document.querySelectorAll(`[${ELEMENT_ID_ATTR}]`)) {
      const n = Number.parseInt(el.getAttribute(ELEMENT_ID_ATTR), 10);
      if (n > highest) highest = n;
    }
    const seen = new Set();
    const fresh = [];
    const candidates = document.body ? document.body.querySelectorAll("*") : [];
    for (const el of candidates) {
      if (!el.matches(INTERACTIVE) && !startsPointer(el)) continue;
      const id = el.getAttribute(ELEMENT_ID_ATTR);
      // Keep an element's id for good; a copy made by the page (cloneNode) gets its own.
      if (id !== null && /^\d+$/.test(id) && !seen.has(id)) seen.add(id);
      else fresh.push(el);
    }
    for (const el of fresh) {
      highest += 1;
      el.setAttribute(ELEMENT_ID_ATTR, String(highest));
    }
    state.highestId = highest;
  }

  // ---- refresh --------------------------------------------------------------------------------
  function refresh() {
    if (!state.actionWindowOpen) markAction(); // the reloaded document inherits the mark
    location.reload();
    return { url: location.href };
  }

  // ---- serialization ------------------------------------------------------------------------
  function isHidden(el) {
    if (typeof el.checkVisibility === "function") {
      if (!el.checkVisibility({ visibilityProperty: true })) return true;
    } else if (el.getClientRects().length === 0 || getComputedStyle(el).visibility !== "visible") {
      return true;
    }
    if (el.children.length > 0) return false; // a zero-size wrapper can still show its children
    const box = el.getBoundingClientRect();
    return box.width === 0 && box.height === 0;
  }

  function mirrorLiveState(live, copy) {
    const tag = live.tagName;
    if (tag === "INPUT") {
      const type = (live.type || "text").toLowerCase();
      if (type === "checkbox" || type === "radio") {
        if (live.checked) copy.setAttribute("checked", "");
        else copy.removeAttribute("checked");
        if (live.indeterminate) copy.setAttribute("aria-checked", "mixed");
      } else if (type === "password") {
        copy.setAttribute("value", live.value ? REDACTED : ""); // never ship secrets
      } else if (type !== "file") {
        copy.setAttribute("value", live.value);
      }
    } else if (tag === "TEXTAREA") {
      copy.textContent = live.value;
      copy.setAttribute("value", live.value);
    } else if (tag === "OPTION") {
      if (live.selected) copy.setAttribute("selected", "");
      else copy.removeAttribute("selected");
    }
  }

  function serialize() {
    const root = document.documentElement;
    // An inert document: no custom-element upgrades, no image loads caused by the copy.
    const inert = document.implementation.createHTMLDocument("");
    const copy = inert.importNode(root, true);
    const liveAll = [root, ...root.querySelectorAll("*")];
    const copyAll = [copy, ...copy.querySelectorAll("*")];
    if (liveAll.length !== copyAll.length) return copy.outerHTML; // cannot happen; never guess pairs
    let hiddenUntil = null; // a hidden ancestor hides its whole subtree
    copy.setAttribute(SCROLL_ATTR, `${Math.round(window.scrollX)},${Math.round(window.scrollY)}`);
    copy.setAttribute(VIEWPORT_ATTR, inViewport());
    for (let i = 0; i < liveAll.length; i += 1) {
      const live = liveAll[i];
      mirrorLiveState(live, copyAll[i]);
      const kinds = backgroundKinds.get(live);
      if (kinds) copyAll[i].setAttribute(BACKGROUND_ATTR, [...kinds].sort().join(" "));
      if (!document.body || !document.body.contains(live) || NOT_RENDERED.has(live.tagName)) continue;
      if (hiddenUntil && hiddenUntil.contains(live)) {
        copyAll[i].setAttribute(HIDDEN_ATTR, "1");
      } else if (isHidden(live)) {
        copyAll[i].setAttribute(HIDDEN_ATTR, "1");
        if (live.children.length > 0 && live.getClientRects().length === 0) hiddenUntil = live;
      }
    }
    return copy.outerHTML;
  }

  // Numbers of the numbered elements inside the viewport, as ranges: "1-4 7 12-15".
  function inViewport() {
    const numbers = [];
    const width = window.innerWidth;
    const height = window.innerHeight;
    for (const el of document.querySelectorAll(`[${ELEMENT_ID_ATTR}]`)) {
      const box = el.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      if (box.bottom > 0 && box.right > 0 && box.top < height && box.left < width) {
        numbers.push(Number.parseInt(el.getAttribute(ELEMENT_ID_ATTR), 10));
      }
    }
    numbers.sort((a, b) => a - b);
    const ranges = [];
    for (const n of numbers) {
      const last = ranges[ranges.length - 1];
      if (last && n === last[1] + 1) last[1] = n;
      else if (!last || n !== last[1]) ranges.push([n, n]);
    }
    return ranges.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(" ");
  }

  function describeActiveElement() {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (!el || el === document.body || el === document.documentElement) return null;
    let text = el.tagName.toLowerCase();
    if (el.id) text += `#${el.id}`;
    for (const name of [ELEMENT_ID_ATTR, "name", "type"]) {
      const value = el.getAttribute(name);
      if (value) text += `[${name}="${value}"]`;
    }
    return text;
  }

  async function snapshot(options) {
    const opts = Object.assign({}, DEFAULTS, options || {});
    const startedAt = now();
    const settled = opts.wait === false ? true : await waitForStability(opts, startedAt);
    const waitedMs = now() - startedAt;
    numberElements();
    flushMutations();
    const dom = serialize();
    const since = opts.sinceUrl != null ? opts.sinceUrl : state.markUrl;
    const result = {
      url: location.href,
      dom,
      activeElement: describeActiveElement(),
      clientObservations: {
        didNetworkOccur: state.networkSinceMark,
        didDomMutate: state.mutationSinceMark,
        didUrlChange: since == null ? null : location.href !== since,
      },
      stability: { settled, waitedMs: Math.round(waitedMs), serializeMs: Math.round(now() - startedAt - waitedMs) },
    };
    // The action's window closes with its snapshot; later changes happen on their own.
    state.actionWindowOpen = false;
    state.snapshots += 1;
    writeMark(null);
    return result;
  }

  Object.defineProperty(window, "__veriloop", {
    value: Object.freeze({
      version: 1,
      ELEMENT_ID_ATTR,
      HIDDEN_ATTR,
      BACKGROUND_ATTR,
      SCROLL_ATTR,
      VIEWPORT_ATTR,
      DEFAULTS,
      markAction,
      snapshot,
      refresh,
    }),
    configurable: false,
    enumerable: false,
    writable: false,
  });
})();
