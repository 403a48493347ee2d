// MediDesk demo: a small patient-records admin backed by the demo server's JSON API.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  let activeView = "patients";

  function tick() {
    $("clock").textContent = new Date().toLocaleTimeString("en-GB");
  }

  function toast(message) {
    const note = document.createElement("div");
    note.className = "toast";
    note.setAttribute("role", "status");
    note.textContent = message;
    $("toasts").appendChild(note);
    setTimeout(() => note.remove(), 4000);
  }

  async function api(path, options) {
    const response = await fetch(path, Object.assign({ headers: { "Content-Type": "application/json" } }, options));
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  function showView(view) {
    if (view === activeView) return; // the current tab is already showing
    activeView = view;
    for (const tab of document.querySelectorAll("[role=tab]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.view === view));
    }
    $("view-patients").hidden = view !== "patients";
    $("view-settings").hidden = view !== "settings";
  }

  function renderPatients(patients, query) {
    const rows = $("patient-rows");
    rows.replaceChildren(...patients.map((p) => {
      const row = document.createElement("tr");
      for (const value of [p.name, p.dob || "—", p.consent ? "yes" : "no"]) {
        const cell = document.createElement("td");
        cell.textContent = value;
        row.appendChild(cell);
      }
      return row;
    }));
    const count = `${patients.length} patient${patients.length === 1 ? "" : "s"}`;
    $("result-count").textContent = query ? `${count} matching "${query}"` : count;
  }

  async function loadPatients(query) {
    const q = (query || "").trim();
    const data = await api(`/api/patients${q ? `?q=${encodeURIComponent(q)}` : ""}`);
    renderPatients(data.patients, q);
  }

  async function savePatient(event) {
    event.preventDefault();
    const form = $("patient-form");
    const error = $("form-error");
    const name = $("patient-name").value.trim();
    if (!name) {
      error.textContent = "Full name is required";
      error.hidden = false;
      return;
    }
    try {
      await api("/api/patients", {
        method: "POST",
        body: JSON.stringify({ name, dob: $("patient-dob").value || null, consent: $("patient-consent").checked }),
      });
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
      return;
    }
    form.reset();
    form.hidden = true;
    error.hidden = true;
    toast(`Patient ${name} saved`);
    await loadPatients($("search").value);
  }

  async function saveSetting(event) {
    const select = event.target;
    const settings = await api("/api/settings", { method: "PUT", body: JSON.stringify({ [select.name]: select.value }) });
    document.body.classList.toggle("dark", settings.theme === "dark");
    toast("Settings saved");
  }

  async function loadSettings() {
    const settings = await api("/api/settings");
    $("theme").value = settings.theme;
    $("page-size").value = String(settings.page_size);
    document.body.classList.toggle("dark", settings.theme === "dark");
  }

  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    loadPatients($("search").value);
  });
  $("new-patient").addEventListener("click", () => {
    $("patient-form").hidden = false;
    $("patient-name").focus();
  });
  $("cancel-patient").addEventListener("click", () => {
    $("patient-form").reset();
    $("patient-form").hidden = true;
  });
  $("patient-form").addEventListener("submit", savePatient);
  $("theme").addEventListener("change", saveSetting);
  $("page-size").addEventListener("change", saveSetting);

  tick();
  setInterval(tick, 1000);
  loadPatients("");
  loadSettings();
})();
