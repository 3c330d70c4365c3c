// Editors for a dynamic tool's result, made from the tool's output_schema:
// a form when the schema is an object of plain fields (or one plain
// value), else a JSON editor. Either way the value is checked against the
// schema here (the server checks it again) before it is sent. What is
// wrong is said once per field, in words (see schemaerrors.js): next to
// the field in a form, as a list under the JSON editor.

import { h } from "./dom.js";
import { Validator } from "../vendor/json-schema/index.js";
import { readableErrors } from "./schemaerrors.js";

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
// {value}, or {error} once the editor shows what is wrong (and has put
// the focus on the first field at fault). name names the tool in labels.
export function resultEditor(schema, name) {
  const validator = schema ? new Validator(schema, "2020-12", false) : null;
  // problems checks value against the schema: [{path, message}].
  const problems = (value, nameOf) => {
    if (!validator) return [];
    const r = validator.validate(value);
    return r.valid ? [] : readableErrors(r.errors, schema, nameOf);
  };
  if (formable(schema)) {
    const form = schema.type === "object" && !plain(schema) ? objectForm(schema) : valueForm(schema, name);
    return { el: form.el, read: () => form.read(problems) };
  }
  const id = `json-${++seq}`;
  const label = schema ? "Result (JSON, checked against the tool's output schema)" : "Result (JSON, or plain text, sent as a string)";
  const errorEl = h("ul", { class: "json-error error", id: `${id}-errors`, role: "alert", hidden: true });
  const area = h("textarea", { id, class: "json-editor", rows: 4, spellcheck: "false", "aria-describedby": `${id}-hint ${id}-errors` });
  const hint = schema ? h("details", { class: "schema-hint", id: `${id}-hint` }, h("summary", {}, "Output schema"), h("pre", {}, JSON.stringify(schema, null, 2))) : h("span", { id: `${id}-hint`, hidden: true });
  const show = (messages) => {
    errorEl.replaceChildren(...messages.map((m) => h("li", {}, m)));
    errorEl.hidden = messages.length === 0;
    area.setAttribute("aria-invalid", String(messages.length > 0));
    if (messages.length) area.focus();
    return messages.length ? { error: messages.join("; ") } : null;
  };
  return {
    el: h("div", { class: "result-json" }, h("label", { for: id }, label), area, hint, errorEl),
    read: () => {
      const text = area.value;
      let value;
      try {
        value = JSON.parse(text);
      } catch (err) {
        if (schema) return show([`The result is not valid JSON: ${err.message}`]);
        value = text;
      }
      const nameOf = (path) => (path.length ? path.join(".") : "The result");
      return show(problems(value, nameOf).map((p) => p.message)) || { value };
    },
  };
}

// field is one input for a plain schema, labelled title. read() gives
// {value} (undefined when left empty) or {error} for what the input
// itself holds wrong (a number that is not one); say(message) shows
// what is wrong with it ("" for nothing).
function field(key, schema, required) {
  const id = `field-${++seq}`;
  const title = schema.title || key;
  const label = h("label", { for: id }, title, required ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null);
  const desc = schema.description ? h("span", { class: "field-desc muted", id: `${id}-desc` }, schema.description) : null;
  const errorEl = h("p", { class: "field-error error", id: `${id}-error`, hidden: true });
  const described = [desc ? `${id}-desc` : "", `${id}-error`].filter(Boolean).join(" ");
  const common = { id, name: key, "aria-describedby": described, "aria-required": required ? "true" : null };
  let input;
  let read;
  let el;
  if (Array.isArray(schema.enum)) {
    input = h("select", common,
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
    read = () => (input.value === "" ? { value: undefined } : { value: schema.enum[Number(input.value)] });
  } else if (schema.type === "boolean") {
    input = h("input", { ...common, type: "checkbox" });
    read = () => ({ value: input.checked });
    el = h("div", { class: "field check" }, input, label, desc, errorEl);
  } else if (schema.type === "number" || schema.type === "integer") {
    input = h("input", { ...common, type: "number", step: schema.type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum });
    read = () => {
      // What the browser cannot read as a number, it reports as empty.
      if (input.validity.badInput) return { error: `${title} must be ${schema.type === "integer" ? "a whole number" : "a number"}` };
      if (input.value.trim() === "") return { value: undefined };
      return { value: Number(input.value) };
    };
  } else {
    const long = !schema.maxLength || schema.maxLength > 200;
    input = long ? h("textarea", { ...common, rows: 2 }) : h("input", { ...common, type: "text" });
    read = () => ({ value: input.value === "" && !required ? undefined : input.value });
  }
  el = el || h("div", { class: "field" }, label, desc, input, errorEl);
  const say = (message) => {
    errorEl.textContent = message;
    errorEl.hidden = !message;
    input.setAttribute("aria-invalid", String(Boolean(message)));
  };
  return { el, read, say, input, title };
}

// report shows each field's message next to it, and the rest in
// errorEl; it focuses the first field at fault and returns {error}, or
// null when nothing is wrong.
function report(fields, byField, rest, errorEl) {
  let first = null;
  for (const [k, f] of fields) {
    const m = byField.get(k) || "";
    f.say(m);
    if (m && !first) first = f.input;
  }
  errorEl.replaceChildren(...rest.map((m) => h("li", {}, m)));
  errorEl.hidden = rest.length === 0;
  const all = [...byField.values(), ...rest];
  if (!all.length) return null;
  if (first) first.focus();
  return { error: all.join("; ") };
}

function objectForm(schema) {
  const req = new Set(schema.required || []);
  const fields = Object.entries(schema.properties).map(([k, s]) => [k, field(k, s, req.has(k))]);
  const titles = new Map(fields.map(([k, f]) => [k, f.title]));
  const errorEl = h("ul", { class: "form-error error", role: "alert", hidden: true });
  return {
    el: h("div", { class: "result-form" }, h("div", { class: "fields" }, fields.map(([, f]) => f.el)), errorEl),
    read: (problems) => {
      const out = {};
      const byField = new Map();
      for (const [k, f] of fields) {
        const r = f.read();
        if (r.error) byField.set(k, r.error);
        else if (r.value !== undefined) out[k] = r.value;
      }
      const rest = [];
      const nameOf = (path) => (path.length ? titles.get(path[0]) || path.join(".") : "The result");
      for (const p of problems(out, nameOf)) {
        if (p.path.length && titles.has(p.path[0])) {
          if (!byField.has(p.path[0])) byField.set(p.path[0], p.message);
        } else {
          rest.push(p.message);
        }
      }
      return report(fields, byField, rest, errorEl) || { value: out };
    },
  };
}

function valueForm(schema, name) {
  const f = field("value", { title: `Result of ${name}`, ...schema }, true);
  const errorEl = h("ul", { class: "form-error error", role: "alert", hidden: true });
  const fields = [["value", f]];
  return {
    el: h("div", { class: "result-form" }, h("div", { class: "fields" }, f.el), errorEl),
    read: (problems) => {
      const r = f.read();
      const byField = new Map();
      let value;
      if (r.error) {
        byField.set("value", r.error);
      } else {
        value = r.value === undefined ? "" : r.value;
        const p = problems(value, () => f.title)[0];
        if (p) byField.set("value", p.message);
      }
      return report(fields, byField, [], errorEl) || { value };
    },
  };
}
