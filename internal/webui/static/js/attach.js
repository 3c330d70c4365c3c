// Files in messages. Attachments are the files a person attaches to the
// message they write (by the button's file chooser, by pasting an image, by
// dropping files): each uploads at once with POST /api/v1/files and shows as
// a chip with a thumbnail or its name until the message is sent with their
// file parts. FileViews shows the file parts of the messages: an image as a
// thumbnail, another file as a download link. Both fetch with the bearer
// token, so images are shown from blob URLs, never from a bare <img src>.

import { APIError } from "./api.js";
import { h } from "./dom.js";

// accept hints the file chooser at the kinds the server takes; the server
// decides from the bytes.
const accept = "image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain,text/markdown,text/csv,application/json,.md,.markdown,.csv,.json,.txt";

// kinds names the kinds of files the server takes, for its 415.
const kinds = "images, PDF, text, Markdown, JSON, CSV";

// bytes writes a size for reading: 812 bytes, 14.2 KB, 20 MB.
export function bytes(n) {
  const units = [["MB", 1 << 20], ["KB", 1 << 10]];
  for (const [unit, size] of units) {
    if (n >= size) {
      const v = n / size;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
    }
  }
  return `${n} ${n === 1 ? "byte" : "bytes"}`;
}

// uploadError says in plain words why name could not be uploaded.
export function uploadError(name, err) {
  const d = err.details || {};
  switch (err.status) {
    case 413: {
      const limit = d.limit || d.max_bytes;
      return `${name} is larger than the ${limit ? bytes(limit) : "server's"} limit.`;
    }
    case 415:
      return `${name}: this kind of file can't be attached (${kinds} can).`;
    case 429:
      if (err.code === "quota_exceeded" && d.quota === "max_file_bytes") {
        return `${name}: your files would take more than your storage quota of ${bytes(d.limit)}. ` +
          "Delete files you no longer need, or ask an admin to raise it.";
      }
      return `${name}: ${err.message}`;
    case 0:
      return `${name} could not be uploaded: the connection to the server broke.`;
  }
  return `${name} could not be uploaded: ${err.message}`;
}

// upload sends file with POST /api/v1/files; onProgress gets the share
// sent (0..1, or null when unknown). XMLHttpRequest, unlike fetch, reports
// the upload's progress. It returns {done, abort}: done resolves with the
// file's metadata or rejects with an APIError.
function upload(api, file, onProgress) {
  const xhr = new XMLHttpRequest();
  const done = new Promise((resolve, reject) => {
    xhr.open("POST", "/api/v1/files");
    xhr.setRequestHeader("Authorization", `Bearer ${api.token}`);
    xhr.upload.onprogress = (e) => onProgress(e.lengthComputable ? e.loaded / e.total : null);
    xhr.onload = () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = { error: { code: "bad_response", message: xhr.responseText.slice(0, 200) || `HTTP ${xhr.status}` } };
      }
      if (xhr.status === 201) return resolve(data);
      const err = new APIError(xhr.status, data);
      if (xhr.status === 401) api.onUnauthorized(err);
      reject(err);
    };
    xhr.onerror = () => reject(new APIError(0, { error: { code: "network", message: "the connection broke" } }));
    xhr.onabort = () => reject(new APIError(0, { error: { code: "aborted", message: "removed" } }));
    const form = new FormData();
    form.append("file", file, file.name);
    xhr.send(form);
  });
  return { done, abort: () => xhr.abort() };
}

// Attachments are the files attached to the message being written. els
// are its elements: list (a <ul> for the chips), input (a hidden file
// input), button (opens the chooser), zone (where files may be dropped),
// paste (the text area an image may be pasted into); onError(text) shows
// what went wrong ("" clears it).
export class Attachments {
  constructor(api, els, onError) {
    this.api = api;
    this.els = els;
    this.onError = onError;
    this.items = [];
    this.errors = [];
    els.input.accept = accept;
    els.button.addEventListener("click", () => els.input.click());
    els.input.addEventListener("change", () => {
      this.add([...els.input.files]);
      els.input.value = ""; // choosing the same file again fires change again
    });
    els.paste.addEventListener("paste", (e) => this.paste(e));
    this.dropOnto(els.zone);
    guardWindow();
  }

  get count() { return this.items.length; }

  // paste attaches the files of a paste (a screenshot, an image copied
  // from a page) when it holds no text: a paste from a spreadsheet carries
  // its cells as text and as an image, and the text is what was meant.
  paste(e) {
    const dt = e.clipboardData;
    if (!dt || !dt.files.length || dt.types.includes("text/plain")) return;
    e.preventDefault();
    this.add([...dt.files]);
  }

