// Markdown rendering for chat messages: GitHub-flavoured Markdown parsed by
// marked, sanitised by DOMPurify into an inert DocumentFragment, and fenced
// code highlighted by highlight.js.
//
// Everything a model (or a user) writes is untrusted. Raw HTML in the
// Markdown is escaped, so it reads as the text it is, and what marked
// emits is then cut down by DOMPurify all the same: no scripts, event handlers, style attributes or <style>, forms, frames,
// embedded objects, SVG or MathML, and links only to http:, https:, mailto:
// or relative/# targets. Images stay only when they are data:image/ URLs
// (the page's CSP would block any other source anyway); others become a link
// (http/https) or their alt text. Links open in a new tab with
// rel="noopener noreferrer nofollow". Nothing here uses eval, and the output
// has no style attributes, so it works under the page's strict CSP.
//
// Cost: a render parses and sanitises the whole text, so it grows with the
// text: a few milliseconds for ordinary answers, on the order of 100 ms near
// 100 KB on a slow machine. While a reply streams, render at most once per
// animation frame (requestAnimationFrame, and skip a frame while one is
// pending) with the whole text so far, passing { streaming: true }, and
// replace the message's children with the result; when the reply is
// complete, render once more without it. In streaming renders a fenced code
// block that is not closed yet (it is still growing) stays plain, blocks
// without a language are not guessed at, and a render spends at most a few
// milliseconds highlighting new blocks (the rest follow in later frames).
// Highlighted blocks are cached by content, so unchanged blocks earlier in a
// message are not highlighted again on every frame.

import { Marked, Renderer } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.js";
import hljs from "../vendor/highlight.min.js";

// Code without a known language above this size is shown plain: guessing
// tries every registered language.
const AUTO_LIMIT = 20 * 1024;
// Guessing looks at the first this many characters only; the whole block
// is then highlighted in the language guessed.
const AUTO_SAMPLE = 2 * 1024;
// Above this size a code block is not highlighted at all.
const HIGHLIGHT_LIMIT = 256 * 1024;

// Class of the <pre> of a fenced code block whose closing fence has not
// arrived yet. It is left plain in streaming renders.
const OPEN_FENCE = "md-open-fence";

