// Options: the service URL and API key, saved, then checked with /healthz and one
// authenticated call, with a plain message for each way it can fail.

import { ServiceError, activeTask, health } from "./api.js";
import { loadSettings, saveSettings } from "./settings.js";

const $ = (id) => document.getElementById(id);

/** A plain sentence about whether the extension can work with these settings. */
export async function check(settings) {
  try {
    new URL(settings.serviceUrl);
  } catch {
    return { ok: false, text: `"${settings.serviceUrl}" is not a URL (for example http://127.0.0.1:8000)` };
  }
  let status;
  try {
    status = await health(settings);
  } catch (error) {
    if (error instanceof ServiceError && error.retryable && !error.status) {
      return { ok: false, text: `Cannot reach ${settings.serviceUrl}: is veriloop serve running there?` };
    }
    return { ok: false, text: `${settings.serviceUrl} is not a working veriloop service: ${error.message}` };
  }
  if (status?.status !== "ok") {
    return { ok: false, text: `${settings.serviceUrl} answered /healthz, but not as a veriloop service does` };
  }
  try {
    await activeTask(settings, "veriloop-options-check", settings.serviceUrl);
  } catch (error) {
    if (error.status === 401) {
      return { ok: false, text: settings.apiKey ? "The service refused this API key." : "The service needs an API key." };
    }
    if (error.status !== 404) return { ok: false, text: `The service failed an authenticated call: ${error.message}` };
  }
  const model = status.model;
  if (model && !model.configured) {
    return {
      ok: false,
      text: `The service answers, but it has no model, so no task can run: start it with OPENAI_API_KEY or OPENAI_BASE_URL set, or with veriloop serve --scripted for canned answers.`,
    };
  }
  const which = !model ? "" : model.scripted
    ? `; model: scripted (canned answers from a local playbook, not a real model)`
    : `; model: ${model.name} (${model.baseUrl || "OpenAI"})`;
  const shell = status.planShell ? `; plan shell steps: ${status.planShell}` : "";
  return { ok: true, text: `Connected: veriloop service (${status.database})${which}${shell}; the key is accepted.` };
}

async function init() {
  const settings = await loadSettings();
  $("service-url").value = settings.serviceUrl;
  $("api-key").value = settings.apiKey;
  $("form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const next = { serviceUrl: $("service-url").value.trim(), apiKey: $("api-key").value.trim() };
    await saveSettings(next);
    $("result").textContent = "Saved; checking…";
    const verdict = await check(next);
    $("result").textContent = verdict.text;
    $("result").className = verdict.ok ? "" : "error";
  });
}

init();
