// Editors for a dynamic tool's result, made from the tool's output_schema:
// a form when the schema is an object of plain fields (or one plain
// value), else a JSON editor. Either way the value is checked against the
// schema here (the server checks it again) before it is sent.

import { h } from "./dom.js";
import { Validator } from "../vendor/json-schema/index.js";

let seq = 0;

const plainTypes = new Set(["string", "number", "integer", "boolean"]);

function plain(s) {
  return s && typeof s === "object" && (Array.isArray(s.enum) || plainTypes.has(s.type));
}

function formable(schema) {
  if (!schema || typeof schema !== "object") return false;
  if (plain(schema)) return true;
  return schema.type === "object" && schema.properties && typeof schema.properties === "object" &&
    Object.keys(schema.properties).length > 0 &&
    Object.values(schema.properties).every(plain);
}

// resultEditor returns {el, read} for one call's result; read() gives
// {value} or {error}. name names the tool in labels.
export function resultEditor(schema, name) {
  const validator = schema ? new Validator(schema, "2020-12", false) : null;
  const errorEl = h("p", { class: "json-error error", role: "alert", hidden: true });
  const check = (value) => {
    if (!validator) return { value };
    const r = validator.validate(value);
    if (r.valid) return { value };
    const first = r.errors.filter((e) => e.instanceLocation !== "#" || r.errors.length === 1).pop() || r.errors[0];
    const where = first.instanceLocation.replace(/^#/, "") || "the result";
    return { error: `${where}: ${first.error}` };
  };
  const done = (r) => {
    errorEl.textContent = r.error || "";
    errorEl.hidden = !r.error;
    return r;
  };
  if (formable(schema)) {
    const form = schema.type === "object" && !plain(schema) ? objectForm(schema) : valueForm(schema, name);
    return { el: h("div", { class: "result-form" }, form.el, errorEl), read: () => {
      const r = form.read();
      return done(r.error ? r : check(r.value));
    } };
  }
  const id = `json-${++seq}`;
  const label = schema ? "Result (JSON, checked against the tool's output schema)" : "Result (JSON, or plain text, sent as a string)";
  const area = h("textarea", { id, class: "json-editor", rows: 4, spellcheck: "false", "aria-describedby": `${id}-hint` });
  const hint = schema ? h("details", { class: "schema-hint", id: `${id}-hint` }, h("summary", {}, "Output schema"), h("pre", {}, JSON.stringify(schema, null, 2))) : h("span", { id: `${id}-hint`, hidden: true });
  return {
    el: h("div", { class: "result-json" }, h("label", { for: id }, label), area, hint, errorEl),
    read: () => {
      const text = area.value;
      let value;
      try {
        value = JSON.parse(text);
      } catch (err) {
        if (schema) return done({ error: `Not valid JSON: ${err.message}` });
        value = text;
      }
      return done(check(value));
    },
  };
}

// field is one input for a plain schema; read() gives {value} (undefined
// when left empty) or {error}.
function field(key, schema, required) {
  const id = `field-${++seq}`;
  const title = schema.title || key;
  const label = h("label", { for: id }, title, required ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null);
  const desc = schema.description ? h("span", { class: "field-desc muted", id: `${id}-desc` }, schema.description) : null;
  const common = { id, name: key, "aria-describedby": desc ? `${id}-desc` : null, required };
  let input;
  let read;
  if (Array.isArray(schema.enum)) {
    input = h("select", common,
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
    read = () => (input.value === "" ? { value: undefined } : { value: schema.enum[Number(input.value)] });
  } else if (schema.type === "boolean") {
    input = h("input", { ...common, type: "checkbox", required: false });
    read = () => ({ value: input.checked });
    return { el: h("div", { class: "field check" }, input, label, desc), read };
  } else if (schema.type === "number" || schema.type === "integer") {
    input = h("input", { ...common, type: "number", step: schema.type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum });
    read = () => {
      if (input.value.trim() === "") return { value: undefined };
      const n = Number(input.value);
      if (!Number.isFinite(n)) return { error: `${title}: not a number` };
      return { value: n };
    };
  } else {
    const long = !schema.maxLength || schema.maxLength > 200;
    input = long ? h("textarea", { ...common, rows: 2 }) : h("input", { ...common, type: "text" });
    read = () => ({ value: input.value === "" && !required ? undefined : input.value });
  }
  return { el: h("div", { class: "field" }, label, desc, input), read };
}

function objectForm(schema) {
  const req = new Set(schema.required || []);
  const fields = Object.entries(schema.properties).map(([k, s]) => [k, field(k, s, req.has(k))]);
  return {
    el: h("div", { class: "fields" }, fields.map(([, f]) => f.el)),
    read: () => {
      const out = {};
      for (const [k, f] of fields) {
        const r = f.read();
        if (r.error) return r;
        if (r.value !== undefined) out[k] = r.value;
      }
      return { value: out };
    },
  };
}

function valueForm(schema, name) {
  const f = field("value", { title: `Result of ${name}`, ...schema }, true);
  return {
    el: h("div", { class: "fields" }, f.el),
    read: () => {
      const r = f.read();
      if (r.error) return r;
      return { value: r.value === undefined ? "" : r.value };
    },
  };
}