  dropOnto(zone) {
    const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
    zone.addEventListener("dragover", (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = "copy";
      zone.classList.add("dropping");
    });
    zone.addEventListener("dragleave", (e) => {
      if (!zone.contains(e.relatedTarget)) zone.classList.remove("dropping");
    });
    zone.addEventListener("drop", (e) => {
      zone.classList.remove("dropping");
      if (!hasFiles(e)) return;
      e.preventDefault();
      e.stopPropagation();
      this.add([...e.dataTransfer.files]);
    });
  }

  // add attaches files: each shows as a chip at once and uploads.
  add(files) {
    if (!files.length) return;
    this.errors = [];
    this.onError("");
    for (const file of files) {
      const name = file.name || "pasted file";
      const item = { name, file: null, state: "uploading", preview: "" };
      const bar = h("progress", { class: "attachment-progress", max: 1, "aria-label": `Uploading ${name}` });
      const thumb = file.type.startsWith("image/")
        ? h("img", { class: "attachment-thumb", alt: name, src: (item.preview = URL.createObjectURL(file)) })
        : h("span", { class: "attachment-icon", "aria-hidden": "true" }, "📄");
      item.li = h("li", { class: "attachment", dataset: { state: "uploading", name } },
        thumb,
        h("span", { class: "attachment-name", title: name }, name),
        h("span", { class: "attachment-size muted" }, bytes(file.size)),
        bar,
        h("button", { type: "button", class: "attachment-remove icon-button", "aria-label": `Remove ${name}`, title: `Remove ${name}`,
          onclick: () => this.remove([item]) }, "×"));
      const up = upload(this.api, file, (share) => {
        if (share == null) bar.removeAttribute("value");
        else bar.value = share;
      });
      item.abort = up.abort;
      item.done = up.done.then((f) => {
        item.file = f;
        item.state = "ready";
        item.li.dataset.state = "ready";
        item.li.dataset.fileId = f.id;
        bar.remove();
      }, (err) => {
        item.state = "failed";
        item.error = uploadError(name, err);
        if (!this.items.includes(item)) return; // removed while it uploaded
        this.remove([item]);
        this.errors.push(item.error);
        this.onError(this.errors.join(" "));
      });
      this.items.push(item);
      this.els.list.append(item.li);
    }
    this.els.list.hidden = false;
  }

  // remove takes items off the message (an upload under way stops).
  remove(items) {
    for (const item of items) {
      const i = this.items.indexOf(item);
      if (i < 0) continue;
      this.items.splice(i, 1);
      if (item.state === "uploading") item.abort();
      if (item.preview) URL.revokeObjectURL(item.preview);
      item.li.remove();
    }
    this.els.list.hidden = this.items.length === 0;
  }

  clear() {
    this.remove([...this.items]);
    this.errors = [];
  }

  // take waits for the uploads of the attached files and returns their
  // file parts, with the items to remove once the message was sent; an
  // upload that failed meanwhile throws its error, so that nothing is
  // sent without it.
  async take() {
    const items = [...this.items];
    await Promise.all(items.map((it) => it.done));
    const failed = items.filter((it) => it.state === "failed");
    if (failed.length) throw new Error(failed.map((it) => it.error).join(" "));
    return {
      items,
      parts: items.map((it) => ({ type: "file", file_id: it.file.id })),
    };
  }
}

// inputNames are the kinds of Model inputs as a person names them.
const inputNames = { text: "text", image: "images", pdf: "PDFs" };

// refusal says in plain words why the server refused a message for one of
// its files (the chat's model cannot take that kind), naming the file as
// attached; "" when err is not such a refusal.
export function refusal(err, items) {
  const d = (err && err.details) || {};
  if (!err || err.status !== 400 || err.code !== "unsupported_input" || !d.model || !d.kind) return "";
  const item = (items || []).find((it) => it.file && it.file.id === d.file_id);
  const name = item ? item.name : "A file";
  const takes = (d.inputs || []).map((k) => inputNames[k] || k).join(", ");
  return `${name} can't be sent: the model ${d.model} does not take ${inputNames[d.kind] || d.kind}` +
    `${takes ? ` (it takes ${takes})` : ""}. Remove it to send the message, or use another model.`;
}

// content builds a message's content: the text alone as a string, or the
// text (when there is any) and the file parts.
export function content(text, fileParts) {
  if (!fileParts.length) return text;
  return [...(text.trim() ? [{ type: "text", text }] : []), ...fileParts];
}

let guarded = false;

