//! The QuickJS sandbox a `codemode` script runs in (upstream 1.6 `docs/codemode.md` "Scripts",
//! "Globals", "Limits"), on the `rquickjs` crate.
//!
//! The script is the body of an async function; the globals are defined by a prelude in terms
//! of one host object whose functions exchange JSON strings with [`Host`]. Nothing else is
//! reachable: no module loader, no file system, no network, no timers. Tool calls block the
//! sandbox thread (run it on a blocking thread) until the host answers, so every promise a
//! script awaits is settled by the time the job queue is empty; a script still waiting then
//! waits on a promise that can never settle and fails.
//!
//! Limits: `deadline` (the options line's `timeout_ms`) and `cancel` stop the VM through
//! QuickJS's interrupt handler, also inside a loop that never calls a tool; the VM's heap is
//! capped at [`MEMORY_LIMIT`] bytes (running out throws QuickJS's own
//! `InternalError: out of memory`).

use rquickjs::{Context, Ctx, Function, Object, Runtime};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Heap limit of one script's VM, in bytes (upstream: 256 MB).
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;
/// Most characters of text and base64 image data a script may output (upstream: 16777216).
pub const MAX_OUTPUT_CHARS: usize = 16_777_216;
/// Most `text()`, `image()` and `console` calls of one script (upstream: 100000).
pub const MAX_OUTPUT_CALLS: usize = 100_000;
/// Largest JSON text of one stored value, in characters (upstream: 262144).
pub const MAX_STORE_VALUE: usize = 262_144;
/// Largest JSON text of all stored values together, in characters (upstream: 1048576).
pub const MAX_STORE_TOTAL: usize = 1_048_576;

/// What a script's globals ask of the session. Every method is called on the sandbox thread
/// and may block (tool calls do).
pub trait Host: Send + Sync {
    /// Calls the tool `name` (its session name, e.g. `mcp__fake__echo`) with `args`: the value
    /// the script resolves to, or the error text it rejects with.
    fn call_tool(&self, name: &str, args: Value) -> Result<Value, String>;
    /// `searchTools(query, options)`: `[{name, description}]`.
    fn search(&self, query: &str, options: &Value) -> Value;
    /// `describeTool(name)`: description and TypeScript declaration, `None` = undefined.
    fn describe_tool(&self, name: &str) -> Option<String>;
    /// `describeNamespace(name)`: `{name, description?, instructions?, tools}`, `None` =
    /// undefined.
    fn describe_namespace(&self, name: &str) -> Option<Value>;
}

/// What the script may call and see, fixed for one run.
pub struct Setup {
    /// `(identifier, tool name)` for every method of `tools`.
    pub names: Vec<(String, String)>,
    /// `ALL_TOOLS`: `[{name, description}]`.
    pub all_tools: Value,
    /// The values `load()` sees at the start (a JSON object).
    pub store: Value,
    /// Hard deadline of the whole script (`timeout_ms`), `None` = none.
    pub deadline: Option<Instant>,
    /// `timeout_ms` as given, for the error text.
    pub timeout_ms: Option<u64>,
    /// Fires on abort.
    pub cancel: CancellationToken,
}

/// One output item, in the order the script produced it.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// From `text()` or `return`.
    Text(String),
    /// From `image()`: base64 data and MIME type.
    Image {
        /// Base64 bytes, no `data:` prefix.
        data: String,
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        mime: String,
    },
}

/// How a run ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Output items in order.
    pub items: Vec<Item>,
    /// One line per `console` call.
    pub console: Vec<String>,
    /// `None`: completed; else the error text after `Script error:`.
    pub error: Option<String>,
    /// `store()` writes in order: `(key, Some(json))` or `(key, None)` for a deletion.
    pub store_writes: Vec<(String, Option<Value>)>,
}

#[derive(Default)]
struct State {
    outcome: Outcome,
    chars: usize,
    calls: usize,
    store_sizes: std::collections::BTreeMap<String, usize>,
    done: bool,
}

impl State {
    fn count(&mut self, chars: usize) -> Result<(), String> {
        self.calls += 1;
        self.chars += chars;
        if self.calls > MAX_OUTPUT_CALLS {
            return Err(format!(
                "the script made more than {MAX_OUTPUT_CALLS} text(), image() and console calls; write large data to a file with a tool instead"
            ));
        }
        if self.chars > MAX_OUTPUT_CHARS {
            return Err(format!(
                "the script's output passed {MAX_OUTPUT_CHARS} characters; write large data to a file with a tool instead"
            ));
        }
        Ok(())
    }
}

