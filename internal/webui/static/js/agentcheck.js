// Checks the agent form runs as you type, before the server checks the
// same again: tool globs (the syntax of Go's path.Match, which the server
// uses), an output schema (JSON, an object schema, well formed as far as
// the vendored validator can tell), and a line diff of two versions.

import { Validator } from "../vendor/json-schema/index.js";
import { readableErrors } from "./schemaerrors.js";

// globError says what is wrong with one glob in path.Match's syntax, or
// "" when it is well formed.
export function globError(p) {
  if (p === "") return "is empty";
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === "\\") {
      if (i + 1 >= p.length) return "ends with a lone \\";
      i++;
    } else if (c === "[") {
      i++;
      if (p[i] === "^") i++;
      let ranges = 0;
      for (;;) {
        if (i >= p.length) return "has a [ that is not closed";
        if (p[i] === "]" && ranges > 0) break;
        // One character, or a range lo-hi; "-" and "]" need a \ inside.
        const lo = escaped(p, i);
        if (lo.error) return lo.error;
        i = lo.next;
        if (p[i] === "-") {
          const hi = escaped(p, i + 1);
          if (hi.error) return hi.error;
          if (hi.ch < lo.ch) return `has the range ${lo.ch}-${hi.ch}, whose end comes before its start`;
          i = hi.next;
        }
        ranges++;
      }
    }
  }
  return "";
}

// escaped reads one character of a class at i: {ch, next} or {error}.
function escaped(p, i) {
  if (i >= p.length) return { error: "has a [ that is not closed" };
  let c = p[i];
  if (c === "-" || c === "]") return { error: `has a "${c}" in [...] that needs a \\ before it` };
  if (c === "\\") {
    i++;
    if (i >= p.length) return { error: "ends with a lone \\" };
    c = p[i];
  }
  return { ch: c, next: i + 1 };
}

// globMatches reports whether the well-formed glob p matches name.
export function globMatches(p, name) {
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "\\") re += quote(p[++i]);
    else if (c === "[") {
      let j = i + 1;
      let cls = "[";
      if (p[j] === "^") { cls += "^"; j++; }
      while (p[j] !== "]") {
        if (p[j] === "\\") j++;
        cls += p[j] === "-" ? "-" : quote(p[j]);
        j++;
      }
      re += cls + "]";
      i = j;
    } else re += quote(c);
  }
  try {
    return new RegExp(`^${re}$`, "u").test(name);
  } catch {
    return false;
  }
}

function quote(c) { return c.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"); }

// checkGlobs checks a list of globs against the tools the server offers:
// {errors: ["tools[1] …"], unmatched: [glob]}. field names the list.
export function checkGlobs(list, field, toolNames) {
  const errors = [];
  const unmatched = [];
  list.forEach((g, i) => {
    const e = globError(g);
    if (e) errors.push(`${field}[${i}] “${g}” ${e}`);
    else if (toolNames && !toolNames.some((n) => globMatches(g, n))) unmatched.push(g);
  });
  return { errors, unmatched };
}

const simpleTypes = ["array", "boolean", "integer", "null", "number", "object", "string"];

// The shape of a JSON Schema's keywords, as a schema: what the validator
// can check of a schema written by hand. The server compiles it fully.
const sub = { $ref: "#/$defs/schema" };
const subList = { type: "array", minItems: 1, items: sub };
const count = { type: "integer", minimum: 0 };
const schemaShape = {
  type: ["object", "boolean"],
  properties: {
    type: { type: ["string", "array"], items: { enum: simpleTypes } },
    properties: { type: "object", additionalProperties: sub },
    patternProperties: { type: "object", additionalProperties: sub },
    additionalProperties: sub, items: sub, prefixItems: subList, contains: sub, not: sub,
    if: sub, then: sub, else: sub, propertyNames: sub,
    allOf: subList, anyOf: subList, oneOf: subList,
    $defs: { type: "object", additionalProperties: sub },
    definitions: { type: "object", additionalProperties: sub },
    required: { type: "array", items: { type: "string" }, uniqueItems: true },
    enum: { type: "array" },
    $ref: { type: "string" }, $id: { type: "string" }, $schema: { type: "string" },
    title: { type: "string" }, description: { type: "string" }, format: { type: "string" },
    pattern: { type: "string", format: "regex" },
    minimum: { type: "number" }, maximum: { type: "number" },
    exclusiveMinimum: { type: "number" }, exclusiveMaximum: { type: "number" },
    multipleOf: { type: "number", exclusiveMinimum: 0 },
    minLength: count, maxLength: count, minItems: count, maxItems: count,
    minProperties: count, maxProperties: count, uniqueItems: { type: "boolean" },
  },
};
// The root is the shape itself (not a $ref to it), so that the errors at
// the top level name the keyword's value in words.
const metaSchema = { ...schemaShape, $defs: { schema: schemaShape } };
const metaValidator = new Validator(metaSchema, "2020-12", false);

// schemaProblems checks the text of an output schema: [] when it can be
// sent, else what is wrong, in words ("The schema must describe an
// object", "properties.age.type must be one of: …").
export function schemaProblems(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return [`The schema is not valid JSON: ${err.message}`];
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return ["The schema must be a JSON object"];
  if (v.type !== "object") return ['The schema must describe an object ("type": "object")'];
  const r = metaValidator.validate(v);
  const nameOf = (path) => (path.length ? path.join(".") : "The schema");
  const out = r.valid ? [] : readableErrors(r.errors, metaSchema, nameOf).map((p) => p.message);
  walk(v, [], (node, path) => {
    if (typeof node.type === "string" && !simpleTypes.includes(node.type)) {
      out.push(`${nameOf([...path, "type"])} must be one of: ${simpleTypes.join(", ")}`);
    }
    if (typeof node.$ref === "string" && !node.$ref.startsWith("#")) {
      out.push(`${nameOf([...path, "$ref"])} refers outside the schema (only "#…" references are allowed)`);
    }
  });
  return [...new Set(out)];
}

// walk calls fn on every object of the schema v, with its path.
function walk(v, path, fn) {
  if (v === null || typeof v !== "object") return;
  if (!Array.isArray(v)) fn(v, path);
  for (const [k, c] of Object.entries(v)) walk(c, [...path, k], fn);
}

// lineDiff compares two texts line by line (a longest common
// subsequence): [{op: " " | "-" | "+", line}].
export function lineDiff(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  // lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push({ op: " ", line: x[i] }); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: "-", line: x[i++] });
    else out.push({ op: "+", line: y[j++] });
  }
  while (i < n) out.push({ op: "-", line: x[i++] });
  while (j < m) out.push({ op: "+", line: y[j++] });
  return out;
}
