#!/usr/bin/env bash
# Refreshes the third-party browser libraries in static/vendor/.
#
# The web UI is served as plain ES modules with no build step, so the
# libraries are committed as files. This script is the only way they change:
# it installs the pinned versions with npm into a temporary directory and
# copies their ES module builds, unmodified, into static/vendor/, together
# with each package's licence. The one derived file is hljs-themes.css, made
# from highlight.js's GitHub light and dark themes (see below).
#
# json-schema/ holds @cfworker/json-schema, a validator that needs no eval.
#
# Usage: internal/webui/vendor.sh   (needs node and npm)
set -euo pipefail

MARKED=marked@18.2.1
DOMPURIFY=dompurify@3.4.18
HLJS=@highlightjs/cdn-assets@11.12.0
JSONSCHEMA=@cfworker/json-schema@4.1.6

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest="$here/static/vendor"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

npm install --prefix "$tmp" --no-audit --no-fund --ignore-scripts \
	"$MARKED" "$DOMPURIFY" "$HLJS" "$JSONSCHEMA" >&2

nm="$tmp/node_modules"

# The installed versions must be exactly the pinned ones.
version() { node -p 'require(process.argv[1]).version' "$nm/$1/package.json"; }
check() { # pkg@version
	local pkg=${1%@*} want=${1##*@} got
	got=$(version "$pkg")
	if [[ $got != "$want" ]]; then
		echo "vendor.sh: $pkg: installed $got, want $want" >&2
		exit 1
	fi
}
check "$MARKED"
check "$DOMPURIFY"
check "$HLJS"
check "$JSONSCHEMA"

# Replace only the files this script writes: static/vendor/ may hold other
# vendored files, which are left alone.
mkdir -p "$dest/LICENSES"
rm -f "$dest"/{marked.esm.js,purify.es.js,highlight.min.js,hljs-themes.css,VERSIONS} \
	"$dest"/LICENSES/{marked.txt,dompurify.txt,dompurify-MPL.txt,highlightjs-cdn-assets.txt,cfworker-json-schema.txt}
rm -rf "$dest/json-schema"

cp "$nm/marked/lib/marked.esm.js" "$dest/marked.esm.js"
# Renamed from .mjs so that every static file server sends it as JavaScript;
# the content is the ES module build as published.
cp "$nm/dompurify/dist/purify.es.mjs" "$dest/purify.es.js"
# The ES module bundle of highlight.js with its common languages.
cp "$nm/@highlightjs/cdn-assets/es/highlight.min.js" "$dest/highlight.min.js"

# JSON Schema validation without code generation (the CSP forbids eval):
# its ES module files, without their source-map comments (the maps are not
# vendored).
mkdir -p "$dest/json-schema"
for f in "$nm/@cfworker/json-schema/dist/esm/"*.js; do
	sed '/^\/\/# sourceMappingURL=/d' "$f" >"$dest/json-schema/$(basename "$f")"
done

cp "$nm/marked/LICENSE" "$dest/LICENSES/marked.txt"
# DOMPurify is dual licensed (Apache-2.0 OR MPL-2.0); keep both texts.
cp "$nm/dompurify/LICENSE" "$dest/LICENSES/dompurify.txt"
cp "$nm/dompurify/LICENSE-MPL" "$dest/LICENSES/dompurify-MPL.txt"
cp "$nm/@highlightjs/cdn-assets/LICENSE" "$dest/LICENSES/highlightjs-cdn-assets.txt"
# The package ships no licence file; its package.json says MIT.
{
	echo "$JSONSCHEMA is published under the MIT licence (its package.json: \"license\": \"$(node -p 'require(process.argv[1]).license' "$nm/@cfworker/json-schema/package.json")\")."
	echo "Copyright (c) Jeremy Danyow and the cfworker contributors; see https://github.com/cfworker/cfworker."
} >"$dest/LICENSES/cfworker-json-schema.txt"

# hljs-themes.css: the GitHub light and dark themes in one file, each scoped
# to the UI theme the app sets as data-theme on <html>. Every selector of the
# light theme gets the prefix ':root:not([data-theme="dark"]) ' and every
# selector of the dark theme ':root[data-theme="dark"] ', so both prefixes add
# the same specificity and the themes' own rule order still holds. Comments
# are kept (they carry the themes' attribution); the bodies of at-rules that
# hold rules (@media, @supports, @layer, @container) are scoped the same way,
# other at-rules are copied as they are.
node - "$nm/@highlightjs/cdn-assets/styles" >"$dest/hljs-themes.css" <<'EOF'
const fs = require("fs");
const path = require("path");
const dir = process.argv[2];

// Index just past the block that opens at css[open] === "{", skipping
// strings and comments.
function blockEnd(css, open) {
	let depth = 0;
	for (let i = open; i < css.length; i++) {
		const c = css[i];
		if (c === '"' || c === "'") {
			for (i++; i < css.length && css[i] !== c; i++) if (css[i] === "\\") i++;
		} else if (c === "/" && css[i + 1] === "*") {
			const e = css.indexOf("*/", i + 2);
			if (e < 0) throw new Error("unterminated comment");
			i = e + 1;
		} else if (c === "{") depth++;
		else if (c === "}" && --depth === 0) return i + 1;
	}
	throw new Error("unbalanced braces");
}

// Index of the first ch at or after i that is outside strings and comments,
// or -1.
function findTop(css, i, ch) {
	for (; i < css.length; i++) {
		const c = css[i];
		if (c === ch) return i;
		if (c === '"' || c === "'") {
			for (i++; i < css.length && css[i] !== c; i++) if (css[i] === "\\") i++;
		} else if (c === "/" && css[i + 1] === "*") {
			const e = css.indexOf("*/", i + 2);
			if (e < 0) throw new Error("unterminated comment");
			i = e + 1;
		}
	}
	return -1;
}

// Splits a selector list at top-level commas (not inside (), [] or strings).
function splitSelectors(list) {
	const out = [];
	let depth = 0, start = 0;
	for (let i = 0; i < list.length; i++) {
		const c = list[i];
		if (c === '"' || c === "'") {
			for (i++; i < list.length && list[i] !== c; i++) if (list[i] === "\\") i++;
		} else if (c === "(" || c === "[") depth++;
		else if (c === ")" || c === "]") depth--;
		else if (c === "," && depth === 0) {
			out.push(list.slice(start, i));
			start = i + 1;
		}
	}
	out.push(list.slice(start));
	return out.map((s) => s.trim()).filter(Boolean);
}

function scopeSelector(sel, scope) {
	// A selector aimed at the root element itself takes the condition in place.
	const m = /^(?::root|html)(?![\w-])/i.exec(sel);
	if (m) return scope.replace(/ $/, "") + sel.slice(m[0].length);
	return scope + sel;
}

function scope(css, prefix) {
	let out = "", i = 0;
	while (i < css.length) {
		if (/\s/.test(css[i])) { i++; continue; }
		if (css.startsWith("/*", i)) {
			const e = css.indexOf("*/", i + 2);
			if (e < 0) throw new Error("unterminated comment");
			out += css.slice(i, e + 2) + "\n";
			i = e + 2;
			continue;
		}
		const brace = findTop(css, i, "{");
		const semi = findTop(css, i, ";");
		if (css[i] === "@") {
			if (semi >= 0 && (brace < 0 || semi < brace)) { // @import, @charset, ...
				out += css.slice(i, semi + 1) + "\n";
				i = semi + 1;
				continue;
			}
			const end = blockEnd(css, brace);
			const head = css.slice(i, brace).trim();
			if (/^@(media|supports|layer|container)\b/i.test(head)) {
				out += head + "{\n" + scope(css.slice(brace + 1, end - 1), prefix) + "}\n";
			} else {
				out += css.slice(i, end) + "\n";
			}
			i = end;
			continue;
		}
		if (brace < 0) throw new Error("trailing text: " + css.slice(i, i + 40));
		const end = blockEnd(css, brace);
		const sels = splitSelectors(css.slice(i, brace)).map((s) => scopeSelector(s, prefix));
		out += sels.join(",") + css.slice(brace, end) + "\n";
		i = end;
	}
	return out;
}

const read = (f) => fs.readFileSync(path.join(dir, f), "utf8");
process.stdout.write(
	"/* Derived by internal/webui/vendor.sh from @highlightjs/cdn-assets\n" +
	"   styles/github.min.css (light) and styles/github-dark.min.css (dark),\n" +
	"   scoped to :root[data-theme]. Do not edit; rerun the script. */\n" +
	scope(read("github.min.css"), ':root:not([data-theme="dark"]) ') +
	scope(read("github-dark.min.css"), ':root[data-theme="dark"] '),
);
EOF

{
	echo "# Written by internal/webui/vendor.sh; refresh by rerunning it."
	echo "# package@version -> file in this directory (from the package's path)"
	echo "$MARKED -> marked.esm.js (lib/marked.esm.js)"
	echo "$DOMPURIFY -> purify.es.js (dist/purify.es.mjs, renamed)"
	echo "$HLJS -> highlight.min.js (es/highlight.min.js)"
	echo "$HLJS -> hljs-themes.css (derived: styles/github.min.css and styles/github-dark.min.css, selectors scoped to :root[data-theme])"
	echo "$MARKED -> LICENSES/marked.txt (LICENSE)"
	echo "$DOMPURIFY -> LICENSES/dompurify.txt (LICENSE, Apache-2.0), LICENSES/dompurify-MPL.txt (LICENSE-MPL, MPL-2.0)"
	echo "$HLJS -> LICENSES/highlightjs-cdn-assets.txt (LICENSE)"
	echo "$JSONSCHEMA -> json-schema/*.js (dist/esm/*.js, source-map comments removed)"
	echo "$JSONSCHEMA -> LICENSES/cfworker-json-schema.txt (written: the package has no licence file)"
} >"$dest/VERSIONS"

# The page's CSP has no 'unsafe-eval': no vendored script may build code from
# strings. (highlight.js mentions "eval" only as a keyword in its grammars.)
if grep -nE '(^|[^A-Za-z0-9_$."'\''])eval[[:space:]]*\(|new[[:space:]]+Function\b|(^|[^A-Za-z0-9_$.])Function[[:space:]]*\(' \
	"$dest"/{marked.esm.js,purify.es.js,highlight.min.js} "$dest"/json-schema/*.js >&2; then
	echo "vendor.sh: a vendored script uses eval or Function; the CSP forbids it" >&2
	exit 1
fi

(cd "$dest" && ls -l marked.esm.js purify.es.js highlight.min.js hljs-themes.css VERSIONS LICENSES/) >&2
