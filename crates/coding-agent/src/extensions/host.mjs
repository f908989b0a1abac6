// pi extension host: runs pi extensions (default-export factories written against upstream's
// ExtensionAPI) for the Rust `pi` binary. Started by `pi` only when an extension is configured.
//
// Wire: newline-delimited JSON. stdin = messages from pi, stdout = messages to pi (the real
// stdout is reserved for that; console output of extensions goes to stderr). Every message has
// a `t` tag; requests carry a numeric `id` answered by `{t:"reply", id, ok, result?, error?}`.
// Shapes are the serde types in src/extensions/wire.rs.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { randomUUID } from "node:crypto";
import { spawn } from "node:child_process";
import * as nodeModule from "node:module";
import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import zlib from "node:zlib";
import workerThreads, { MessageChannel } from "node:worker_threads";

const protoWrite = process.stdout.write.bind(process.stdout);
const toStderr = (...a) => process.stderr.write(a.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" ") + "\n");
console.log = console.info = console.debug = console.warn = console.error = toStderr;
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

function send(msg) {
	protoWrite(JSON.stringify(msg) + "\n");
}

// ---- the SDK modules extensions import (upstream's loader aliases, core/extensions/loader.js) ----
// With the SDK cache (PI_HOST_SDK: the folder `npm install` filled with
// @earendil-works/pi-coding-agent@1.6.0 and its dependencies; extensions/sdk.rs) these resolve
// to upstream's real modules: the pi-ai root to the coding agent's extension view, as upstream.
// Without it, to the stand-ins below (a warning was printed by pi).
const SDK_DIR = process.env.PI_HOST_SDK ? realDir(process.env.PI_HOST_SDK) : undefined;
delete process.env.PI_HOST_SDK;
const AGENT = "@earendil-works/pi-coding-agent";
const AI_VIEW = [AGENT, null, "dist/core/extensions/pi-ai-extension-view.js"];
// specifier -> [package, export subpath, or null and a file inside the package]
const SDK_MODULES = {
	[AGENT]: [AGENT, "."],
	"@earendil-works/pi-agent-core": ["@earendil-works/pi-agent-core", "."],
	"@earendil-works/pi-tui": ["@earendil-works/pi-tui", "."],
	"@earendil-works/pi-ai": AI_VIEW,
	"@earendil-works/pi-ai/compat": AI_VIEW,
	"@earendil-works/pi-ai/models": ["@earendil-works/pi-ai", "./models"],
	"@earendil-works/pi-ai/oauth": ["@earendil-works/pi-ai", "./oauth"],
	"@earendil-works/pi-ai/providers/all": ["@earendil-works/pi-ai", "./providers/all"],
	typebox: ["typebox", "."],
	"typebox/compile": ["typebox", "./compile"],
	"typebox/value": ["typebox", "./value"],
};
for (const spec of Object.keys(SDK_MODULES)) {
	if (spec.startsWith("@earendil-works/")) SDK_MODULES[spec.replace("@earendil-works/", "@mariozechner/")] = SDK_MODULES[spec];
	if (spec.startsWith("typebox")) SDK_MODULES["@sinclair/" + spec] = SDK_MODULES[spec];
}
const VIRTUAL = Object.keys(SDK_MODULES);
// Node 20 (the SDK targets Node 22.19): undici 8, which the SDK loads through CommonJS
// `require` (out of the loader hooks' reach), uses two Node 22 functions as it loads:
// `zlib.createZstdDecompress` (bound; a stand-in that throws: only a zstd-encoded response
// fails, as it would on Node 20 anyway) and `worker_threads.markAsUncloneable` (a no-op: such
// objects are then cloneable, which nothing here relies on).
if (SDK_DIR && typeof zlib.createZstdDecompress !== "function") {
	zlib.createZstdDecompress = () => {
		throw new Error("zstd decompression needs Node.js 22.15 or newer");
	};
}
if (SDK_DIR && typeof workerThreads.markAsUncloneable !== "function") workerThreads.markAsUncloneable = () => {};
// Node 22.1+: V8's code cache for what is loaded from here on (the SDK's modules above all),
// kept beside the SDK; Node 20 has no such cache.
if (SDK_DIR && typeof nodeModule.enableCompileCache === "function") {
	try {
		nodeModule.enableCompileCache(join(SDK_DIR, ".compile-cache"));
	} catch {}
}

function realDir(p) {
	try {
		return realpathSync(p);
	} catch {
		return undefined;
	}
}

