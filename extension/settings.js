// The extension's settings (chrome.storage.local "settings"), shared by the options page,
// the side panel and the service worker.

export const DEFAULT_SERVICE_URL = "http://127.0.0.1:8000";

export async function loadSettings() {
  const { settings } = await chrome.storage.local.get("settings");
  return { serviceUrl: DEFAULT_SERVICE_URL, apiKey: "", ...(settings || {}) };
}

export async function saveSettings(settings) {
  await chrome.storage.local.set({ settings });
}