/// Why the interrupt handler stopped the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Timeout,
    Aborted,
}

const PRELUDE: &str = r#"(() => {
  const H = globalThis.__pi;
  delete globalThis.__pi;
  const init = JSON.parse(H.init());
  const show = (v) => {
    if (typeof v === "string") return v;
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s;
  };
  const check = (err) => { if (err) throw new Error(err); };
  const EXIT = Object.freeze({});
  const define = (name, value) => Object.defineProperty(globalThis, name, { value, writable: false, configurable: false, enumerable: false });
  define("text", (value) => { check(H.text(show(value))); });
  define("image", (value) => { check(H.image(typeof value === "string" ? JSON.stringify({ url: value }) : show(value))); });
  const line = (...args) => { check(H.console(args.map(show).join(" "))); };
  define("console", Object.freeze({ log: line, info: line, warn: line, error: line, debug: line }));
  define("exit", () => { throw EXIT; });
  const kept = init.store;
  define("store", (key, value) => {
    key = String(key);
    const json = value === undefined ? undefined : JSON.stringify(value);
    check(H.store(key, json === undefined ? "" : json, json === undefined));
    if (json === undefined) delete kept[key]; else kept[key] = JSON.parse(json);
  });
  define("load", (key) => {
    const v = kept[String(key)];
    return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
  });
  const tools = {};
  for (const [id, name] of init.names) {
    tools[id] = async (args) => {
      const r = JSON.parse(H.call(name, JSON.stringify(args === undefined ? {} : args)));
      if (Object.prototype.hasOwnProperty.call(r, "err")) throw new Error(r.err);
      return r.ok;
    };
  }
  define("tools", Object.freeze(tools));
  define("ALL_TOOLS", Object.freeze(init.all));
  define("searchTools", async (query, options) => JSON.parse(H.search(String(query), JSON.stringify(options === undefined ? {} : options))));
  define("describeTool", async (name) => { const r = JSON.parse(H.describeTool(String(name))); return r === null ? undefined : r; });
  define("describeNamespace", async (name) => { const r = JSON.parse(H.describeNamespace(String(name))); return r === null ? undefined : r; });
  globalThis.__pi_finish = (p) => {
    delete globalThis.__pi_finish;
    p.then(
      (v) => { if (v !== undefined) check(H.text(show(v))); H.done(true, ""); },
      (e) => {
        if (e === EXIT) { H.done(true, ""); return; }
        if (e instanceof Error) {
          const stack = typeof e.stack === "string" ? e.stack.replace(/\s+$/, "") : "";
          H.done(false, stack ? String(e) + "\n" + stack : String(e));
        } else {
          H.done(false, "Uncaught " + show(e));
        }
      });
  };
})();"#;

/// Runs `code` (the script without its options line) to the end; blocks the calling thread.
pub fn run(code: &str, setup: Setup, host: Arc<dyn Host>) -> Outcome {
    let state = Arc::new(Mutex::new(State::default()));
    let stop: Arc<Mutex<Option<Stop>>> = Arc::new(Mutex::new(None));
    let result = run_vm(code, &setup, host, &state, &stop);
    let mut st = match Arc::try_unwrap(state) {
        Ok(m) => m
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        Err(shared) => std::mem::take(&mut *lock(&shared)),
    };
    let stopped = *lock(&stop);
    match stopped {
        Some(Stop::Timeout) => {
            st.outcome.error = Some(format!(
                "Script timed out after {} ms",
                setup.timeout_ms.unwrap_or(0)
            ))
        }
        Some(Stop::Aborted) => st.outcome.error = Some("Script aborted".into()),
        None => {
            if let Err(e) = result {
                st.outcome.error = Some(e);
            } else if !st.done {
                st.outcome.error = Some(
                    "Error: the script waits on a promise that can never settle (no tool call is pending, and there are no timers)"
                        .into(),
                );
            }
        }
    }
    st.outcome
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn run_vm(
    code: &str,
    setup: &Setup,
    host: Arc<dyn Host>,
    state: &Arc<Mutex<State>>,
    stop: &Arc<Mutex<Option<Stop>>>,
) -> Result<(), String> {
    let rt = Runtime::new().map_err(|e| format!("cannot start the sandbox: {e}"))?;
    rt.set_memory_limit(MEMORY_LIMIT);
    rt.set_max_stack_size(512 * 1024);
    {
        let deadline = setup.deadline;
        let cancel = setup.cancel.clone();
        let stop = stop.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            if lock(&stop).is_some() {
                return true;
            }
            let why = if cancel.is_cancelled() {
                Some(Stop::Aborted)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(Stop::Timeout)
            } else {
                None
            };
            if why.is_some() {
                *lock(&stop) = why;
            }
            why.is_some()
        })));
    }
    let ctx = Context::full(&rt).map_err(|e| format!("cannot start the sandbox: {e}"))?;
    let init = serde_json::json!({
        "names": setup.names,
        "all": setup.all_tools,
        "store": setup.store,
    })
    .to_string();
    let wrapped = format!("__pi_finish((async function () {{\n{code}\n}})());");
    let outcome = ctx.with(|ctx| -> Result<(), String> {
        install_host(&ctx, host, state.clone(), stop.clone(), init, setup)
            .map_err(|e| format!("cannot start the sandbox: {e}"))?;
        ctx.eval::<(), _>(PRELUDE)
            .map_err(|e| exception_text(&ctx, e))?;
        ctx.eval::<(), _>(wrapped)
            .map_err(|e| exception_text(&ctx, e))?;
        Ok(())
    });
    outcome?;
    loop {
        match rt.execute_pending_job() {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                let text =
                    e.0.with(|ctx| exception_text(&ctx, rquickjs::Error::Exception));
                if !lock(state).done {
                    return Err(text);
                }
            }
        }
    }
    Ok(())
}