// Loader hooks (Node's loader thread, module.register; serialised with toString, so they see
// only their arguments):
// * SDK specifiers (above), imported from anywhere but the SDK itself, become one module per
//   importer that exports just the names the importer imports (a scan of its import
//   statements), each re-exported from the real file that defines it (exportMap), so only what
//   is used is loaded; a name the SDK lacks is `undefined`, not a link error (upstream's jiti
//   is as forgiving). A default or namespace import, `export *`, a dynamic import or no import
//   statement found: the whole module. Without the SDK: the stand-ins, equally forgiving.
// * Node 20 lacks `fs.globSync` (Node 22): the SDK's own `node:fs` imports get a copy of
//   `node:fs` with a small `globSync` added.
// * `.ts`/`.mts`/`.cts` files are transpiled by pi (oxc, in Rust), asked for over a
//   MessagePort; inside TypeScript, `./x.js` falls back to `./x.ts` and extensionless `./x`
//   to `./x.ts` / `./x/index.ts`, as tsc resolution does. Everything else resolves as Node
//   does (the extension's own node_modules).
function loaderHooks({ fs, path, url, sdkDir, modules, standIns }) {
	const { fileURLToPath, pathToFileURL } = url;
	const virtual = Object.keys(modules);
	let port;
	let n = 0;
	const waiting = new Map();
	const tsCode = new Map(); // file path -> transpiled code (the importer scan reads it)
	const sdkUrl = sdkDir ? pathToFileURL(sdkDir).href + "/" : undefined;
	const isTs = (u) => /\.(ts|mts|cts)$/.test(u.split("?")[0]);
	const needFsShim = typeof fs.globSync !== "function";
	let exportMap;
	const entries = sdkDir ? sdkEntries() : undefined;

	let themeSeen;
	const noteTheme = (code) => {
		if (themeSeen && typeof code === "string" && /theme/i.test(code)) Atomics.store(themeSeen, 0, 1);
	};

	function initialize(data) {
		port = data.port;
		themeSeen = data.themeSeen;
		port.on("message", (m) => {
			const w = waiting.get(m.id);
			waiting.delete(m.id);
			if (w) w(m);
		});
	}

	async function resolve(spec, ctx, next) {
		const parent = ctx.parentURL || "";
		const inSdk = sdkUrl !== undefined && parent.startsWith(sdkUrl);
		if (virtual.includes(spec) && !inSdk) {
			return { url: "pi-sdk:" + spec + "?from=" + encodeURIComponent(parent), shortCircuit: true };
		}
		if (inSdk && needFsShim && (spec === "node:fs" || spec === "fs")) return { url: "pi-shim:fs", shortCircuit: true };
		try {
			return await next(spec, ctx);
		} catch (e) {
			if (!parent || !isTs(parent) || !(spec.startsWith(".") || spec.startsWith("/"))) throw e;
			const alts = spec.endsWith(".js") ? [spec.slice(0, -3) + ".ts"] : /\.[a-z]+$/.test(spec) ? [] : [spec + ".ts", spec + "/index.ts"];
			for (const alt of alts) {
				try {
					return await next(alt, ctx);
				} catch {}
			}
			throw e;
		}
	}

	async function load(u, ctx, next) {
		if (u.startsWith("pi-sdk:")) {
			const q = u.indexOf("?from=");
			const spec = u.slice("pi-sdk:".length, q);
			const names = importedNames(importerCode(decodeURIComponent(u.slice(q + 6))), spec);
			return { format: "module", shortCircuit: true, source: entries ? realModule(spec, names) : standInModule(names) };
		}
		if (u === "pi-shim:fs") return { format: "module", shortCircuit: true, source: FS_SHIM };
		if (u.startsWith("file:") && isTs(u)) {
			const file = fileURLToPath(u);
			const r = await new Promise((res) => {
				const id = ++n;
				waiting.set(id, res);
				port.postMessage({ id, path: file });
			});
			if (r.error !== undefined) throw new SyntaxError(r.error);
			tsCode.set(file, r.code);
			noteTheme(r.code);
			return { format: "module", source: r.code, shortCircuit: true };
		}
		const r = await next(u, ctx);
		if (u.startsWith("file:") && !(sdkUrl && u.startsWith(sdkUrl)) && r.source != null) noteTheme(String(r.source));
		return r;
	}

	function importerCode(parent) {
		if (!parent.startsWith("file:")) return undefined;
		const file = fileURLToPath(parent);
		if (tsCode.has(file)) return tsCode.get(file);
		try {
			return fs.readFileSync(file, "utf8");
		} catch {
			return undefined;
		}
	}

	// The names `code` imports from `spec` (a Set), or null: it needs the whole module.
	function importedNames(code, spec) {
		if (typeof code !== "string") return null;
		const names = new Set();
		let seen = false;
		const braces = (list) => {
			for (const part of list.split(",")) {
				const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0].trim().replace(/^["']|["']$/g, "");
				if (name === "default") return false;
				if (name) names.add(name);
			}
			return true;
		};
		const from = /\b(import|export)\s*([^"'();]*?)\s*from\s*(["'])([^"'\n]+)\3/g;
		for (const m of code.matchAll(from)) {
			if (m[4] !== spec) continue;
			seen = true;
			const clause = m[2].trim();
			const b = /^\{([^}]*)\}$/.exec(clause);
			if (!b || !braces(b[1])) return null; // default, `* as ns`, `export *`
		}
		const bare = /\b(?:import\s*\(?|require\s*\()\s*(["'])([^"'\n]+)\1/g;
		for (const m of code.matchAll(bare)) if (m[2] === spec) return null;
		return seen ? names : null;
	}

	function realModule(spec, names) {
		const entry = entries[spec];
		if (names === null) return `export * from ${JSON.stringify(entry)}; import * as m from ${JSON.stringify(entry)}; export default (m.default ?? m);`;
		const map = entryMap(entry);
		const lines = [];
		let i = 0;
		for (const name of names) {
			if (!/^[\w$]+$/.test(name)) continue; // `import { "a-b" as x }`: not re-exportable here
			const at = map[name];
			if (!at) lines.push(`export const ${name} = undefined;`);
			else if (at[1] === "*") lines.push(`import * as _${i} from ${JSON.stringify(at[0])}; export { _${i++} as ${name} };`);
			else lines.push(`export { ${at[1]} as ${name} } from ${JSON.stringify(at[0])};`);
		}
		return lines.join("\n");
	}

	function standInModule(names) {
		if (names === null) return `const m = globalThis.__piVirtual; export default m; export const { ${standIns.join(", ")} } = m;`;
		return names.size ? `export const { ${[...names].join(", ")} } = globalThis.__piVirtual;` : "";
	}

	// name -> [file URL, name there or "*" (a namespace)] for one entry: where each export is
	// defined, following `export … from` chains. Computed from the files' export statements
	// (no import), once per SDK, and kept beside it (.pi-exports.json, paths relative).
	function entryMap(entry) {
		if (!exportMap) exportMap = loadExportMap();
		const rel = path.relative(sdkDir, fileURLToPath(entry));
		if (!exportMap[rel]) {
			exportMap[rel] = buildMap(fileURLToPath(entry));
			saveExportMap();
		}
		const out = {};
		for (const [name, [f, orig]] of Object.entries(exportMap[rel])) out[name] = [pathToFileURL(path.join(sdkDir, f)).href, orig];
		return out;
	}
	const mapFile = () => path.join(sdkDir, ".pi-exports.json");
	function loadExportMap() {
		try {
			return JSON.parse(fs.readFileSync(mapFile(), "utf8"));
		} catch {
			return {};
		}
	}
	function saveExportMap() {
		const tmp = mapFile() + "." + process.pid + ".tmp";
		try {
			fs.writeFileSync(tmp, JSON.stringify(exportMap));
			fs.renameSync(tmp, mapFile());
		} catch {
			try {
				fs.rmSync(tmp, { force: true });
			} catch {}
		}
	}

	function buildMap(entryFile) {
		const parsed = new Map();
		const target = (from, spec) => {
			if (spec.startsWith(".")) return path.resolve(path.dirname(from), spec);
			const m = /^((?:@[^/]+\/)?[^/]+)(\/.*)?$/.exec(spec);
			if (!m || spec.startsWith("node:")) return undefined;
			return packageFileIn(path.dirname(from), m[1], m[2] ? "." + m[2] : ".");
		};
		const exportsOf = (file) => {
			if (parsed.has(file)) return parsed.get(file);
			const ex = { explicit: new Map(), local: new Set(), stars: [] };
			parsed.set(file, ex);
			let src = "";
			try {
				src = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
			} catch {}
			for (const m of src.matchAll(/\bexport\s*\*\s*as\s+([\w$]+)\s*from\s*["']([^"']+)["']/g)) ex.explicit.set(m[1], [target(file, m[2]), "*"]);
			for (const m of src.matchAll(/\bexport\s*\*\s*from\s*["']([^"']+)["']/g)) {
				const t = target(file, m[1]);
				if (t) ex.stars.push(t);
			}
			for (const m of src.matchAll(/\bexport\s*\{([^}]*)\}(\s*from\s*["']([^"']+)["'])?/g)) {
				for (const part of m[1].split(",")) {
					const [orig, as] = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/).map((s) => s.trim());
					if (!orig) continue;
					if (m[3]) ex.explicit.set(as || orig, [target(file, m[3]), orig]);
					else ex.local.add(as || orig);
				}
			}
			for (const m of src.matchAll(/\bexport\s+(?:async\s+)?(?:function\s*\*?|class|const|let|var)\s*([\w$]+)/g)) ex.local.add(m[1]);
			if (/\bexport\s+default\b/.test(src)) ex.local.add("default");
			return ex;
		};
		const namesMemo = new Map();
		const namesOf = (file) => {
			if (namesMemo.has(file)) return namesMemo.get(file);
			const out = new Set();
			namesMemo.set(file, out);
			const ex = exportsOf(file);
			for (const s of ex.stars) for (const n of namesOf(s)) if (n !== "default") out.add(n);
			for (const n of ex.explicit.keys()) out.add(n);
			for (const n of ex.local) out.add(n);
			return out;
		};
		const where = (file, name, depth) => {
			const ex = exportsOf(file);
			if (depth > 32) return [file, name];
			const e = ex.explicit.get(name);
			if (e) return !e[0] ? [file, name] : e[1] === "*" ? e : where(e[0], e[1], depth + 1);
			if (ex.local.has(name)) return [file, name];
			for (const s of ex.stars) if (namesOf(s).has(name)) return where(s, name, depth + 1);
			return [file, name];
		};
		const out = {};
		for (const name of namesOf(entryFile)) {
			const [f, orig] = where(entryFile, name, 0);
			out[name] = [path.relative(sdkDir, f), orig];
		}
		return out;
	}

	// specifier -> the real entry's file URL; undefined when one is missing (a broken cache).
	function sdkEntries() {
		const agentRoot = path.join(sdkDir, "node_modules", modules["@earendil-works/pi-coding-agent"][0]);
		const out = {};
		for (const [spec, [pkg, sub, file]] of Object.entries(modules)) {
			const f = sub === null ? path.join(agentRoot, file) : packageFileIn(agentRoot, pkg, sub);
			if (!f || !fs.existsSync(f)) return undefined;
			out[spec] = pathToFileURL(f).href;
		}
		return out;
	}

	// The file a package export names: `exports[sub]` (conditions import, node, default; `*`
	// patterns), else `main` for ".". The package is looked up in node_modules from `fromDir` up.
	function packageFileIn(fromDir, pkg, sub) {
		for (let dir = fromDir; ; dir = path.dirname(dir)) {
			const root = path.join(dir, "node_modules", pkg);
			let manifest;
			try {
				manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
			} catch {
				if (path.dirname(dir) === dir) return undefined;
				continue;
			}
			const pick = (t) => (typeof t === "string" ? t : t && typeof t === "object" ? pick(t.import ?? t.node ?? t.default) : undefined);
			let exp = manifest.exports;
			if (exp === undefined) return sub === "." ? path.join(root, manifest.main || "index.js") : path.join(root, sub);
			if (typeof exp === "string" || !Object.keys(exp).some((k) => k.startsWith("."))) exp = { ".": exp };
			if (exp[sub] !== undefined) return path.join(root, pick(exp[sub]));
			for (const [k, v] of Object.entries(exp)) {
				const star = k.indexOf("*");
				if (star < 0 || !sub.startsWith(k.slice(0, star)) || !sub.endsWith(k.slice(star + 1))) continue;
				return path.join(root, pick(v).replace("*", sub.slice(star, sub.length - (k.length - star - 1))));
			}
			return undefined;
		}
	}

	// Node 22's fs.globSync for Node 20 (the SDK's package manager uses it): `*`, `**`, `?`,
	// `{a,b}`; paths relative to `cwd`, walked from the pattern's fixed prefix.
	const FS_SHIM = `import fs from "node:fs"; import * as path from "node:path"; import { fileURLToPath } from "node:url";
export * from "node:fs"; export default fs;
const esc = (c) => c.replace(/[.+^$()|[\\]\\\\]/g, "\\\\$&");
function toRe(g) {
	let re = "";
	for (let i = 0; i < g.length; i++) {
		const c = g[i];
		if (c === "*" && g[i + 1] === "*") { i++; if (g[i + 1] === "/") { i++; re += "(?:.*/)?"; } else re += ".*"; }
		else if (c === "*") re += "[^/]*";
		else if (c === "?") re += "[^/]";
		else if (c === "{" && g.indexOf("}", i) > i) { const j = g.indexOf("}", i); re += "(?:" + g.slice(i + 1, j).split(",").map(esc).join("|") + ")"; i = j; }
		else re += esc(c);
	}
	return new RegExp("^" + re + "$");
}
export function globSync(pattern, options = {}) {
	const cwd = options.cwd instanceof URL ? fileURLToPath(options.cwd) : String(options.cwd ?? process.cwd());
	const out = new Set();
	for (const g of Array.isArray(pattern) ? pattern : [pattern]) {
		const parts = g.split("/");
		const fixed = [];
		while (parts.length > 1 && !/[*?{[]/.test(parts[0])) fixed.push(parts.shift());
		const re = toRe(g);
		const deep = g.includes("**");
		const walk = (rel, depth) => {
			let list;
			try { list = fs.readdirSync(path.join(cwd, rel), { withFileTypes: true }); } catch { return; }
			for (const e of list) {
				const r = rel ? rel + "/" + e.name : e.name;
				if (re.test(r)) out.add(r);
				if (e.isDirectory() && (deep || depth < parts.length - 1)) walk(r, depth + 1);
			}
		};
		const base = fixed.join("/");
		if (!/[*?{[]/.test(g)) { if (fs.existsSync(path.join(cwd, g))) out.add(g); continue; }
		walk(base, 0);
	}
	return [...out];
}`;

	return { initialize, resolve, load };
}

// Without the SDK: the names the stand-in modules export. TUI pieces (components, themes, key helpers) are inert
// stand-ins: headless, as in upstream's RPC mode, they are accepted and do nothing.
const REAL = ["Type", "StringEnum", "defineTool", "Compile", "TypeCompiler", "Value", "getAgentDir", "isToolCallEventType"];
const INERT = ["getSettingsListTheme", "getMarkdownTheme", "getSelectListTheme", "DynamicBorder", "BorderedLoader", "CustomEditor",
	"keyHint", "rawKeyHint", "highlightCode", "Container", "Text", "SettingsList", "SelectList", "Box", "Spacer", "Markdown", "Input",
	"Editor", "Loader", "Image", "Key", "matchesKey", "truncateToWidth", "visibleWidth", "wrapTextWithAnsi", "CancellableLoader", "TruncatedText"];
const hooksSource = `import * as fs from "node:fs"; import * as path from "node:path"; import * as url from "node:url";
const h = (${loaderHooks.toString()})({ fs, path, url, ...${JSON.stringify({ sdkDir: SDK_DIR ?? null, modules: SDK_MODULES, standIns: [...REAL, ...INERT] })} });
export const initialize = h.initialize, resolve = h.resolve, load = h.load;`;
const hooks = hooksSource;
// Set by the loader hooks when a module mentions "theme" (see importTheme).
const themeSeen = new Int32Array(new SharedArrayBuffer(4));
const { port1, port2 } = new MessageChannel();
nodeModule.register("data:text/javascript," + encodeURIComponent(hooks), { data: { port: port2, themeSeen }, transferList: [port2] });
port1.on("message", async ({ id, path }) => {
	const r = await callPi("transpile", { path });
	port1.postMessage({ id, ...(r || { error: "no answer" }) });
});
port1.unref();

const opt = (schema, extra) => ({ ...schema, ...(extra || {}) });
const Type = {
	Object: (properties, o) => {
		const required = Object.keys(properties).filter((k) => !properties[k][OPTIONAL]);
		const props = {};
		for (const [k, v] of Object.entries(properties)) {
			const { [OPTIONAL]: _drop, ...rest } = v;
			props[k] = rest;
		}
		return opt({ type: "object", properties: props, ...(required.length ? { required } : {}) }, o);
	},
	String: (o) => opt({ type: "string" }, o),
	Number: (o) => opt({ type: "number" }, o),
	Integer: (o) => opt({ type: "integer" }, o),
	Boolean: (o) => opt({ type: "boolean" }, o),
	Null: (o) => opt({ type: "null" }, o),
	Any: (o) => opt({}, o),
	Unknown: (o) => opt({}, o),
	Array: (items, o) => opt({ type: "array", items }, o),
	Literal: (value, o) => opt({ const: value, type: typeof value }, o),
	Union: (anyOf, o) => opt({ anyOf }, o),
	Optional: (s) => ({ ...s, [OPTIONAL]: true }),
	Record: (_k, v, o) => opt({ type: "object", additionalProperties: v }, o),
};
const OPTIONAL = Symbol("optional");
const StringEnum = (values, o) => opt({ type: "string", enum: [...values] }, o);
// An inert stand-in: callable, constructible, every property another stand-in; as a string "".
function inert() {
	const f = function () {};
	return new Proxy(f, {
		get: (_t, k) => (k === Symbol.toPrimitive ? () => "" : k === "then" ? undefined : inert()),
		apply: () => inert(),
		construct: () => inert(),
	});
}
globalThis.__piVirtual = {
	...Object.fromEntries(INERT.map((n) => [n, inert()])),
	Type,
	StringEnum,
	defineTool: (t) => t,
	Compile: (s) => ({ Check: () => true, schema: s }),
	TypeCompiler: { Compile: (s) => ({ Check: () => true, schema: s }) },
	Value: { Check: () => true },
	getAgentDir: () => process.env.PI_CODING_AGENT_DIR || "",
	isToolCallEventType: (name, ev) => ev && ev.toolName === name,
};

// ---- state ----
let mode = "rpc";
let cwd = process.cwd();
let paths = []; // entry files, in load order (reload re-imports them)
let generation = 0; // bumped per reload: a fresh module instance per import
// Registrations after the factories ran (pi.registerTool / registerCommand / on / registerFlag in
// session_start or any later handler, as upstream allows): reported to pi as `registered` with
// the whole snapshot, before the reply of the round that made them (or on the next tick).
let loadDone = false;
let regDirty = false;
// Tool name -> its place in registration order across all extensions (upstream lists tools
// in the order they were registered: a tool registered in session_start comes after every
// tool a factory registered).
const toolSeq = new Map();
function markRegistered() {
	if (!loadDone || regDirty) return;
	regDirty = true;
	setImmediate(flushRegistered);
}
function flushRegistered() {
	if (!regDirty) return;
	regDirty = false;
	send({ t: "registered", extensions: snapshot() });
}
let flagValues = new Map(); // name -> command-line value (ToHost::Flags)
const extensions = []; // {path, handlers: Map<event, fn[]>, commands: Map, tools: Map}
const commands = new Map(); // name -> {ext, def}
const tools = new Map(); // name -> {ext, def}
const uiPending = new Map(); // uuid -> {resolve, fallback, method}
const calls = new Map(); // our call id -> resolve
const aborters = new Map(); // pi request id -> AbortController (tool execute, user_bash operations)
let nextCall = 1;

function errText(e) {
	return e instanceof Error ? e.message : String(e);
}
function reportError(extensionPath, event, e) {
	send({ t: "error", extensionPath, event, error: errText(e) });
}
function callPi(method, params) {
	const id = nextCall++;
	return new Promise((resolve) => {
		calls.set(id, resolve);
		send({ t: "call", id, method, params });
	});
}
function firePi(method, params) {
	send({ t: "call", method, params });
}

// ---- the session mirror (ToHost::State; wire.rs) and API calls that answer ----
// Synchronous accessors (getThinkingLevel, ctx.sessionManager.*, ctx.model, …) read this
// mirror; pi pushes it before commands and session events, and with every API call answer.
const piState = {
	cwd: process.cwd(), sessionFile: undefined, sessionId: "", sessionName: undefined, sessionDir: undefined, header: undefined,
	leafId: null, entries: [], model: undefined, thinkingLevel: "off", activeTools: [], allTools: [], isIdle: true,
	hasPendingMessages: false, contextUsage: undefined, systemPrompt: "", commands: [], availableModels: [],
};
function applyState(st) {
	if (!st || typeof st !== "object") return;
	const { entries, entriesFrom, ...rest } = st;
	Object.assign(piState, rest);
	if (Array.isArray(entries)) {
		if (entriesFrom === null || entriesFrom === undefined) piState.entries = entries;
		else {
			const at = piState.entries.findIndex((e) => e.id === entriesFrom);
			piState.entries = at < 0 ? entries : [...piState.entries.slice(0, at + 1), ...entries];
		}
	}
	if (typeof st.cwd === "string") cwd = st.cwd;
	// The first state comes before any handler runs: the theme is set up then (upstream
	// initialises it after loading extensions, before their events).
	if (sdkTheme && !themeReady) currentTheme();
}
// An API call pi answers with `{value, state?}` (or `{error}`, thrown here).
async function callApi(method, params) {
	const r = (await callPi(method, params)) || {};
	applyState(r.state);
	if (r.error !== undefined) throw new Error(r.error);
	return r.value;
}
const entryById = (id) => piState.entries.find((e) => e.id === id);
function branchOf(leafId) {
	const out = [];
	for (let e = leafId ? entryById(leafId) : undefined; e; e = e.parentId ? entryById(e.parentId) : undefined) out.unshift(e);
	return out;
}
function treeOf() {
	const nodes = new Map(piState.entries.map((e) => [e.id, { entry: e, children: [], label: labelOf(e.id) }]));
	const roots = [];
	for (const e of piState.entries) {
		const n = nodes.get(e.id);
		const p = e.parentId ? nodes.get(e.parentId) : undefined;
		(p ? p.children : roots).push(n);
	}
	return roots;
}
function labelOf(id) {
	let label;
	for (const e of piState.entries) if (e.type === "label" && e.targetId === id) label = e.label === null ? undefined : e.label;
	return label;
}
// ctx.sessionManager: read-only accessors over the mirror (upstream ReadonlySessionManager).
const sessionManager = {
	getCwd: () => piState.cwd,
	getSessionDir: () => piState.sessionDir,
	getSessionId: () => piState.sessionId,
	getSessionFile: () => piState.sessionFile,
	getSessionName: () => piState.sessionName,
	getHeader: () => piState.header,
	getEntries: () => [...piState.entries],
	getEntry: (id) => entryById(id),
	getBranch: (fromId) => branchOf(fromId ?? piState.leafId),
	getTree: () => treeOf(),
	getLeafId: () => piState.leafId,
	getLeafEntry: () => (piState.leafId ? entryById(piState.leafId) : undefined),
	getLabel: (id) => labelOf(id),
	buildContextEntries: () => branchOf(piState.leafId),
	isPersisted: () => piState.sessionFile !== undefined,
};

// ---- UI (rpc-protocol.md §6) ----
function dialog(method, fields, fallback, opts) {
	if (mode !== "rpc") return Promise.resolve(fallback);
	const signal = opts && opts.signal;
	if (signal && signal.aborted) return Promise.resolve(fallback);
	const id = randomUUID();
	return new Promise((resolve) => {
		let timer;
		const done = (v) => {
			if (!uiPending.has(id)) return;
			uiPending.delete(id);
			if (timer) clearTimeout(timer);
			resolve(v);
		};
		uiPending.set(id, { done, fallback, method });
		const timeout = opts && typeof opts.timeout === "number" && opts.timeout > 0 ? opts.timeout : undefined;
		if (timeout !== undefined) timer = setTimeout(() => done(fallback), timeout);
		if (signal) signal.addEventListener("abort", () => done(fallback), { once: true });
		send({ t: "ui", request: { id, method, ...fields, ...(timeout !== undefined && method !== "editor" ? { timeout } : {}) } });
	});
}
function fire(method, fields) {
	if (mode !== "rpc") return;
	send({ t: "ui", request: { id: randomUUID(), method, ...fields } });
}
const noop = () => {};
const ui = {
	select: (title, options, o) => dialog("select", { title, options }, undefined, o),
	confirm: (title, message, o) => dialog("confirm", { title, message }, false, o),
	input: (title, placeholder, o) => dialog("input", { title, ...(placeholder !== undefined ? { placeholder } : {}) }, undefined, o),
	editor: (title, prefill, o) => dialog("editor", { title, ...(prefill !== undefined ? { prefill } : {}) }, undefined, o),
	notify: (message, notifyType) => fire("notify", { message, ...(notifyType !== undefined ? { notifyType } : {}) }),
	setStatus: (statusKey, statusText) => fire("setStatus", { statusKey, ...(statusText !== undefined ? { statusText } : {}) }),
	setWidget: (widgetKey, content, o) => {
		if (content !== undefined && !Array.isArray(content)) return; // component factories are not forwarded
		const placement = o && o.placement;
		fire("setWidget", { widgetKey, ...(content !== undefined ? { widgetLines: content } : {}), ...(placement !== undefined ? { widgetPlacement: placement } : {}) });
	},
	setTitle: (title) => fire("setTitle", { title }),
	setEditorText: (text) => fire("set_editor_text", { text }),
	pasteToEditor: (text) => fire("set_editor_text", { text }),
	getEditorText: () => "",
	custom: async () => undefined,
	onTerminalInput: () => noop,
	setWorkingMessage: noop,
	setWorkingVisible: noop,
	setWorkingIndicator: noop,
	setHiddenThinkingLabel: noop,
	setFooter: noop,
	setHeader: noop,
	addAutocompleteProvider: noop,
	setEditorComponent: noop,
	setToolsExpanded: noop,
	getEditorComponent: () => undefined,
	getToolsExpanded: () => false,
	getAllThemes: () => [],
	getTheme: () => undefined,
	setTheme: () => ({ success: false, error: "Theme switching not supported in RPC mode" }),
	get theme() {
		return currentTheme();
	},
};

// ctx.ui.theme: with the SDK, upstream's own theme (its theme module, initialised as upstream's
// main does before extension handlers run: `initTheme(<settings theme>, false)`, the
// `theme` of project settings only for a trusted project), so text is coloured as upstream
// colours it (ANSI in RPC notifications, by the terminal's colour support). Without the SDK:
// text unchanged.
let sdkTheme; // {theme module, config module}, imported with the extensions
let themeReady = false;
const plainTheme = new Proxy({}, { get: () => (s) => s });
// Imported after the extensions, and only when one of their modules mentions "theme" (any
// case; the loader hooks set themeSeen[0]): it costs ~0.3 s (pi-tui, highlight.js). An
// extension that reaches the theme without naming it gets the plain theme.
async function importTheme() {
	if (!SDK_DIR || sdkTheme) return;
	const dist = join(SDK_DIR, "node_modules", AGENT, "dist");
	try {
		const [theme, config] = await Promise.all([
			import(pathToFileURL(join(dist, "modes/interactive/theme/theme.js")).href),
			import(pathToFileURL(join(dist, "config.js")).href),
		]);
		sdkTheme = { theme, config };
	} catch (e) {
		toStderr(`pi: the SDK's theme module failed to load: ${errText(e)}`);
	}
}
function themeSetting() {
	const read = (file) => {
		try {
			const v = JSON.parse(readFileSync(file, "utf8")).theme;
			return typeof v === "string" ? v : undefined;
		} catch {
			return undefined;
		}
	};
	const project = piState.projectTrusted === true ? read(join(piState.cwd || cwd, ".pi", "settings.json")) : undefined;
	const name = project ?? read(join(sdkTheme.config.getAgentDir(), "settings.json"));
	return name && name.includes("/") ? undefined : name;
}
function currentTheme() {
	if (!sdkTheme) return plainTheme;
	if (!themeReady) {
		themeReady = true;
		try {
			sdkTheme.theme.initTheme(themeSetting(), false);
		} catch (e) {
			toStderr(`pi: initTheme failed: ${errText(e)}`);
		}
	}
	return sdkTheme.theme.theme;
}

function context() {
	return {
		ui,
		mode,
		hasUI: mode === "rpc",
		get cwd() {
			return piState.cwd;
		},
		signal: undefined,
		isIdle: () => piState.isIdle,
		abort: () => firePi("abort", {}),
		shutdown: () => firePi("shutdown", {}),
		hasPendingMessages: () => piState.hasPendingMessages,
		getContextUsage: () => piState.contextUsage,
		getSystemPrompt: () => piState.systemPrompt,
		isProjectTrusted: () => piState.projectTrusted === true,
		sessionManager,
		modelRegistry,
		get model() {
			return piState.model;
		},
		get thinkingLevel() {
			return piState.thinkingLevel;
		},
		scopedModels: [],
		compact: (o) => {
			callApi("compact", { customInstructions: o && o.customInstructions }).then(
				(r) => o && o.onComplete && o.onComplete(r),
				(e) => o && o.onError && o.onError(e),
			);
		},
	};
}

// ctx.modelRegistry (upstream ModelRegistry): synchronous reads from the mirror's
// `availableModels` (the models pi has credentials for, as `get_available_models` lists them).
// getAll() lists those too: the mirror does not carry models without credentials.
const sameModel = (a, b) => !!a && !!b && a.provider === b.provider && a.id === b.id;
const modelRegistry = {
	getAll: () => piState.availableModels.map((m) => ({ ...m })),
	getAvailable: () => piState.availableModels.map((m) => ({ ...m })),
	find: (provider, modelId) => {
		const m = piState.availableModels.find((x) => x.provider === provider && x.id === modelId);
		return m ? { ...m } : undefined;
	},
	hasConfiguredAuth: (model) => piState.availableModels.some((m) => sameModel(m, model)),
	// No image or classifier models in this build's catalog mirror.
	findOfType: (type, provider, modelId) => {
		if (type !== "chat") return undefined;
		const m = piState.availableModels.find((x) => x.provider === provider && x.id === modelId);
		return m ? { ...m } : undefined;
	},
	getAllOfType: (type) => (type === "chat" ? piState.availableModels.map((m) => ({ ...m })) : []),
	classify: async () => {
		throw new Error("classifier models are not supported by this pi build");
	},
	isUsingOAuth: () => false,
	getError: () => undefined,
	refresh: async () => ({}),
	// One request with pi's credentials for `model`; resolves to the final assistant message
	// (stopReason "error" when the request failed), rejects when the model has no credentials.
	complete: (model, ctx, options) =>
		callApi("complete", {
			provider: model && model.provider,
			id: model && model.id,
			context: { systemPrompt: ctx && ctx.systemPrompt, messages: (ctx && ctx.messages) || [], tools: ctx && ctx.tools },
			options: options ? { maxTokens: options.maxTokens, reasoning: options.reasoning, sessionId: options.sessionId, cacheRetention: options.cacheRetention } : {},
		}),
};

// The command context (upstream ExtensionCommandContext): session control through pi's session
// runtime, the same path as the RPC new_session / fork / switch_session commands.
async function afterReplace(result, o) {
	if (result && result.cancelled === false && o && typeof o.withSession === "function") {
		const ctx = commandContext();
		await o.withSession({ ...ctx, sendUserMessage: async (c, so) => firePi("sendUserMessage", { content: c, options: so }), sendMessage: async (m, so) => firePi("sendMessage", { message: m, options: so }) });
	}
	return result;
}
// `ctx.newSession({setup})`: upstream hands `setup` the new session's SessionManager, whose
// append* methods write at once and return the entry's id. Here they append to a local view of
// the new session (the mirror's entries plus those appended) and return the ids at once; pi
// stores the entries with those ids once `setup` has returned (`sessionSetup`), then rebuilds
// the context from the session, as upstream's `refreshContext`.
function newEntryId(taken) {
	for (;;) {
		const id = randomUUID().slice(0, 8);
		if (!taken.has(id)) return id;
	}
}
async function runSetup(setup) {
	const entries = [...piState.entries];
	const byId = new Map(entries.map((e) => [e.id, e]));
	const appended = [];
	let leafId = piState.leafId;
	const add = (fields) => {
		const entry = { id: newEntryId(byId), parentId: leafId, timestamp: new Date().toISOString(), ...fields };
		entries.push(entry);
		byId.set(entry.id, entry);
		appended.push(entry);
		leafId = entry.id;
		return entry.id;
	};
	const branch = (fromId) => {
		const out = [];
		for (let e = fromId ? byId.get(fromId) : undefined; e; e = e.parentId ? byId.get(e.parentId) : undefined) out.unshift(e);
		return out;
	};
	const label = (id) => {
		let l;
		for (const e of entries) if (e.type === "label" && e.targetId === id) l = e.label || undefined;
		return l;
	};
	const sm = {
		...sessionManager,
		getEntries: () => [...entries],
		getEntry: (id) => byId.get(id),
		getBranch: (fromId) => branch(fromId ?? leafId),
		getLeafId: () => leafId,
		getLeafEntry: () => (leafId ? byId.get(leafId) : undefined),
		getLabel: (id) => label(id),
		getChildren: (parentId) => entries.filter((e) => e.parentId === parentId),
		buildContextEntries: () => branch(leafId),
		getSessionName: () => {
			for (let i = entries.length - 1; i >= 0; i--) if (entries[i].type === "session_info") return (entries[i].name || "").trim() || undefined;
			return undefined;
		},
		appendMessage: (message) => add({ type: "message", message }),
		appendThinkingLevelChange: (thinkingLevel) => add({ type: "thinking_level_change", thinkingLevel }),
		appendModelChange: (provider, modelId) => add({ type: "model_change", provider, modelId }),
		appendCustomEntry: (customType, data) => add({ type: "custom", customType, data }),
		appendSessionInfo: (name) => add({ type: "session_info", name: String(name).replace(/[\r\n]+/g, " ").trim() }),
		appendCustomMessageEntry: (customType, content, display, details) => add({ type: "custom_message", customType, content, display, details }),
		appendLabelChange: (targetId, l) => {
			if (!byId.has(targetId)) throw new Error(`Entry ${targetId} not found`);
			return add({ type: "label", targetId, label: l });
		},
	};
	try {
		await setup(sm);
	} finally {
		if (appended.length > 0) await callApi("sessionSetup", { entries: appended });
	}
}
// The `setup` of the `newSession` in flight: upstream runs it on the new session before the
// new extension instances get `session_start`, so it runs when that event arrives (or, when no
// handler asked for the event, once the new session is in place).
let pendingSetup;
async function runPendingSetup() {
	const p = pendingSetup;
	if (!p || p.done) return;
	p.done = true;
	try {
		await runSetup(p.setup);
	} catch (e) {
		p.error = e;
	}
}
async function newSession(o) {
	const p = o && typeof o.setup === "function" ? { setup: o.setup, done: false, error: undefined } : undefined;
	pendingSetup = p;
	let result;
	try {
		result = await callApi("newSession", { parentSession: o && o.parentSession });
	} finally {
		if (pendingSetup === p) pendingSetup = undefined;
	}
	if (p && result && result.cancelled === false && !p.done) {
		p.done = true;
		await runSetup(p.setup);
	}
	if (p && p.error !== undefined) throw p.error;
	return afterReplace(result, o);
}
function commandContext() {
	return {
		...context(),
		// After the deferred sendUserMessage calls made before it, so that it waits for their
		// runs (upstream 1.6 resolves at once after `sendUserMessage`, before that run starts).
		waitForIdle: () => new Promise((r) => setImmediate(r)).then(() => callApi("waitForIdle", {})).then(() => undefined),
		newSession,
		fork: async (entryId, o) => afterReplace(await callApi("fork", { entryId, position: (o && o.position) || "before" }), o),
		switchSession: async (sessionPath, o) => afterReplace(await callApi("switchSession", { sessionPath }), o),
		// Upstream's RPC mode: `{cancelled}`.
		navigateTree: async (targetId, o) =>
			callApi("navigateTree", {
				targetId,
				summarize: o && o.summarize,
				customInstructions: o && o.customInstructions,
				replaceInstructions: o && o.replaceInstructions,
				label: o && o.label,
			}),
		reload: () => callApi("reload", {}).then(() => undefined),
		getSystemPromptOptions: () => ({ cwd: piState.cwd }),
	};
}

function makeApi(ext) {
	return {
		on(event, handler) {
			if (!ext.handlers.has(event)) ext.handlers.set(event, []);
			ext.handlers.get(event).push(handler);
			markRegistered();
		},
		registerCommand(name, def) {
			ext.commands.set(name, def);
			commands.set(name, { ext, def });
			markRegistered();
		},
		registerTool(def) {
			if (!toolSeq.has(def.name)) toolSeq.set(def.name, toolSeq.size);
			ext.tools.set(def.name, def);
			tools.set(def.name, { ext, def });
			markRegistered();
		},
		registerShortcut: noop,
		registerFlag: (name, o) => {
			ext.flags.set(name, { type: (o && o.type) || "boolean", default: o && o.default, description: o && o.description });
			markRegistered();
		},
		getFlag: (name) => (ext.flags.has(name) ? (flagValues.has(name) ? flagValues.get(name) : ext.flags.get(name).default) : undefined),
		registerMessageRenderer: noop,
		registerEntryRenderer: noop,
		registerProvider: (name, config) => registerProvider(ext, name, config),
		unregisterProvider: (name) => unregisterProvider(name),
		registerVirtualModel: (definition) => registerVirtualModel(ext, definition),
		unregisterVirtualModel: (provider, id) => unregisterVirtualModel(provider, id),
		sendMessage: (message, o) => firePi("sendMessage", { message, options: o }),
		// Sent one macrotask later: upstream's sendUserMessage starts its prompt asynchronously,
		// so a command handler that returns right after it is answered before that run starts
		// (and a synchronous sendMessage after it comes first).
		sendUserMessage: (content, o) => void setImmediate(() => firePi("sendUserMessage", { content, options: o })),
		appendEntry: (customType, data) => firePi("appendEntry", { customType, data }),
		setSessionName: (name) => {
			if (typeof name === "string") piState.sessionName = name.trim() || undefined;
			firePi("setSessionName", { name });
		},
		getSessionName: () => piState.sessionName,
		// The session's slash commands as `get_commands` lists them (pi's mirror).
		getCommands: () => piState.commands.map((c) => ({ ...c })),
		exec: (command, args, o) => execCmd(command, args || [], o || {}),
		...sessionApi(),
		events: busFor(),
	};
}

// pi.* methods that read or change the session (served by pi: api.rs).
function sessionApi() {
	return {
		setLabel: (entryId, label) => firePi("setLabel", { entryId, label: label ?? null }),
		getActiveTools: () => [...piState.activeTools],
		getAllTools: () => piState.allTools.map((t) => ({ ...t })),
		setActiveTools: (names) => {
			const known = new Set(piState.allTools.map((t) => t.name));
			piState.activeTools = (Array.isArray(names) ? names : []).filter((n) => known.has(n));
			firePi("setActiveTools", { names: piState.activeTools });
		},
		setModel: (model) => callApi("setModel", { provider: model && model.provider, id: model && model.id }),
		getThinkingLevel: () => piState.thinkingLevel,
		setThinkingLevel: (level) => {
			firePi("setThinkingLevel", { level });
		},
	};
}

const bus = new Map();
function busFor() {
	return {
		on(name, fn) {
			if (!bus.has(name)) bus.set(name, new Set());
			bus.get(name).add(fn);
			return () => bus.get(name).delete(fn);
		},
		emit(name, data) {
			for (const fn of bus.get(name) || []) {
				try {
					fn(data);
				} catch (e) {
					toStderr(errText(e));
				}
			}
		},
	};
}

function execCmd(command, args, o) {
	return new Promise((resolve) => {
		const child = spawn(command, args, { cwd: o.cwd || cwd, shell: false });
		let stdout = "";
		let stderr = "";
		let killed = false;
		child.stdout.on("data", (d) => (stdout += d));
		child.stderr.on("data", (d) => (stderr += d));
		const timer = o.timeout ? setTimeout(() => ((killed = true), child.kill("SIGKILL")), o.timeout) : undefined;
		if (o.signal) o.signal.addEventListener("abort", () => ((killed = true), child.kill("SIGKILL")), { once: true });
		child.on("error", (e) => resolve({ stdout, stderr: stderr + errText(e), code: 127, killed }));
		child.on("close", (code) => {
			if (timer) clearTimeout(timer);
			resolve({ stdout, stderr, code: code ?? 1, killed });
		});
	});
}

// ---- providers (pi.registerProvider; upstream docs/custom-provider.md) ----
// The legacy `ProviderConfig` form: pi applies the data part to its model registry (provider.rs);
// `streamSimple`/`stream` stay here and serve `stream` requests. Calls made in the factory reach
// pi before the load reply, so startup model selection sees them; later calls apply at once.
const providers = new Map(); // name -> {ext, config}
// A complete pi-ai `Provider` object (upstream docs/custom-provider.md "Register a provider",
// object form) as far as headless use needs it: its id, name, baseUrl, models (`getModels()`
// or `models`), api id, `auth.oauth` / `auth.apiKey`, `refreshModels` and `streamSimple`/`stream`
// map onto the legacy config that pi applies.
function providerObjectConfig(obj) {
	let models = [];
	try {
		models = typeof obj.getModels === "function" ? obj.getModels() : Array.isArray(obj.models) ? obj.models : [];
	} catch {
		models = [];
	}
	const api = typeof obj.api === "string" ? obj.api : obj.api && typeof obj.api.api === "string" ? obj.api.api : (models[0] && models[0].api) || obj.id;
	const auth = obj.auth || {};
	const config = { name: obj.name, baseUrl: obj.baseUrl, headers: obj.headers, api, models: models.map((m) => ({ ...m, api: m.api ?? api })) };
	if (auth.oauth) {
		const o = auth.oauth;
		config.oauth = {
			name: o.name ?? obj.name,
			login: (cb) => o.login({
				signal: cb.signal,
				notify: (ev) => (ev && ev.type === "auth_url" ? cb.onAuth(ev) : ev && ev.type === "device_code" ? cb.onDeviceCode(ev) : cb.onProgress(ev && ev.message)),
				prompt: (pr) => (pr && pr.type === "select" ? cb.onSelect(pr) : cb.onPrompt(pr)),
			}),
			refreshToken: (c, signal) => o.refresh(c, signal),
			getApiKey: async (c) => {
				const a = typeof o.toAuth === "function" ? await o.toAuth(c) : undefined;
				return a && a.apiKey !== undefined ? a.apiKey : c.access;
			},
		};
	}
	if (typeof obj.refreshModels === "function") {
		// The native contract: refreshModels returns nothing; getModels() then lists the latest.
		config.refreshModels = async (ctx) => {
			await obj.refreshModels(ctx);
			return typeof obj.getModels === "function" ? obj.getModels() : undefined;
		};
	}
	const stream = typeof obj.streamSimple === "function" ? obj.streamSimple : typeof obj.stream === "function" ? obj.stream : undefined;
	if (stream) config.streamSimple = (model, context, options) => stream.call(obj, model, context, options);
	return config;
}
function registerProvider(ext, name, config) {
	if (name && typeof name === "object" && config === undefined) {
		if (typeof name.id !== "string" || !name.id.trim()) throw new Error("Provider id must not be empty.");
		config = providerObjectConfig(name);
		name = name.id;
	}
	if (typeof name !== "string") throw new Error("Provider name must be a string");
	if (!config || typeof config !== "object") throw new Error("Provider config is required when registering by name");
	const streams = typeof config.streamSimple === "function" || typeof config.stream === "function";
	providers.set(name, { ext, config });
	const oauth = config.oauth && typeof config.oauth === "object" ? { name: typeof config.oauth.name === "string" ? config.oauth.name : undefined } : undefined;
	const refreshes = typeof config.refreshModels === "function";
	callPi("registerProvider", { name, config, streams, oauth, refreshes }).then((r) => {
		if (r && r.error !== undefined) {
			if (providers.get(name) && providers.get(name).config === config) providers.delete(name);
			reportError(ext.path, "register_provider", new Error(r.error));
		}
	});
}
function unregisterProvider(name) {
	providers.delete(name);
	firePi("unregisterProvider", { name });
}

// ---- OAuth of extension providers (the legacy `oauth` config; upstream provider-composer) ----
// pi asks for `login` (the callbacks become pi calls: `authNotify` events are printed,
// `authPrompt` answers a line read by `pi auth login`), `refresh` (the stored credential, as
// auth.json holds it, through `refreshToken(credential, signal)`) and `apiKey`
// (`getApiKey(credential)`).
function oauthOf(name) {
	const p = providers.get(name);
	const o = p && p.config.oauth;
	if (!o || typeof o !== "object") throw new Error(`Provider ${name} has no OAuth login`);
	return o;
}
async function runProviderAuth(msg) {
	const o = oauthOf(msg.provider);
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	try {
		if (msg.op === "refresh") {
			const next = await o.refreshToken(msg.credentials, ac.signal);
			return { credentials: { ...next, type: "oauth" } };
		}
		if (msg.op === "apiKey") {
			const key = await o.getApiKey(msg.credentials);
			return { apiKey: key === undefined || key === null ? null : String(key) };
		}
		if (msg.op === "login") {
			const notify = (event) => firePi("authNotify", { id: msg.id, event });
			const prompt = async (p) => {
				const r = (await callPi("authPrompt", { id: msg.id, prompt: p })) || {};
				if (r.cancelled || typeof r.value !== "string") throw new Error("Login cancelled");
				return r.value;
			};
			const cred = await o.login({
				onAuth: (info) => notify({ type: "auth_url", ...info }),
				onDeviceCode: (info) => notify({ type: "device_code", ...info }),
				onPrompt: (p) => prompt({ type: "text", ...p }),
				onProgress: (message) => notify({ type: "progress", message: String(message ?? "") }),
				onManualCodeInput: () => prompt({ type: "manual_code", message: "Paste the authorization code" }),
				onSelect: async (p) => {
					const options = Array.isArray(p && p.options) ? p.options : [];
					const answer = await prompt({ type: "select", message: p && p.message, options });
					const n = Number(String(answer).trim());
					const pick = Number.isInteger(n) && n >= 1 && n <= options.length ? options[n - 1] : options.find((x) => x && (x.id === answer || x.label === answer));
					return pick ? (pick.id ?? pick.value ?? pick.label) : answer;
				},
				signal: ac.signal,
			});
			return { credentials: { ...cred, type: "oauth" }, name: o.name };
		}
		throw new Error(`unknown auth operation ${msg.op}`);
	} finally {
		aborters.delete(msg.id);
	}
}

// ---- refreshModels (legacy config and object form) ----
// `context` as upstream passes it: {credential, stored, publish, allowNetwork, force, signal,
// baseUrl}. `publish({persist})` goes to pi, which writes models-store.json (persist: null
// deletes the provider's snapshot); the returned models replace the registration's models.
async function runRefreshModels(msg) {
	const p = providers.get(msg.provider);
	const fn = p && p.config.refreshModels;
	if (typeof fn !== "function") return { models: null };
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	let published = false;
	try {
		const models = await fn.call(p.config, {
			credential: msg.credential ?? undefined,
			stored: msg.stored ?? undefined,
			allowNetwork: msg.allowNetwork,
			force: undefined,
			signal: ac.signal,
			baseUrl: p.config.baseUrl,
			publish: async (publication) => {
				const pub = publication || {};
				if ("persist" in pub) {
					const r = (await callPi("publishModels", { provider: msg.provider, persist: pub.persist === undefined ? undefined : pub.persist })) || {};
					if (r.error !== undefined) throw new Error(r.error);
				}
				if (typeof pub.update === "function") pub.update();
				published = true;
				return !ac.signal.aborted;
			},
		});
		return { models: Array.isArray(models) ? models : null, published };
	} finally {
		aborters.delete(msg.id);
	}
}

// ---- virtual models (pi.registerVirtualModel; upstream docs/virtual-models.md) ----
// pi lists the catalog entry; `route` requests run the router with the request pi describes
// (reason, thinkingLevel, state, previous, failed, messages) and a context whose
// ctx.modelRegistry sees the models pi sent along.
const virtualModels = new Map(); // "provider/id" -> {ext, definition}
function registerVirtualModel(ext, definition) {
	const d = definition || {};
	if (typeof d.provider !== "string" || typeof d.id !== "string" || !d.provider.trim() || !d.id.trim()) {
		throw new Error("Virtual model provider and id must not be empty.");
	}
	if (typeof d.route !== "function") throw new Error(`Virtual model ${d.provider}/${d.id} needs a route function.`);
	const key = `${d.provider}/${d.id}`;
	virtualModels.set(key, { ext, definition: d });
	const { route: _route, ...data } = d;
	callPi("registerVirtualModel", { definition: JSON.parse(JSON.stringify(data)) }).then((r) => {
		if (r && r.error !== undefined) {
			if (virtualModels.get(key) && virtualModels.get(key).definition === d) virtualModels.delete(key);
			reportError(ext.path, "register_virtual_model", new Error(r.error));
		}
	});
}
function unregisterVirtualModel(provider, id) {
	virtualModels.delete(`${provider}/${id}`);
	firePi("unregisterVirtualModel", { provider, id });
}
async function runRoute(msg) {
	const v = virtualModels.get(`${msg.request.model.provider}/${msg.request.model.id}`);
	if (!v) throw new Error(`Virtual model ${msg.request.model.provider}/${msg.request.model.id} is not registered.`);
	if (Array.isArray(msg.models)) piState.availableModels = msg.models;
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	try {
		const route = await v.definition.route({ ...msg.request, signal: ac.signal }, context());
		if (!route || typeof route !== "object" || !route.model) throw new Error(`Virtual model ${msg.request.model.provider}/${msg.request.model.id} returned no model.`);
		const state = route.state === undefined || route.state === msg.request.state ? undefined : JSON.parse(JSON.stringify(route.state));
		return { provider: route.model.provider, id: route.model.id, thinkingLevel: route.thinkingLevel ?? null, state: state === undefined ? null : state, stateChanged: state !== undefined };
	} finally {
		aborters.delete(msg.id);
	}
}

// Upstream AssistantMessageEvent -> the normalised event pi reads (wire.rs ProviderStreamEvent).
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
function normUsage(u) {
	const x = u && typeof u === "object" ? u : {};
	const c = x.cost && typeof x.cost === "object" ? x.cost : {};
	return { ...x, input: num(x.input), output: num(x.output), cacheRead: num(x.cacheRead), cacheWrite: num(x.cacheWrite), totalTokens: num(x.totalTokens),
		cost: { ...c, input: num(c.input), output: num(c.output), cacheRead: num(c.cacheRead), cacheWrite: num(c.cacheWrite), total: num(c.total) } };
}
function normMessage(m, model, reason) {
	const x = m && typeof m === "object" ? m : {};
	const { role: _role, ...rest } = x;
	return { ...rest, content: Array.isArray(x.content) ? x.content : [], api: x.api ?? model.api, provider: x.provider ?? model.provider, model: x.model ?? model.id,
		usage: normUsage(x.usage), stopReason: x.stopReason ?? reason ?? "stop", timestamp: typeof x.timestamp === "number" ? x.timestamp : Date.now() };
}
function streamEvent(ev, model) {
	const i = ev.contentIndex;
	switch (ev.type) {
		case "start":
			return { type: "start", partial: normMessage({ ...ev.partial, content: [] }, model, "pending") };
		case "text_start":
		case "thinking_start":
			return { type: ev.type, contentIndex: i };
		case "text_delta":
		case "thinking_delta":
		case "toolcall_delta":
			return { type: ev.type, contentIndex: i, delta: String(ev.delta ?? "") };
		case "text_end":
		case "thinking_end":
			return { type: ev.type, contentIndex: i, content: String(ev.content ?? "") };
		case "toolcall_start": {
			const b = (ev.partial && Array.isArray(ev.partial.content) && ev.partial.content[i]) || {};
			return { type: ev.type, contentIndex: i, id: String(b.id ?? ""), toolName: String(b.name ?? "") };
		}
		case "toolcall_end": {
			const tc = ev.toolCall || {};
			return { type: ev.type, contentIndex: i, toolCall: { ...tc, type: "toolCall", arguments: tc.arguments && typeof tc.arguments === "object" ? tc.arguments : {} } };
		}
		case "done":
			return { type: "done", reason: ev.reason ?? "stop", message: normMessage(ev.message, model, ev.reason) };
		case "error": {
			const reason = ev.reason === "aborted" ? "aborted" : "error";
			const error = normMessage(ev.error, model, reason);
			error.stopReason = reason;
			if (typeof error.errorMessage !== "string") error.errorMessage = reason === "aborted" ? "Request was aborted" : "Unknown error";
			return { type: "error", reason, error };
		}
		default:
			return undefined;
	}
}
// A `stream` request: the provider's streamSimple (else stream) with an AbortSignal that pi's
// `abort` (same id) fires; each event goes back as `stream_event`, a changed partial usage
// first as a `usage` event.
async function runStream(msg) {
	const p = providers.get(msg.provider);
	const fn = p && (p.config.streamSimple || p.config.stream);
	if (typeof fn !== "function") throw new Error(`No stream function registered for provider ${msg.provider}`);
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	try {
		const stream = await fn.call(p.config, msg.model, msg.context, { ...msg.options, signal: ac.signal });
		let usage;
		for await (const ev of stream) {
			if (!ev || typeof ev !== "object") continue;
			const out = streamEvent(ev, msg.model);
			if (!out) continue;
			if (ev.partial && ev.partial.usage && out.type !== "start") {
				const u = JSON.stringify(ev.partial.usage);
				if (u !== usage) {
					usage = u;
					send({ t: "stream_event", id: msg.id, event: { type: "usage", usage: normUsage(ev.partial.usage) } });
				}
			}
			send({ t: "stream_event", id: msg.id, event: out });
			if (out.type === "done" || out.type === "error") break;
		}
	} finally {
		aborters.delete(msg.id);
	}
	return null;
}

// ---- loading ----
async function load(list) {
	paths = list;
	const errors = [];
	for (const path of list) {
		const ext = { path, handlers: new Map(), commands: new Map(), tools: new Map(), flags: new Map() };
		try {
			const url = pathToFileURL(path).href + (generation ? `?pi-gen=${generation}` : "");
			const mod = await import(url);
			const factory = typeof mod.default === "function" ? mod.default : typeof mod === "function" ? mod : undefined;
			if (!factory) throw new Error("the module has no default export function");
			await factory(makeApi(ext));
			extensions.push(ext);
		} catch (e) {
			errors.push({ path, error: errText(e) });
		}
	}
	if (Atomics.load(themeSeen, 0) === 1) await importTheme();
	loadDone = true;
	regDirty = false;
	return { extensions: snapshot(), errors };
}

// What the loaded extensions registered (wire.rs LoadedExtension), in load order.
function snapshot() {
	return extensions.map((x) => ({
		path: x.path,
		events: [...x.handlers.keys()],
		commands: [...x.commands].map(([name, d]) => ({ name, description: d && d.description })),
		tools: [...x.tools.values()].map((t) => ({ name: t.name, seq: toolSeq.get(t.name), label: t.label, description: t.description, parameters: t.parameters, promptSnippet: t.promptSnippet, promptGuidelines: t.promptGuidelines })),
		flags: [...x.flags].map(([name, f]) => ({ name, type: f.type, description: f.description })),
	}));
}

// A fresh instance of every extension (after a session replacement or ctx.reload(), as upstream
// rebinds extensions): the entry modules are imported again under a new URL and their factories
// run again; flag values are kept, the old instances' pi.events listeners are dropped (the new
// instances subscribe again).
async function reloadAll() {
	generation++;
	loadDone = false;
	for (const name of providers.keys()) firePi("unregisterProvider", { name });
	providers.clear();
	for (const v of virtualModels.values()) firePi("unregisterVirtualModel", { provider: v.definition.provider, id: v.definition.id });
	virtualModels.clear();
	extensions.length = 0;
	commands.clear();
	tools.clear();
	toolSeq.clear();
	bus.clear();
	return load(paths);
}

// ---- events ----
async function emitToolCall(event) {
	const ctx = context();
	for (const ext of extensions) {
		for (const h of ext.handlers.get("tool_call") || []) {
			let r;
			try {
				r = await h(event, ctx);
			} catch (e) {
				reportError(ext.path, "tool_call", e);
				return { block: true, reason: `Extension ${ext.path} failed in tool_call: ${errText(e)}` };
			}
			if (r && r.block) return { block: true, reason: r.reason || "" };
		}
	}
	return { block: false, input: event.input };
}

async function emitToolResult(event) {
	const ctx = context();
	let modified = false;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("tool_result") || []) {
			try {
				const r = await h(event, ctx);
				if (!r) continue;
				for (const k of ["content", "details", "isError"]) {
					if (r[k] !== undefined) {
						event[k] = r[k];
						modified = true;
					}
				}
			} catch (e) {
				reportError(ext.path, "tool_result", e);
			}
		}
	}
	return modified ? { content: event.content, details: event.details, isError: event.isError } : null;
}

