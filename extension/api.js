// The veriloop service over HTTP: the interact API with safe retries, and the reads.
//
// A request that fails with a network error, 500, 503 or a busy 409 (Retry-After) is sent
// again unchanged, with the same requestId, after a growing pause: the service answers a
// repeated request with its stored answer, so a retry never makes a second step.

export class ServiceError extends Error {
  constructor(message, { status = 0, body = null, retryable = false } = {}) {
    super(message);
    this.status = status;
    this.body = body;
    this.retryable = retryable;
  }
}

const RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000, 8000, 8000, 8000];
const TASK_STATUSES = new Set(["executing", "completed", "failed", "cancelled"]);
const ACTION_KINDS = new Set([
  "click", "set_value", "select_option", "press", "navigate", "go_back", "refresh", "scroll",
  "wait", "finish", "fail",
]);

function headers(settings) {
  const h = { "Content-Type": "application/json" };
  if (settings.apiKey) h.Authorization = `Bearer ${settings.apiKey}`;
  return h;
}

function url(settings, path) {
  return settings.serviceUrl.replace(/\/+$/, "") + path;
}

async function readJson(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function detailOf(body, response) {
  if (body && typeof body.detail === "string") return body.detail;
  if (body && typeof body.message === "string") return body.message;
  return `HTTP ${response.status}`;
}

/** One HTTP call; a ServiceError says what went wrong in words a user can act on. */
export async function call(settings, method, path, payload, { timeoutMs = 180000 } = {}) {
  let response;
  try {
    response = await fetch(url(settings, path), {
      method,
      headers: headers(settings),
      body: payload === undefined ? undefined : JSON.stringify(payload),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    throw new ServiceError(
      `the veriloop service at ${settings.serviceUrl} is unreachable (${error.name}: ${error.message})`,
      { retryable: true },
    );
  }
  const body = await readJson(response);
  if (response.ok) {
    if (body === null) {
      throw new ServiceError(`the service at ${settings.serviceUrl} answered ${path} with something that is not JSON`, { status: response.status });
    }
    return body;
  }
  const detail = detailOf(body, response);
  if (response.status === 401) {
    throw new ServiceError(`the service refused the API key (401: ${detail}); set the right key on the options page`, { status: 401, body });
  }
  const busy = response.status === 409 && response.headers.get("Retry-After") !== null;
  // A service with no model answers 503 "no_model": waiting does not cure that, so it is not retried.
  const outage = (response.status === 503 && body?.code !== "no_model") || response.status === 500;
  const retryable = outage || busy;
  const error = new ServiceError(`the service answered ${response.status}: ${detail}`, { status: response.status, body, retryable });
  error.retryAfterMs = Number(response.headers.get("Retry-After") || 0) * 1000;
  throw error;
}

/** POST /api/agent/interact, sent again unchanged on a retryable failure; `onRetry(error, delayMs)` is told. */
export async function interact(settings, body, { onRetry = () => {}, shouldStop = () => false } = {}) {
  for (let attempt = 0; ; attempt++) {
    try {
      return checkAnswer(await call(settings, "POST", "/api/agent/interact", body));
    } catch (error) {
      if (!(error instanceof ServiceError) || !error.retryable || attempt >= RETRY_DELAYS_MS.length || shouldStop()) {
        throw error;
      }
      const delay = Math.min(Math.max(RETRY_DELAYS_MS[attempt], error.retryAfterMs || 0), 10000);
      onRetry(error, delay);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** An interact answer we can act on, or a ServiceError: never a guess from a malformed one. */
export function checkAnswer(answer) {
  const bad = (why) => new ServiceError(`the service answered something the extension cannot use (${why}); no action was taken`);
  if (!answer || typeof answer !== "object") throw bad("not an object");
  if (typeof answer.taskId !== "string" || !answer.taskId) throw bad("no taskId");
  if (!Number.isInteger(answer.stepIndex) || answer.stepIndex < 0) throw bad("no stepIndex");
  if (typeof answer.action !== "string") throw bad("no action");
  if (!TASK_STATUSES.has(answer.status)) throw bad(`status ${JSON.stringify(answer.status)}`);
  const parsed = answer.parsedAction;
  if (!parsed || !ACTION_KINDS.has(parsed.kind)) throw bad(`action ${JSON.stringify(answer.action).slice(0, 80)}`);
  if (parsed.elementId != null && !(Number.isInteger(parsed.elementId) && parsed.elementId >= 0)) throw bad("element id");
  return answer;
}

export const health = (settings) => call(settings, "GET", "/healthz", undefined, { timeoutMs: 10000 });
export const taskDetail = (settings, taskId) => call(settings, "GET", `/api/tasks/${encodeURIComponent(taskId)}`, undefined, { timeoutMs: 30000 });
/** POST /api/tasks/{taskId}/cancel: the service takes no more steps for the task. */
export const cancelTask = (settings, taskId) =>
  call(settings, "POST", `/api/tasks/${encodeURIComponent(taskId)}/cancel`, undefined, { timeoutMs: 90000 });
export const activeTask = (settings, sessionId, pageUrl) =>
  call(settings, "GET", `/api/session/${encodeURIComponent(sessionId)}/task/active?url=${encodeURIComponent(pageUrl)}`, undefined, { timeoutMs: 30000 });
