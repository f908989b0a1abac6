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
import { register } from "node:module";
import { MessageChannel } from "node:worker_threads";

const protoWrite = process.stdout.write.bind(process.stdout);
const toStderr = (...a) => process.stderr.write(a.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" ") + "\n");
console.log = console.info = console.debug = console.warn = console.error = toStderr;
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

function send(msg) {
	protoWrite(JSON.stringify(msg) + "\n");
}

// ---- virtual modules (the imports upstream maps for extensions) ----
const VIRTUAL = [
	"@earendil-works/pi-coding-agent",
	"@earendil-works/pi-agent-core",
	"@earendil-works/pi-ai",
	"@mariozechner/pi-coding-agent",
	"@mariozechner/pi-agent-core",
	"@mariozechner/pi-ai",
	"typebox",
	"typebox/compile",
	"typebox/value",
	"@sinclair/typebox",
	"@earendil-works/pi-tui",
	"@mariozechner/pi-tui",
];
// Names the virtual modules export. TUI pieces (components, themes, key helpers) are inert
// stand-ins: headless, as in upstream's RPC mode, they are accepted and do nothing.
const REAL = ["Type", "StringEnum", "defineTool", "Compile", "TypeCompiler", "Value", "getAgentDir", "isToolCallEventType"];
const INERT = ["getSettingsListTheme", "getMarkdownTheme", "getSelectListTheme", "DynamicBorder", "BorderedLoader", "CustomEditor",
	"keyHint", "rawKeyHint", "highlightCode", "Container", "Text", "SettingsList", "SelectList", "Box", "Spacer", "Markdown", "Input",
	"Editor", "Loader", "Image", "Key", "matchesKey", "truncateToWidth", "visibleWidth", "wrapTextWithAnsi", "CancellableLoader", "TruncatedText"];
// Loader hooks (they run on Node's loader thread): the virtual modules above; `.ts`/`.mts`/`.cts`
// files are transpiled by pi (oxc, in Rust) and asked for over a MessagePort; inside TypeScript,
// `./x.js` falls back to `./x.ts` and extensionless `./x` to `./x.ts` / `./x/index.ts`, as tsc
// resolution does. Everything else resolves as Node does (the extension's own node_modules).
const hooks = `
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
const V = ${JSON.stringify(VIRTUAL)};
let port; let n = 0; const waiting = new Map();
export function initialize(data) {
	port = data.port;
	port.on("message", (m) => { const w = waiting.get(m.id); waiting.delete(m.id); if (w) w(m); });
}
const isTs = (u) => /\\.(ts|mts|cts)$/.test(u.split("?")[0]);
// A virtual module is made per importer, exporting every name the importer asks of it: a name
// the host does not provide is undefined, not a link error (upstream's loader, jiti, is as
// forgiving). The names come from the importer's import/export-from clauses for the module.
const KNOWN = new Set(${JSON.stringify([...REAL, ...INERT])});
const IDENT = /^[A-Za-z_$][\\w$]*$/;
function askedNames(parentURL, spec) {
	let src;
	try { src = readFileSync(fileURLToPath(parentURL.split("?")[0]), "utf8"); } catch { return []; }
	const q = spec.replace(/[.*+?^$()|[\\]\\\\\\/{}]/g, "\\\\$&");
	const re = new RegExp("(?:import|export)\\\\s+(?:type\\\\s+)?([^;\\"']*?)\\\\s*from\\\\s*[\\"']" + q + "[\\"']", "g");
	const out = new Set();
	for (const m of src.matchAll(re)) {
		const braces = /\\{([^}]*)\\}/.exec(m[1]);
		if (!braces) continue;
		for (const part of braces[1].split(",")) {
			const name = part.trim().replace(/^type\\s+/, "").split(/\\s+as\\s+/)[0].trim();
			if (IDENT.test(name) && name !== "default" && !KNOWN.has(name)) out.add(name);
		}
	}
	return [...out];
}
export async function resolve(spec, ctx, next) {
	if (V.includes(spec)) {
		const from = ctx.parentURL && ctx.parentURL.startsWith("file:") ? "?from=" + encodeURIComponent(ctx.parentURL) : "";
		return { url: "pi-virtual:" + spec + from, shortCircuit: true };
	}
	try {
		return await next(spec, ctx);
	} catch (e) {
		if (!ctx.parentURL || !isTs(ctx.parentURL) || !(spec.startsWith(".") || spec.startsWith("/"))) throw e;
		const alts = spec.endsWith(".js") ? [spec.slice(0, -3) + ".ts"] : /\\.[a-z]+$/.test(spec) ? [] : [spec + ".ts", spec + "/index.ts"];
		for (const alt of alts) {
			try { return await next(alt, ctx); } catch {}
		}
		throw e;
	}
}
export async function load(url, ctx, next) {
	if (url.startsWith("pi-virtual:")) {
		const [spec, query] = url.slice("pi-virtual:".length).split("?from=");
		const extra = query ? askedNames(decodeURIComponent(query), spec) : [];
		const names = [...KNOWN, ...extra].join(", ");
		return { format: "module", shortCircuit: true,
			source: "const m = globalThis.__piVirtual; export default m; export const { " + names + " } = m;" };
	}
	if (url.startsWith("file:") && isTs(url)) {
		const r = await new Promise((res) => { const id = ++n; waiting.set(id, res); port.postMessage({ id, path: fileURLToPath(url) }); });
		if (r.error !== undefined) throw new SyntaxError(r.error);
		return { format: "module", source: r.code, shortCircuit: true };
	}
	return next(url, ctx);
}`;
const { port1, port2 } = new MessageChannel();
register("data:text/javascript," + encodeURIComponent(hooks), { data: { port: port2 }, transferList: [port2] });
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
	hasPendingMessages: false, contextUsage: undefined, systemPrompt: "", commands: [],
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
		return new Proxy({}, { get: () => (s) => s });
	},
};

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
		modelRegistry: {},
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