// `input`: handlers in load order; `transform` replaces the text for the next handler,
// `handled` stops (no run starts), anything else continues.
async function emitInput(event) {
	const ctx = context();
	let text = event.text;
	let images = event.images;
	let transformed = false;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("input") || []) {
			try {
				const r = await h({ ...event, text, images }, ctx);
				if (r && r.action === "handled") return { action: "handled" };
				if (r && r.action === "transform" && typeof r.text === "string") {
					text = r.text;
					images = r.images ?? images;
					transformed = true;
				}
			} catch (e) {
				reportError(ext.path, "input", e);
			}
		}
	}
	return transformed ? { action: "transform", text, images } : { action: "continue" };
}

// `id`: the request's id, for `abort` (session_before_compact's signal).
async function emitGeneric(event, id) {
	const ctx = context();
	// session_before_compact: the branch from the mirror pi pushed just before, and a signal
	// that pi's `abort` message of this request's id fires (the compaction was aborted).
	let ac;
	if (event.type === "session_before_compact") {
		ac = new AbortController();
		if (id !== undefined) aborters.set(id, ac);
		event = { ...event, branchEntries: branchOf(piState.leafId), signal: ac.signal };
	} else if (event.type === "session_before_tree") {
		ac = new AbortController();
		if (id !== undefined) aborters.set(id, ac);
		event = { ...event, signal: ac.signal };
	}
	try {
		return await runGeneric(event, ctx);
	} finally {
		if (ac && aborters.get(id) === ac) aborters.delete(id);
	}
}