// guardWindow keeps a file dropped beside the drop zones from replacing
// the page (the browser would open it, and the chat would be left).
function guardWindow() {
  if (guarded) return;
  guarded = true;
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (e) => {
      if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) e.preventDefault();
    });
  }
}

// maxCached bounds the blob URLs FileViews keeps (the oldest are revoked).
const maxCached = 200;

// FileViews shows the file parts of messages. They are read through their
// chat (GET /chats/{id}/files/{file_id}/content), which serves a message's
// file even after the file itself was deleted. The bytes are fetched once
// per file (an image's when it comes into view) and kept as blob URLs.
export class FileViews {
  constructor(api) {
    this.api = api;
    this.blobs = new Map(); // content path → Promise of a blob URL
    this.observer = new IntersectionObserver((entries) => {
      for (const e of entries) {
        if (!e.isIntersecting) continue;
        this.observer.unobserve(e.target);
        e.target.dispatchEvent(new Event("parley-load"));
      }
    }, { rootMargin: "300px" });
  }

  path(chatId, fileId) {
    return this.api.chatPath(chatId, `/files/${encodeURIComponent(fileId)}/content`);
  }

  // blobURL fetches a file's bytes, once.
  blobURL(path) {
    let p = this.blobs.get(path);
    if (!p) {
      p = this.fetch(path, "GET").then((res) => res.blob()).then((b) => URL.createObjectURL(b));
      p.catch(() => this.blobs.delete(path)); // try again next time
      this.blobs.set(path, p);
      if (this.blobs.size > maxCached) {
        const [oldest, q] = this.blobs.entries().next().value;
        this.blobs.delete(oldest);
        q.then((u) => URL.revokeObjectURL(u), () => {});
      }
    }
    return p;
  }

  // fetch requests path with the token; an error answer throws.
  async fetch(path, method) {
    let res;
    try {
      res = await fetch(path, { method, headers: this.api.headers() });
    } catch (err) {
      throw new Error(`the server could not be reached (${err.message})`);
    }
    if (!res.ok) {
      let body = null;
      try {
        body = await res.json();
      } catch {
        // not the API's error body (a HEAD has none)
      }
      const err = new APIError(res.status, body);
      if (res.status === 401) this.api.onUnauthorized(err);
      throw err;
    }
    return res;
  }

  // render is the element of file part p of a message of chat chatId.
  render(chatId, p) {
    const name = p.name || p.file_id || "file";
    const path = this.path(chatId, p.file_id);
    if ((p.media_type || "").startsWith("image/")) return this.image(path, p, name);
    return this.download(path, p, name);
  }

  // image is a thumbnail that opens the image full size.
  image(path, p, name) {
    const img = h("img", { class: "file-thumb", alt: name });
    const caption = h("span", { class: "file-name muted" }, name);
    const box = h("a", { class: "file-part file-image", dataset: { fileId: p.file_id, state: "loading" } }, img, caption);
    box.addEventListener("parley-load", async () => {
      try {
        const url = await this.blobURL(path);
        img.src = url;
        box.href = url;
        box.target = "_blank";
        box.title = `Open ${name}`;
        box.dataset.state = "loaded";
      } catch (err) {
        box.dataset.state = "failed";
        caption.textContent = `${name} (could not be loaded: ${err.message})`;
      }
    }, { once: true });
    this.observer.observe(box);
    return box;
  }

  // download is a link, with the file's name and size, that saves it.
  download(path, p, name) {
    const size = h("span", { class: "file-size muted" });
    const link = h("a", { class: "file-part file-download", href: "#", dataset: { fileId: p.file_id },
      "aria-label": `Download ${name}` },
    h("span", { class: "file-icon", "aria-hidden": "true" }, "📄"), h("span", { class: "file-name" }, name), size);
    const error = h("span", { class: "file-error error", role: "alert", hidden: true });
    link.addEventListener("click", async (e) => {
      e.preventDefault();
      try {
        const a = h("a", { href: await this.blobURL(path), download: name, hidden: true });
        document.body.append(a);
        a.click();
        a.remove();
        error.hidden = true;
      } catch (err) {
        error.textContent = `${name} could not be downloaded: ${err.message}`;
        error.hidden = false;
      }
    });
    this.fetch(path, "HEAD").then((res) => {
      const n = Number(res.headers.get("Content-Length"));
      if (n > 0) {
        size.textContent = ` (${bytes(n)})`;
        link.setAttribute("aria-label", `Download ${name} (${bytes(n)})`);
      }
    }, () => {}); // the size is a nicety: the link says the rest when clicked
    return h("span", { class: "file-part-box" }, link, error);
  }
}