// The command context (upstream ExtensionCommandContext): session control through pi's session
// runtime, the same path as the RPC new_session / fork / switch_session commands.
async function afterReplace(result, o) {
	if (result && result.cancelled === false && o && typeof o.withSession === "function") {
		const ctx = commandContext();
		await o.withSession({ ...ctx, sendUserMessage: async (c, so) => firePi("sendUserMessage", { content: c, options: so }), sendMessage: async (m, so) => firePi("sendMessage", { message: m, options: so }) });
	}
	return result;
}
function commandContext() {
	return {
		...context(),
		waitForIdle: () => callApi("waitForIdle", {}).then(() => undefined),
		newSession: async (o) => afterReplace(await callApi("newSession", { parentSession: o && o.parentSession }), o),
		fork: async (entryId, o) => afterReplace(await callApi("fork", { entryId, position: (o && o.position) || "before" }), o),
		switchSession: async (sessionPath, o) => afterReplace(await callApi("switchSession", { sessionPath }), o),
		navigateTree: async () => {
			throw new Error("navigateTree is not supported by this pi build yet");
		},
		reload: () => callApi("reload", {}).then(() => undefined),
		getSystemPromptOptions: () => ({ cwd: piState.cwd }),
	};
}

function makeApi(ext) {
	return {
		on(event, handler) {
			if (!ext.handlers.has(event)) ext.handlers.set(event, []);
			ext.handlers.get(event).push(handler);
		},
		registerCommand(name, def) {
			ext.commands.set(name, def);
			commands.set(name, { ext, def });
		},
		registerTool(def) {
			ext.tools.set(def.name, def);
			tools.set(def.name, { ext, def });
		},
		registerShortcut: noop,
		registerFlag: (name, o) => ext.flags.set(name, { type: (o && o.type) || "boolean", default: o && o.default, description: o && o.description }),
		getFlag: (name) => (ext.flags.has(name) ? (flagValues.has(name) ? flagValues.get(name) : ext.flags.get(name).default) : undefined),
		registerMessageRenderer: noop,
		registerEntryRenderer: noop,
		registerProvider: (name, config) => registerProvider(ext, name, config),
		unregisterProvider: (name) => unregisterProvider(name),
		sendMessage: (message, o) => firePi("sendMessage", { message, options: o }),
		sendUserMessage: (content, o) => firePi("sendUserMessage", { content, options: o }),
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
function registerProvider(ext, name, config) {
	if (typeof name !== "string") {
		reportError(ext.path, "register_provider", new Error("registering a complete Provider object is not supported by this pi build; use pi.registerProvider(name, config)"));
		return;
	}
	if (!config || typeof config !== "object") throw new Error("Provider config is required when registering by name");
	const streams = typeof config.streamSimple === "function" || typeof config.stream === "function";
	providers.set(name, { ext, config });
	callPi("registerProvider", { name, config, streams }).then((r) => {
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
	return {
		extensions: extensions.map((x) => ({
			path: x.path,
			events: [...x.handlers.keys()],
			commands: [...x.commands].map(([name, d]) => ({ name, description: d && d.description })),
			tools: [...x.tools.values()].map((t) => ({ name: t.name, label: t.label, description: t.description, parameters: t.parameters, promptSnippet: t.promptSnippet, promptGuidelines: t.promptGuidelines })),
			flags: [...x.flags].map(([name, f]) => ({ name, type: f.type, description: f.description })),
		})),
		errors,
	};
}

// A fresh instance of every extension (after a session replacement or ctx.reload(), as upstream
// rebinds extensions): the entry modules are imported again under a new URL and their factories
// run again; flag values are kept, the old instances' pi.events listeners are dropped (the new
// instances subscribe again).
async function reloadAll() {
	generation++;
	for (const name of providers.keys()) firePi("unregisterProvider", { name });
	providers.clear();
	extensions.length = 0;
	commands.clear();
	tools.clear();
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
	let transformed = false;
	for (const ext of extensions) {
		for (const h of ext.handlers.get("input") || []) {
			try {
				const r = await h({ ...event, text }, ctx);
				if (r && r.action === "handled") return { action: "handled" };
				if (r && r.action === "transform" && typeof r.text === "string") {
					text = r.text;
					transformed = true;
				}
			} catch (e) {
				reportError(ext.path, "input", e);
			}
		}
	}
	return transformed ? { action: "transform", text } : { action: "continue" };
}

async function emitGeneric(event) {
	const ctx = context();
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
async function emitBeforeAgentStart(base) {
	let systemPrompt = base.systemPrompt;
	let forced = false;
	const messages = [];
	const options = base.systemPromptOptions || {};
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
	return forced ? { messages, systemPrompt } : { messages };
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

const RUN_EVENTS = {
	message_end: emitMessageEnd,
	turn_end: emitBoundary,
	agent_before_settle: emitBoundary,
	before_agent_start: emitBeforeAgentStart,
	context: emitContext,
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
			if (msg.event.type === "input") return emitInput(msg.event);
			return (RUN_EVENTS[msg.event.type] || emitGeneric)(msg.event);
		case "user_bash":
			return emitUserBash(msg);
		case "command":
			return runCommand(msg.name, msg.args);
		case "tool":
			return runTool(msg);
		case "stream":
			return runStream(msg);
		case "ping":
			return null;
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
			(result) => msg.id !== undefined && send({ t: "reply", id: msg.id, ok: true, result: result ?? null }),
			(e) => msg.id !== undefined && send({ t: "reply", id: msg.id, ok: false, error: errText(e) }),
		);
});
rl.on("close", () => process.exit(0));