async function runGeneric(event, ctx) {
	let result;
	for (const ext of extensions) {
		for (const h of ext.handlers.get(event.type) || []) {
			try {
				const r = await h(event, ctx);
				if (r !== undefined) result = r;
				// session_before_*: the first handler that cancels decides (upstream runner).
				if (event.type.startsWith("session_before") && r && r.cancel === true) return r;
			} catch (e) {
				reportError(ext.path, event.type, e);
			}
		}
	}
	return result ?? null;
}

// `resources_discover` (upstream docs/extensions.md): every handler's `{skillPaths, promptPaths,
// themePaths}`, with the extension that gave it (its paths are that extension's resources).
async function emitResourcesDiscover(event) {
	const ctx = context();
	const out = [];
	const list = (v) => (Array.isArray(v) ? v.filter((p) => typeof p === "string") : []);
	for (const ext of extensions) {
		for (const h of ext.handlers.get("resources_discover") || []) {
			try {
				const r = await h(event, ctx);
				if (r && typeof r === "object") out.push({ path: ext.path, skillPaths: list(r.skillPaths), promptPaths: list(r.promptPaths), themePaths: list(r.themePaths) });
			} catch (e) {
				reportError(ext.path, "resources_discover", e);
			}
		}
	}
	return out;
}

async function runCommand(name, args) {
	const c = commands.get(name);
	if (!c) throw new Error(`Unknown extension command: ${name}`);
	try {
		await c.def.handler(args, commandContext());
	} catch (e) {
		reportError(`command:${name}`, "command", e);
	}
	return null;
}