// Whether the raw text of a fenced code block token ends with its closing
// fence.
function fenceClosed(raw) {
	const open = /^ {0,3}(`{3,}|~{3,})/.exec(raw);
	if (!open) return true; // an indented block: complete as far as we can tell
	const lines = raw.replace(/\n+$/, "").split("\n");
	if (lines.length < 2) return false;
	const fence = open[1];
	const close = new RegExp("^ {0,3}" + (fence[0] === "`" ? "`" : "~") + "{" + fence.length + ",}[ \\t]*$");
	return close.test(lines[lines.length - 1]);
}

function escapeHTML(s) {
	return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const marked = new Marked({
	async: false,
	gfm: true,
	breaks: false,
	renderer: {
		code(token) {
			const html = Renderer.prototype.code.call(this, token);
			if (fenceClosed(token.raw || "")) return html;
			return html.replace(/^<pre>/, `<pre class="${OPEN_FENCE}">`);
		},
		// Raw HTML a model writes is shown as the text it is, never parsed:
		// "<script>" reads as <script>. (The sanitiser below still guards
		// everything marked emits.)
		html({ text }) {
			return escapeHTML(text);
		},
		// GFM task list items: the <input> marked would write is removed by
		// the sanitiser, so show the box as a character instead.
		checkbox({ checked }) {
			return `<span class="md-task${checked ? " md-task-done" : ""}">${checked ? "\u2611" : "\u2610"}</span> `;
		},
	},
});

// A private DOMPurify instance, so the hook below does not leak into other
// users of the library on the page.
const purify = DOMPurify(window);

const PURIFY_CONFIG = {
	RETURN_DOM_FRAGMENT: true,
	FORBID_TAGS: [
		"style", "form", "input", "button", "textarea", "select", "iframe",
		"object", "embed", "svg", "math",
		// Media would only show as broken players: the CSP blocks their sources.
		"audio", "video", "source", "track", "picture",
	],
	FORBID_ATTR: ["style", "srcset"],
	// http:, https:, mailto:, or anything without a scheme (relative paths,
	// #fragments, ?queries). data: is still accepted for <img src> (see
	// below); javascript:, vbscript:, data: links and the rest are dropped.
	ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
	// Prefix ids and names from raw HTML, so they cannot clobber the app's
	// own globals or element ids.
	SANITIZE_NAMED_PROPS: true,
};

function decorateLink(a) {
	const href = a.getAttribute("href");
	if (href === null) return;
	if (!href.startsWith("#")) a.setAttribute("target", "_blank");
	a.setAttribute("rel", "noopener noreferrer nofollow");
}

purify.addHook("afterSanitizeAttributes", (node) => {
	if (node.nodeName === "A" || node.nodeName === "AREA") decorateLink(node);
});

const DATA_IMAGE = /^data:image\//i;
const WEB_URL = /^https?:\/\//i;

// Replaces every <img> whose source is not a data:image/ URL by a link to
// it (http/https) or by its alt text. The fragment is still owned by
// DOMPurify's inert document here, so nothing has been fetched.
function replaceImages(root) {
	for (const img of root.querySelectorAll("img")) {
		const src = (img.getAttribute("src") || "").trim();
		if (DATA_IMAGE.test(src)) continue;
		const alt = img.getAttribute("alt") || "";
		let repl;
		if (WEB_URL.test(src)) {
			repl = img.ownerDocument.createElement("a");
			repl.setAttribute("href", src);
			repl.className = "md-image-link";
			repl.textContent = alt || src;
			decorateLink(repl);
		} else {
			repl = img.ownerDocument.createTextNode(alt);
		}
		img.replaceWith(repl);
	}
}

// Highlighted HTML by language and code text, least recently used first,
// kept to CACHE_ENTRIES entries and about CACHE_CHARS characters.
const cache = new Map();
const CACHE_ENTRIES = 256;
const CACHE_CHARS = 4 << 20;
let cacheChars = 0;

// Time a streaming render may spend on blocks that are not in the cache.
const STREAM_BUDGET_MS = 8;

function cached(key) {
	const hit = cache.get(key);
	if (hit) { // most recently used again
		cache.delete(key);
		cache.set(key, hit);
	}
	return hit;
}

function remember(key, hit) {
	const size = (e) => e[0].length + (e[1].value || "").length;
	cache.set(key, hit);
	cacheChars += size([key, hit]);
	while (cache.size > CACHE_ENTRIES || (cache.size > 1 && cacheChars > CACHE_CHARS)) {
		const oldest = cache.entries().next().value;
		cache.delete(oldest[0]);
		cacheChars -= size(oldest);
	}
}

// Highlights text in language, or in the language guessed from its start
// when language is "". Returns { value: HTML or null for none found,
// language }.
function highlightText(text, language) {
	if (!language) {
		let sample = text;
		if (text.length > AUTO_SAMPLE) {
			sample = text.slice(0, AUTO_SAMPLE);
			const nl = sample.lastIndexOf("\n");
			if (nl > 0) sample = sample.slice(0, nl);
		}
		const guess = hljs.highlightAuto(sample);
		if (!guess.language) return { value: null, language: "" };
		if (sample === text) return { value: guess.value, language: guess.language };
		language = guess.language;
	}
	const r = hljs.highlight(text, { language, ignoreIllegals: true });
	return { value: r.value, language: r.language || language };
}

/**
 * Highlights the code blocks (<pre><code>) under root that are not
 * highlighted yet. The language comes from a `language-xxx` class when
 * highlight.js knows it; otherwise it is guessed, for blocks up to 20 KB.
 * highlight.js escapes the code and writes only <span class="hljs-..."> into
 * it, so the result stays free of markup from the text and of style
 * attributes.
 * @param {ParentNode} root an Element, Document or DocumentFragment
 * @param {{streaming?: boolean}} [options] streaming: skip unclosed fences
 *   and guessing, and bound the time spent (see the top of this file)
 */
function highlightIn(root, { streaming = false } = {}) {
	const start = streaming ? performance.now() : 0;
	for (const code of root.querySelectorAll("pre > code")) {
		if (code.classList.contains("hljs")) continue;
		if (streaming && code.parentElement.classList.contains(OPEN_FENCE)) continue;
		const text = code.textContent;
		if (text.length > HIGHLIGHT_LIMIT) continue;
		let lang = "";
		for (const c of code.classList) {
			if (c.startsWith("language-")) { lang = c.slice(9).toLowerCase(); break; }
		}
		const known = lang && hljs.getLanguage(lang) ? lang : "";
		if (!known && text.length > AUTO_LIMIT) continue;
		const key = known + "\u0000" + text;
		let hit = cached(key);
		if (!hit) {
			if (streaming && (!known || performance.now() - start > STREAM_BUDGET_MS)) continue;
			try {
				hit = highlightText(text, known);
			} catch (err) {
				console.warn("highlight failed", err);
				continue;
			}
			remember(key, hit);
		}
		if (hit.value === null) continue; // nothing recognisable: stays plain
		code.innerHTML = hit.value;
		code.classList.add("hljs");
		if (hit.language && !known) code.classList.add("language-" + hit.language);
	}
}

/**
 * Renders Markdown to a sanitised DocumentFragment, ready to be appended
 * (e.g. el.replaceChildren(renderMarkdown(text))).
 * @param {string} text Markdown; raw HTML in it is shown as text
 * @param {{streaming?: boolean}} [options]
 *   streaming: the text is still growing (see the top of this file)
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text, { streaming = false } = {}) {
	let html;
	try {
		html = marked.parse(String(text ?? ""));
	} catch (err) {
		// Not expected from marked; show the text itself rather than nothing.
		console.warn("markdown failed", err);
		const frag = document.createDocumentFragment();
		const p = document.createElement("p");
		p.textContent = String(text ?? "");
		frag.append(p);
		return frag;
	}
	const frag = purify.sanitize(html, PURIFY_CONFIG);
	replaceImages(frag);
	highlightIn(frag, { streaming });
	return frag;
}