/// The text of the pending exception (`Name: message` and, when there is one, its stack).
fn exception_text(ctx: &Ctx<'_>, e: rquickjs::Error) -> String {
    if !matches!(e, rquickjs::Error::Exception) {
        return e.to_string();
    }
    let v = ctx.catch();
    if let Some(ex) = v.as_exception() {
        let msg = ex.message().unwrap_or_default();
        let name: String = ex
            .as_object()
            .get::<_, rquickjs::Coerced<String>>("name")
            .map(|c| c.0)
            .unwrap_or_else(|_| "Error".into());
        let head = if msg.is_empty() {
            name
        } else {
            format!("{name}: {msg}")
        };
        return match ex.stack().filter(|s| !s.trim().is_empty()) {
            Some(stack) => format!("{head}\n{}", stack.trim_end()),
            None => head,
        };
    }
    v.get::<rquickjs::Coerced<String>>()
        .map(|c| format!("Uncaught {}", c.0))
        .unwrap_or_else(|_| "Uncaught exception".into())
}

fn install_host<'js>(
    ctx: &Ctx<'js>,
    host: Arc<dyn Host>,
    state: Arc<Mutex<State>>,
    _stop: Arc<Mutex<Option<Stop>>>,
    init: String,
    setup: &Setup,
) -> rquickjs::Result<()> {
    let h = Object::new(ctx.clone())?;
    h.set(
        "init",
        Function::new(ctx.clone(), move || -> String { init.clone() })?,
    )?;
    {
        let state = state.clone();
        h.set(
            "text",
            Function::new(ctx.clone(), move |s: String| -> String {
                let mut st = lock(&state);
                if let Err(e) = st.count(s.chars().count()) {
                    return e;
                }
                st.outcome.items.push(Item::Text(s));
                String::new()
            })?,
        )?;
    }
    {
        let state = state.clone();
        h.set(
            "console",
            Function::new(ctx.clone(), move |s: String| -> String {
                let mut st = lock(&state);
                if let Err(e) = st.count(s.chars().count()) {
                    return e;
                }
                st.outcome.console.push(s);
                String::new()
            })?,
        )?;
    }
    {
        let state = state.clone();
        h.set(
            "image",
            Function::new(ctx.clone(), move |s: String| -> String {
                let (data, mime) = match parse_image(&s) {
                    Ok(x) => x,
                    Err(e) => return e,
                };
                let mut st = lock(&state);
                if let Err(e) = st.count(data.len()) {
                    return e;
                }
                st.outcome.items.push(Item::Image { data, mime });
                String::new()
            })?,
        )?;
    }
    {
        let state = state.clone();
        let initial: std::collections::BTreeMap<String, usize> = setup
            .store
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_string().chars().count()))
                    .collect()
            })
            .unwrap_or_default();
        lock(&state).store_sizes = initial;
        h.set(
            "store",
            Function::new(
                ctx.clone(),
                move |key: String, json: String, delete: bool| -> String {
                    let mut st = lock(&state);
                    if delete {
                        st.store_sizes.remove(&key);
                        st.outcome.store_writes.push((key, None));
                        return String::new();
                    }
                    let size = json.chars().count();
                    if size > MAX_STORE_VALUE {
                        return format!(
                            "store(): the value of \"{key}\" has {size} characters of JSON; at most {MAX_STORE_VALUE} are kept"
                        );
                    }
                    let others: usize = st
                        .store_sizes
                        .iter()
                        .filter(|(k, _)| **k != key)
                        .map(|(_, n)| n)
                        .sum();
                    if others + size > MAX_STORE_TOTAL {
                        return format!(
                            "store(): all stored values together would pass {MAX_STORE_TOTAL} characters of JSON"
                        );
                    }
                    let Ok(value) = serde_json::from_str::<Value>(&json) else {
                        return "store(): the value is not JSON".into();
                    };
                    st.store_sizes.insert(key.clone(), size);
                    st.outcome.store_writes.push((key, Some(value)));
                    String::new()
                },
            )?,
        )?;
    }
    {
        let state = state;
        h.set(
            "done",
            Function::new(ctx.clone(), move |ok: bool, error: String| {
                let mut st = lock(&state);
                st.done = true;
                if !ok {
                    st.outcome.error = Some(error);
                }
            })?,
        )?;
    }
    {
        let host = host.clone();
        h.set(
            "call",
            Function::new(ctx.clone(), move |name: String, args: String| -> String {
                let args: Value = serde_json::from_str(&args).unwrap_or(Value::Null);
                let r = match host.call_tool(&name, args) {
                    Ok(v) => serde_json::json!({ "ok": v }),
                    Err(e) => serde_json::json!({ "err": e }),
                };
                r.to_string()
            })?,
        )?;
    }
    {
        let host = host.clone();
        h.set(
            "search",
            Function::new(ctx.clone(), move |q: String, o: String| -> String {
                let o: Value = serde_json::from_str(&o).unwrap_or(Value::Null);
                host.search(&q, &o).to_string()
            })?,
        )?;
    }
    {
        let host = host.clone();
        h.set(
            "describeTool",
            Function::new(ctx.clone(), move |n: String| -> String {
                match host.describe_tool(&n) {
                    Some(s) => Value::String(s).to_string(),
                    None => "null".into(),
                }
            })?,
        )?;
    }
    h.set(
        "describeNamespace",
        Function::new(ctx.clone(), move |n: String| -> String {
            host.describe_namespace(&n)
                .unwrap_or(Value::Null)
                .to_string()
        })?,
    )?;
    ctx.globals().set("__pi", h)?;
    Ok(())
}