// A tool's execute gets an AbortSignal that pi's `abort` message (same id) fires; onUpdate
// partial results go back as `tool_update` (tool_execution_update for the client).
async function runTool(msg) {
	const t = tools.get(msg.name);
	if (!t) throw new Error(`Tool ${msg.name} not found`);
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	try {
		const ctx = { ...context(), signal: ac.signal };
		const r = await t.def.execute(msg.toolCallId, msg.params, ac.signal, (partial) => send({ t: "tool_update", id: msg.id, partial: partial ?? null }), ctx);
		return r ? { content: r.content, details: r.details, isError: r.isError } : { content: [] };
	} finally {
		aborters.delete(msg.id);
	}
}

// ---- run-shaping events: before_agent_start, context, user_bash, model_select ----
// Handlers run in load order, then registration order (upstream "Handler Composition").

// before_agent_start: each handler sees the system prompt as the previous one left it
// (`event.systemPrompt`, `ctx.getSystemPrompt()`); returned `message`s are collected in order.
// Reply: {messages, systemPrompt?} (systemPrompt only when a handler returned one).
// `event.systemPromptOptions` is mutable and shared by the handlers (upstream 1.6): setting
// `forceSystemPrompt` replaces the whole prompt for this run, as returning `systemPrompt` does
// (later handlers see it); a changed `selectedTools` changes the active tools, as
// `pi.setActiveTools()` would (they stay so after the run). The other fields pi rebuilds this
// run's prompt from (PROMPT_EDITABLE): those the handlers changed go back as `promptEdits`.
const PROMPT_EDITABLE = ["customPrompt", "toolSnippets", "toolGuidelines", "promptGuidelines", "appendSystemPrompt", "sections", "contextFiles"];
async function emitBeforeAgentStart(base) {
	let systemPrompt = base.systemPrompt;
	let forced = false;
	const messages = [];
	const given = base.systemPromptOptions || {};
	// Upstream's key order, every key present (`normalizeBuildSystemPromptOptions`).
	const options = {
		customPrompt: given.customPrompt,
		forceSystemPrompt: undefined,
		selectedTools: given.selectedTools || [],
		hiddenTools: given.hiddenTools || [],
		toolSnippets: given.toolSnippets || {},
		toolGuidelines: given.toolGuidelines || {},
		promptGuidelines: given.promptGuidelines || [],
		appendSystemPrompt: given.appendSystemPrompt ?? "",
		sections: given.sections || {},
		cwd: given.cwd,
		contextFiles: given.contextFiles || [],
		skills: given.skills || [],
	};
	const editableBefore = PROMPT_EDITABLE.map((k) => JSON.stringify(options[k]));
	const toolsBefore = JSON.stringify(options.selectedTools);
	let force = options.forceSystemPrompt;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("before_agent_start") || []) {
			const ctx = { ...context(), getSystemPrompt: () => systemPrompt };
			const event = {
				messageType: base.messageType,
				prompt: base.prompt,
				images: base.images,
				type: "before_agent_start",
				systemPromptOptions: options,
				get systemPrompt() {
					return systemPrompt;
				},
			};
			try {
				const r = await h(event, ctx);
				if (typeof options.forceSystemPrompt === "string" && options.forceSystemPrompt !== force) {
					force = options.forceSystemPrompt;
					systemPrompt = force;
					forced = true;
				}
				if (!r) continue;
				if (r.message) messages.push(r.message);
				if (r.systemPrompt !== undefined) {
					systemPrompt = String(r.systemPrompt);
					forced = true;
				}
			} catch (e) {
				reportError(ext.path, "before_agent_start", e);
			}
		}
	}
	if (Array.isArray(options.selectedTools) && JSON.stringify(options.selectedTools) !== toolsBefore) {
		const names = options.selectedTools.filter((n) => typeof n === "string");
		try {
			await callApi("setActiveTools", { names });
		} catch (e) {
			toStderr(`pi: systemPromptOptions.selectedTools: ${errText(e)}`);
		}
	}
	const reply = forced ? { messages, systemPrompt } : { messages };
	const promptEdits = {};
	PROMPT_EDITABLE.forEach((k, i) => {
		if (JSON.stringify(options[k]) !== editableBefore[i]) promptEdits[k] = options[k] ?? "";
	});
	if (Object.keys(promptEdits).length > 0) reply.promptEdits = promptEdits;
	return reply;
}

