// The console's own script (CSP: no inline script). CSRF for htmx and fetch comes from <body data-csrf>.
"use strict";
(function () {
  const csrf = document.body.dataset.csrf;
  document.body.addEventListener("htmx:configRequest", (event) => {
    event.detail.headers["X-CSRF-Token"] = csrf;
  });

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const text = document.getElementById(button.dataset.copy).textContent;
    const done = () => { button.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => { selectText(button.dataset.copy); });
    } else {
      selectText(button.dataset.copy);
      button.textContent = "Selected: press Ctrl+C";
    }
  });

  function selectText(id) {
    const range = document.createRange();
    range.selectNodeContents(document.getElementById(id));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  // Chunked, resumable upload through the console's proxy (/media/uploads...). The upload key is derived
  // from the file (name, size, last change), so choosing the same file after a reload resumes its session.
  const form = document.getElementById("upload-form");
  if (!form) return;
  const CHUNK_BYTES = 1024 * 1024;
  const progress = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  const cancel = document.getElementById("upload-cancel");
  const start = document.getElementById("upload-start");
  let controller = null;

  async function call(method, url, body, headers) {
    const response = await fetch(url, {
      method, body, headers: { "X-CSRF-Token": csrf, ...(headers || {}) },
      credentials: "same-origin", signal: controller.signal,
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.code || ("http_" + response.status));
    return answer;
  }

  async function uploadKey(file) {
    const text = `${file.name}|${file.size}|${file.lastModified}`;
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
    return "web-" + Array.from(new Uint8Array(digest).slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function show(percent, text) {
    progress.value = percent;
    progress.textContent = `${percent}%`;
    status.textContent = text;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = form.elements.file.files[0];
    if (!file) return;
    controller = new AbortController();
    cancel.disabled = false;
    start.disabled = true;
    try {
      const key = (typeof crypto.subtle === "object") ? await uploadKey(file) : "web-" + file.size + "-" + file.lastModified;
      const session = await call("POST", "/media/uploads", JSON.stringify({
        upload_key: key, total_bytes: file.size, chunk_bytes: CHUNK_BYTES,
        title: form.elements.title.value || file.name.slice(0, 200), content_type: file.type || null,
      }), { "Content-Type": "application/json" });
      const received = new Set(session.received);
      const size = session.chunk_bytes;
      if (received.size) show(Math.round(100 * received.size / session.chunk_count), "resuming");
      for (let index = 0; index < session.chunk_count; index++) {
        if (received.has(index)) continue;
        const chunk = file.slice(index * size, Math.min(file.size, (index + 1) * size));
        await call("PUT", `/media/uploads/${session.session_id}/chunks/${index}`, chunk,
          { "Content-Type": "application/octet-stream" });
        received.add(index);
        show(Math.round(100 * received.size / session.chunk_count), `uploading ${received.size}/${session.chunk_count}`);
      }
      const done = await call("POST", `/media/uploads/${session.session_id}/complete`);
      show(100, "uploaded");
      window.location.assign(`/media/${done.material_id}`);
    } catch (error) {
      show(progress.value, error.name === "AbortError" ? "cancelled (choose the file again to resume)" : `failed: ${error.message}`);
    } finally {
      cancel.disabled = true;
      start.disabled = false;
    }
  });
  cancel.addEventListener("click", () => { if (controller) controller.abort(); });
})();