/// `image()`'s argument as JSON: `{url}` (a base64 `data:` URL), `{image_url}` (a string or
/// `{url}`) or an image block `{type: "image", data, mimeType}`.
fn parse_image(json: &str) -> Result<(String, String), String> {
    let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let url = v
        .get("url")
        .and_then(Value::as_str)
        .or_else(|| v.get("image_url").and_then(Value::as_str))
        .or_else(|| {
            v.get("image_url")
                .and_then(|u| u.get("url"))
                .and_then(Value::as_str)
        });
    let (data, mime) = if let Some(url) = url {
        let Some(rest) = url.strip_prefix("data:") else {
            return Err("image(): only base64 data: URLs are supported, not remote URLs".into());
        };
        let Some((mime, data)) = rest.split_once(";base64,") else {
            return Err("image(): the data: URL is not base64".into());
        };
        (data.to_string(), mime.to_string())
    } else if v.get("type").and_then(Value::as_str) == Some("image") {
        match (
            v.get("data").and_then(Value::as_str),
            v.get("mimeType").and_then(Value::as_str),
        ) {
            (Some(d), Some(m)) => (d.to_string(), m.to_string()),
            _ => return Err("image(): an image block needs data and mimeType".into()),
        }
    } else {
        return Err(
            "image(): expected a base64 data: URL, an { image_url } object or an image block { type: \"image\", data, mimeType }"
                .into(),
        );
    };
    if !matches!(
        mime.as_str(),
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    ) {
        return Err(format!(
            "image(): {mime} is not accepted (PNG, JPEG, GIF and WebP are)"
        ));
    }
    use base64::Engine as _;
    if base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .is_err()
    {
        return Err("image(): the image data is not valid base64".into());
    }
    Ok((data, mime))
}