// context: handlers chain (each sees the list the previous returned or edited in place).
// Reply: {messages} when the list changed, else null (pi keeps its own copy).
async function emitContext(base) {
	let messages = base.messages;
	const before = JSON.stringify(messages);
	for (const ext of extensions) {
		for (const h of ext.handlers.get("context") || []) {
			try {
				const event = { type: "context", messages: messages.filter((m) => m && m.role !== "system") };
				const r = await h(event, context());
				messages = r && Array.isArray(r.messages) ? r.messages : event.messages;
			} catch (e) {
				reportError(ext.path, "context", e);
			}
		}
	}
	return JSON.stringify(messages) === before ? null : { messages };
}

// context_with_system: handlers chain over the full transcript (system messages included);
// what they return is sent as it is. A handler that drops the leading system message is
// reported (the request then has no prompt or initial tools) but its output is kept, as
// upstream 1.6. Reply: {messages} when the list changed, else null.
async function emitContextWithSystem(base) {
	let messages = base.messages;
	const before = JSON.stringify(messages);
	for (const ext of extensions) {
		for (const h of ext.handlers.get("context_with_system") || []) {
			try {
				const hadHead = messages[0]?.role === "system";
				const r = await h({ type: "context_with_system", messages }, context());
				if (r && Array.isArray(r.messages)) messages = r.messages;
				if (hadHead && messages[0]?.role !== "system") {
					reportError(ext.path, "context_with_system", new Error(
						"Handler removed the leading system message; the request has no prompt or initial tool declarations. Keep it at index 0 or replace a dropped prefix with getCurrentSystemMessage().",
					));
				}
			} catch (e) {
				reportError(ext.path, "context_with_system", e);
			}
		}
	}
	return JSON.stringify(messages) === before ? null : { messages };
}

