// readableErrors turns the JSON Schema validator's errors into sentences a
// person reads ("temp_c is required", "temp_c must be a number", "unit
// must be one of: c, f"), one per place in the value: the validator
// reports a failing property both where it fails and at every object
// around it, and several keywords may fail at one place.

// The keywords that say what is wrong where it is wrong; the others (a
// property's or an item's schema failed, a subschema had errors) only
// repeat them one level up.
const leaves = new Set([
  "required", "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
  "multipleOf", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
  "minProperties", "maxProperties", "false", "dependentRequired", "dependencies",
]);

// Of several errors at one place the first of these is said.
const rank = ["required", "type", "enum", "const"];

// readableErrors returns [{path, message}], path being the property names
// (and item indexes) down to the place, [] for the value itself. name(path)
// is how a place is called; schema is the schema validated against.
export function readableErrors(errors, schema, name) {
  const found = new Map(); // path joined → {path, message, rank}
  for (const e of errors) {
    if (!leaves.has(e.keyword) && errors.some((o) => leaves.has(o.keyword))) continue;
    let path = pointer(e.instanceLocation);
    if (e.keyword === "required") {
      const m = /required property "(.*)"\.$/.exec(e.error);
      if (m) path = [...path, m[1]];
    }
    const key = JSON.stringify(path);
    const r = rank.indexOf(e.keyword) === -1 ? rank.length : rank.indexOf(e.keyword);
    const old = found.get(key);
    if (old && old.rank <= r) continue;
    found.set(key, { path, rank: r, message: `${name(path)} ${sentence(e, keywordValue(schema, e.keywordLocation))}` });
  }
  return [...found.values()].map(({ path, message }) => ({ path, message }));
}

// sentence says what is wrong, after the name of the place.
function sentence(e, v) {
  const list = (a) => a.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(", ");
  const bare = e.keyword === "required" || e.keyword === "uniqueItems" || e.keyword === "false";
  if (v === undefined && !bare) return `is not valid: ${e.error.replace(/^Instance /, "")}`;
  switch (e.keyword) {
    case "required": return "is required";
    case "type": {
      const types = Array.isArray(v) ? v : [v];
      return `must be ${types.map(typeWords).join(" or ")}`;
    }
    case "enum": if (Array.isArray(v)) return `must be one of: ${list(v)}`; break;
    case "const": if (v !== undefined) return `must be ${list([v])}`; break;
    case "minimum": return `must be at least ${v}`;
    case "maximum": return `must be at most ${v}`;
    case "exclusiveMinimum": return `must be more than ${v}`;
    case "exclusiveMaximum": return `must be less than ${v}`;
    case "multipleOf": return `must be a multiple of ${v}`;
    case "minLength": return `must be at least ${v} character${v === 1 ? "" : "s"} long`;
    case "maxLength": return `must be at most ${v} character${v === 1 ? "" : "s"} long`;
    case "pattern": return `must match the pattern ${v}`;
    case "format": return `must be a valid ${v}`;
    case "minItems": return `must have at least ${v} item${v === 1 ? "" : "s"}`;
    case "maxItems": return `must have at most ${v} item${v === 1 ? "" : "s"}`;
    case "uniqueItems": return "must not repeat an item";
    case "false": return "is not allowed here";
  }
  // Not one of the above, or its schema could not be read: the
  // validator's own words, about this place.
  return `is not valid: ${e.error.replace(/^Instance /, "")}`;
}

function typeWords(t) {
  return { string: "text", number: "a number", integer: "a whole number", boolean: "true or false",
    object: "an object", array: "a list", null: "empty (null)" }[t] || t;
}

// pointer splits a JSON Pointer fragment ("#/a/0") into its segments.
function pointer(loc) {
  return String(loc || "#").replace(/^#/, "").split("/").slice(1).map((s) => {
    let d = s;
    try {
      d = decodeURIComponent(s);
    } catch {
      // keep it as it is
    }
    return d.replace(/~1/g, "/").replace(/~0/g, "~");
  });
}

// keywordValue reads the value of the keyword at loc in schema, undefined
// where the way there leaves the schema (through a $ref, say).
function keywordValue(schema, loc) {
  let v = schema;
  for (const seg of pointer(loc)) {
    if (v === null || typeof v !== "object" || !(seg in v)) return undefined;
    v = v[seg];
  }
  return v;
}