const isBashResult = (r) =>
	typeof r === "object" && r !== null && typeof r.output === "string" && "exitCode" in r &&
	(r.exitCode === undefined || typeof r.exitCode === "number") && typeof r.cancelled === "boolean" &&
	typeof r.truncated === "boolean" && (r.fullOutputPath === undefined || typeof r.fullOutputPath === "string");
const isUserBashResult = (v) => {
	if (typeof v !== "object" || v === null) return false;
	const hasOps = v.operations !== undefined;
	if (hasOps === (v.result !== undefined)) return false;
	return hasOps ? typeof v.operations === "object" && v.operations !== null && typeof v.operations.exec === "function" : isBashResult(v.result);
};

// user_bash: the first handler returning a valid result wins. `{result}` is recorded as is;
// `{operations}` runs the (prefixed) command through `operations.exec` here, output streamed to
// pi as `tool_update` deltas. A handler that throws or returns anything else fails the command.
// Reply: null (run locally), {result} or {executed: {output, exitCode, cancelled}}.
async function emitUserBash(msg) {
	const event = msg.event;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("user_bash") || []) {
			try {
				const r = await h(event, context());
				if (r === undefined) continue;
				if (!isUserBashResult(r)) {
					throw new Error("Invalid user_bash handler result: return undefined for local execution or exactly one valid { operations } or { result } object");
				}
				if (r.result !== undefined) return { result: r.result };
				return { executed: await runBashOperations(r.operations, msg) };
			} catch (e) {
				reportError(ext.path, "user_bash", e);
				throw e;
			}
		}
	}
	return null;
}

async function runBashOperations(ops, msg) {
	const ac = new AbortController();
	aborters.set(msg.id, ac);
	let output = "";
	const decoder = new TextDecoder();
	try {
		const onData = (data) => {
			const text = typeof data === "string" ? data : decoder.decode(data, { stream: true });
			if (!text) return;
			output += text;
			send({ t: "tool_update", id: msg.id, partial: text });
		};
		const r = await ops.exec(msg.command, msg.event.cwd, { onData, signal: ac.signal });
		const tail = decoder.decode();
		if (tail) onData(tail);
		const exitCode = r && typeof r.exitCode === "number" ? r.exitCode : undefined;
		return { output, exitCode, cancelled: ac.signal.aborted };
	} catch (e) {
		if (ac.signal.aborted) return { output, exitCode: undefined, cancelled: true };
		throw e;
	} finally {
		aborters.delete(msg.id);
	}
}

// model_select: a notification, but pi waits for it (upstream awaits it before answering).
async function emitModelSelect(event) {
	return emitGeneric(event);
}

// `event.context` as the proposal so far would leave it: `custom` drafts add an entry,
// `custom_message` drafts an entry and a message (user-role for the model). Other drafts are
// shown as entries only (their effect on the messages is pi's to compute once committed).
function previewContext(context, entries) {
	if (!context || !entries.length) return context;
	const out = { ...context, contextEntries: [...(context.contextEntries || [])], contextMessages: [...(context.contextMessages || [])], llmMessages: [...(context.llmMessages || [])] };
	const now = Date.now();
	for (const d of entries) {
		if (!d || typeof d !== "object") continue;
		if (d.type === "custom_message") {
			const m = { role: "custom", customType: d.customType, content: d.content, display: d.display === true, ...(d.details !== undefined ? { details: d.details } : {}), timestamp: now };
			out.contextEntries.push({ sourceEntry: d, messages: [m] });
			out.contextMessages.push(m);
			out.llmMessages.push({ role: "user", content: typeof d.content === "string" ? [{ type: "text", text: d.content }] : d.content, timestamp: now });
			out.canContinue = true;
		} else {
			out.contextEntries.push({ sourceEntry: d, messages: [] });
		}
	}
	return out;
}

// turn_end / agent_before_settle: actionable boundaries. Each handler sees the proposal so
// far (`event.entries`, `event.continue`); a returned `entries` or `continue` replaces only that
// field. A handler that throws is reported and the others still run.
// Reply: {entries, continue} (pi validates and appends the entries after all handlers).
async function emitBoundary(base) {
	let entries = Array.isArray(base.entries) ? base.entries : [];
	let cont = base.continue === true;
	for (const ext of extensions) {
		for (const h of ext.handlers.get(base.type) || []) {
			const event = { ...base, entries: [...entries], continue: cont, context: previewContext(base.context, entries) };
			try {
				const r = await h(event, context());
				if (!r || typeof r !== "object") continue;
				if (r.entries !== undefined) {
					if (!Array.isArray(r.entries)) throw new Error(`${base.type} entries must be an array`);
					entries = r.entries;
				}
				if (r.continue !== undefined) cont = r.continue === true;
			} catch (e) {
				reportError(ext.path, base.type, e);
			}
		}
	}
	return { entries, continue: cont };
}

// message_end: handlers chain on the finalized message; a returned `message` replaces it for
// the next handler and for pi, and must keep the role (else reported, the message so far kept).
// Reply: {message} (the final one, replaced or not).
async function emitMessageEnd(base) {
	let message = base.message;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("message_end") || []) {
			try {
				const r = await h({ ...base, message }, context());
				// A falsy `message` leaves the message as it is (as upstream 1.6).
				if (!r || typeof r !== "object" || !r.message) continue;
				const m = r.message;
				if (m.role !== message.role) {
					// Upstream 1.6's error text (an extension_error; the message so far is kept).
					reportError(ext.path, "message_end", new Error("message_end handlers must return a message with the same role"));
					continue;
				}
				message = m;
			} catch (e) {
				reportError(ext.path, "message_end", e);
			}
		}
	}
	return { message };
}

// ---- provider hooks (upstream docs/extensions.md "Provider Events") ----

// before_provider_request: handlers in load order; a value other than undefined replaces the
// payload for later handlers and the request. Reply: {payload} when one was returned, else null.
async function emitProviderRequest(base) {
	let payload = base.payload;
	let replaced = false;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("before_provider_request") || []) {
			try {
				const r = await h({ type: "before_provider_request", payload }, context());
				if (r !== undefined) {
					payload = r;
					replaced = true;
				}
			} catch (e) {
				reportError(ext.path, "before_provider_request", e);
			}
		}
	}
	return replaced ? { payload } : null;
}

// before_provider_headers: handlers mutate `event.headers` in place (a string sets, null
// deletes). Reply: {headers} as the handlers left them (non-string values read as null).
async function emitProviderHeaders(base) {
	const headers = { ...(base.headers || {}) };
	for (const ext of extensions) {
		for (const h of ext.handlers.get("before_provider_headers") || []) {
			try {
				await h({ type: "before_provider_headers", headers }, context());
			} catch (e) {
				reportError(ext.path, "before_provider_headers", e);
			}
		}
	}
	const out = {};
	for (const [k, v] of Object.entries(headers)) out[k] = typeof v === "string" ? v : null;
	return { headers: out };
}

const RUN_EVENTS = {
	before_provider_request: emitProviderRequest,
	before_provider_headers: emitProviderHeaders,
	message_end: emitMessageEnd,
	turn_end: emitBoundary,
	agent_before_settle: emitBoundary,
	before_agent_start: emitBeforeAgentStart,
	context: emitContext,
	context_with_system: emitContextWithSystem,
	model_select: emitModelSelect,
};

async function handle(msg) {
	switch (msg.t) {
		case "load":
			mode = msg.mode;
			cwd = msg.cwd;
			return load(msg.paths);
		case "tool_call":
			return emitToolCall(msg.event);
		case "tool_result":
			return emitToolResult(msg.event);
		case "event":
			if (msg.event.type === "session_start" && msg.event.reason === "new") await runPendingSetup();
			if (msg.event.type === "input") return emitInput(msg.event);
			if (msg.event.type === "resources_discover") return emitResourcesDiscover(msg.event);
			return (RUN_EVENTS[msg.event.type] || emitGeneric)(msg.event, msg.id);
		case "user_bash":
			return emitUserBash(msg);
		case "command":
			return runCommand(msg.name, msg.args);
		case "tool":
			return runTool(msg);
		case "stream":
			return runStream(msg);
		case "provider_auth":
			return runProviderAuth(msg);
		case "refresh_models":
			return runRefreshModels(msg);
		case "route":
			return runRoute(msg);
		case "ping":
			// After the immediates queued before it (a deferred sendUserMessage).
			return new Promise((resolve) => setImmediate(() => resolve(null)));
		case "reload":
			return reloadAll();
		default:
			throw new Error(`unknown message ${msg.t}`);
	}
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
	let msg;
	try {
		msg = JSON.parse(line);
	} catch {
		return;
	}
	if (msg.t === "ui_response") {
		const p = uiPending.get(msg.id);
		if (!p) return;
		let v;
		if (msg.cancelled === true) v = p.fallback;
		else if (p.method === "confirm") v = msg.confirmed ?? false;
		else v = "value" in msg ? msg.value : undefined;
		p.done(v);
		return;
	}
	if (msg.t === "abort") {
		const ac = aborters.get(msg.id);
		if (ac) ac.abort();
		// The request may have come in the same chunk, its handling not yet started (it
		// starts in a microtask): try again once the microtasks have run.
		else setImmediate(() => aborters.get(msg.id)?.abort());
		return;
	}
	// Mirror updates apply at once, in order with the requests around them.
	if (msg.t === "state") {
		applyState(msg.state);
		return;
	}
	if (msg.t === "flags") {
		flagValues = new Map(Object.entries(msg.values || {}));
		return;
	}
	if (msg.t === "call_result") {
		const r = calls.get(msg.id);
		if (r) {
			calls.delete(msg.id);
			r(msg.result);
		}
		return;
	}
	Promise.resolve()
		.then(() => handle(msg))
		.then(
			(result) => {
				flushRegistered();
				if (msg.id !== undefined) send({ t: "reply", id: msg.id, ok: true, result: result ?? null });
			},
			(e) => {
				flushRegistered();
				if (msg.id !== undefined) send({ t: "reply", id: msg.id, ok: false, error: errText(e) });
			},
		);
});
rl.on("close", () => process.exit(0));
