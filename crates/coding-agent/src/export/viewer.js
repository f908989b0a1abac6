// pi session viewer. Builds the page from the embedded session data with DOM calls
// (createElement / textContent). Markdown is not parsed here: the export rendered each block
// to sanitised HTML in Rust (the "rendered-markdown" element, keyed "<entry id>:<block index>" or "<id>:s"),
// which is parsed in an inert <template>; a block without one shows as plain text.
(function () {
  "use strict";
  var doc = document;
  // User Timing marks (performance.mark) for bench/export_first_render.py: "pi-data-decoded",
  // "pi-first-render" (first batch of messages in the DOM), "pi-render-done" (all batches).
  function now() { return window.performance && performance.now ? performance.now() : Date.now(); }
  function mark(name) { try { if (window.performance && performance.mark) performance.mark(name); } catch (e) { /* no timing */ } }
  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  // Appends the given children (null ones skipped) to parent; returns the last child
  // appended (the element to fill in next), or parent when none was.
  function add(parent) {
    var last = parent;
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) last = parent.appendChild(arguments[i]);
    return last;
  }
  function decode(b64) {
    var bin = atob(b64.replace(/\s+/g, ""));
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return JSON.parse(new TextDecoder("utf-8").decode(bytes));
  }
  var SAFE_IMAGE = /^image\/(png|jpeg|jpg|gif|webp|bmp|avif)$/i;
  function imageEl(block) {
    var mime = String(block.mimeType || "");
    var data = String(block.data || "");
    if (!SAFE_IMAGE.test(mime) || !/^[A-Za-z0-9+\/=\s]*$/.test(data)) {
      return el("div", "meta", "[image of type " + mime + " not shown]");
    }
    var img = el("img", "inline");
    img.alt = "image (" + mime + ")";
    img.src = "data:" + mime.toLowerCase() + ";base64," + data.replace(/\s+/g, "");
    return img;
  }

  // ---- data ---------------------------------------------------------------------------------
  var data;
  try {
    data = decode(doc.getElementById("session-data").textContent);
  } catch (e) {
    add(doc.body, el("p", "meta", "The embedded session data could not be read: " + e));
    return;
  }
  mark("pi-data-decoded");
  // The rendered markdown sits in its own element, so session-data stays upstream's object.
  var rendered = {};
  try {
    var r = decode(doc.getElementById("rendered-markdown").textContent);
    if (r && typeof r === "object") rendered = r;
  } catch (e) { /* every block then shows as plain text */ }
  // The markdown block `key` of the export's rendered map, else `text` as plain text.
  function markdown(key, text) {
    var root = el("div", "md"), html = Object.prototype.hasOwnProperty.call(rendered, key) ? rendered[key] : null;
    if (typeof html === "string") {
      var t = doc.createElement("template");
      t.innerHTML = html;
      root.appendChild(doc.importNode(t.content, true));
    } else add(root, el("p", "plain", text));
    return root;
  }
  var entries = Array.isArray(data.entries) ? data.entries : [];
  var byId = Object.create(null), children = Object.create(null), roots = [];
  entries.forEach(function (e) {
    if (!e || typeof e.id !== "string") return;
    byId[e.id] = e;
  });
  entries.forEach(function (e) {
    if (!e || typeof e.id !== "string") return;
    var p = e.parentId;
    if (p && byId[p]) (children[p] = children[p] || []).push(e); else roots.push(e);
  });
  function pathTo(id) {
    var out = [], seen = Object.create(null), e = byId[id];
    while (e && !seen[e.id]) { seen[e.id] = 1; out.push(e); e = e.parentId ? byId[e.parentId] : null; }
    return out.reverse();
  }
  function deepestLeaf(id) {
    var cur = id, guard = 0;
    while (children[cur] && children[cur].length && guard++ < 1e7) cur = children[cur][children[cur].length - 1].id;
    return cur;
  }
  var leaf = data.leafId && byId[data.leafId] ? data.leafId : (entries.length ? deepestLeaf(entries[entries.length - 1].id) : null);
  var hash = decodeURIComponent((location.hash || "").slice(1));
  if (hash && byId[hash]) leaf = deepestLeaf(hash);

  function textOf(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return "";
    return content.filter(function (b) { return b && b.type === "text"; }).map(function (b) { return String(b.text || ""); }).join("\n");
  }
  function fmtNum(n) { return Number(n || 0).toLocaleString("en-US"); }
  function fmtCost(c) { return "$" + Number(c || 0).toFixed(4); }
  function when(ts) {
    var d = new Date(typeof ts === "number" ? ts : String(ts || ""));
    return isNaN(d.getTime()) ? "" : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  // ---- header -------------------------------------------------------------------------------
  function stats() {
    var models = Object.create(null), users = 0, assistants = 0, tools = 0;
    var tok = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, cost = 0;
    entries.forEach(function (e) {
      if (e.type === "model_change" && e.provider) models[e.provider + "/" + e.modelId] = 1;
      if (e.type !== "message" || !e.message) return;
      var m = e.message;
      if (m.role === "user") users++;
      if (m.role === "assistant") {
        assistants++;
        if (m.provider) models[m.provider + "/" + m.model] = 1;
        (Array.isArray(m.content) ? m.content : []).forEach(function (b) { if (b && b.type === "toolCall") tools++; });
        var u = m.usage || {};
        tok.input += u.input || 0; tok.output += u.output || 0; tok.cacheRead += u.cacheRead || 0; tok.cacheWrite += u.cacheWrite || 0;
        cost += (u.cost && u.cost.total) || 0;
      }
    });
    var h = data.header || {};
    var top = el("header", "top");
    add(top, el("h1", null, h.name || "pi session"));
    var s = add(top, el("div", "stats"));
    function stat(label, value) { var d = add(s, el("span", null, label + " ")); add(d, el("b", null, value)); }
    stat("Started", when(h.timestamp));
    stat("Directory", h.cwd || "");
    stat("Models", Object.keys(models).join(", ") || "none");
    stat("Messages", users + " user, " + assistants + " assistant");
    stat("Tool calls", String(tools));
    stat("Tokens", fmtNum(tok.input) + " in, " + fmtNum(tok.output) + " out, " + fmtNum(tok.cacheRead) + " cache read, " + fmtNum(tok.cacheWrite) + " cache write");
    stat("Cost", fmtCost(cost));
    var dl = add(top, el("button", "btn", "Download JSONL"));
    dl.addEventListener("click", function () {
      var lines = [JSON.stringify(data.header)].concat(entries.map(function (e) { return JSON.stringify(e); }));
      var a = el("a"); a.download = "session.jsonl";
      a.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" }));
      a.click();
    });
    if (data.systemPrompt) {
      var d = add(top, el("details")); add(d, el("summary", null, "System prompt"));
      add(d, el("pre", "out", data.systemPrompt));
    }
    if (Array.isArray(data.tools) && data.tools.length) {
      var t = add(top, el("details")); add(t, el("summary", null, "Tools (" + data.tools.length + ")"));
      data.tools.forEach(function (tool) {
        var box = add(t, el("div", "tool")); add(box, el("div", "name", tool.name));
        if (tool.description) add(box, el("div", "meta", tool.description));
      });
    }
    return top;
  }

  // ---- messages -----------------------------------------------------------------------------
  var results = Object.create(null);
  function indexResults(path) {
    results = Object.create(null);
    path.forEach(function (e) {
      if (e.type === "message" && e.message && e.message.role === "toolResult") results[e.message.toolCallId] = e.message;
    });
  }
  function diffView(diff) {
    var box = el("div", "diff");
    String(diff).split("\n").forEach(function (l) {
      var c = l.charAt(0) === "+" && l.indexOf("+++") !== 0 ? "a" : l.charAt(0) === "-" && l.indexOf("---") !== 0 ? "d" : l.indexOf("@@") === 0 ? "h" : "";
      add(box, el("div", c, l || " "));
    });
    return box;
  }
  function contentBlocks(parent, content, id) {
    if (typeof content === "string") { add(parent, markdown(id + ":s", content)); return; }
    (Array.isArray(content) ? content : []).forEach(function (b, i) {
      if (!b) return;
      if (b.type === "text") add(parent, markdown(id + ":" + i, b.text || ""));
      else if (b.type === "image") add(parent, imageEl(b));
    });
  }
  function toolCall(b) {
    var args = b.arguments || {}, res = results[b.id];
    var box = el("div", "tool" + (res && res.isError ? " error" : ""));
    var name = add(box, el("div", "name", b.name));
    var target = args.path || args.file_path || args.pattern || "";
    if (target) add(name, el("span", "path", String(target)));
    if (b.name === "bash" && typeof args.command === "string") add(box, el("pre", "out", "$ " + args.command));
    else if (b.name === "edit" && Array.isArray(args.edits) && !(res && res.details && res.details.diff)) {
      args.edits.forEach(function (ed) {
        add(box, diffView(String(ed.oldText || "").split("\n").map(function (l) { return "-" + l; }).concat(String(ed.newText || "").split("\n").map(function (l) { return "+" + l; })).join("\n")));
      });
    } else if (b.name === "write" && typeof args.content === "string") {
      var w = add(box, el("details")); add(w, el("summary", null, "content (" + args.content.length + " characters)")); add(w, el("pre", "out", args.content));
    } else if (b.name !== "read" && b.name !== "edit") add(box, el("pre", "out", JSON.stringify(args, null, 2)));
    if (res) {
      if (res.details && typeof res.details.diff === "string") add(box, diffView(res.details.diff));
      var text = textOf(res.content);
      var r = el("div", "res");
      if (text) {
        var lines = text.split("\n");
        if (lines.length > 20) {
          var det = add(r, el("details")); add(det, el("summary", null, "output (" + lines.length + " lines)")); add(det, el("pre", "out", text));
        } else add(r, el("pre", "out", text));
      }
      (Array.isArray(res.content) ? res.content : []).forEach(function (c) { if (c && c.type === "image") add(r, imageEl(c)); });
      add(box, r);
    } else add(box, el("div", "meta", "(no result)"));
    return box;
  }
  function card(e, cls, who) {
    var c = el("div", "msg " + cls); c.id = "e-" + e.id;
    var w = add(c, el("div", "who", who));
    var ts = when(e.timestamp); if (ts) add(w, el("span", null, ts));
    var link = add(w, el("a", null, "#")); link.href = "#" + encodeURIComponent(e.id); link.title = "Link to this entry";
    return c;
  }
  function render(e) {
    var m = e.message;
    switch (e.type) {
      case "message":
        if (!m) return null;
        if (m.role === "user") { var u = card(e, "user", "User"); contentBlocks(u, m.content, e.id); return u; }
        if (m.role === "assistant") {
          var a = card(e, "assistant", "Assistant" + (m.model ? " \u00b7 " + m.model : ""));
          (Array.isArray(m.content) ? m.content : []).forEach(function (b, i) {
            if (!b) return;
            if (b.type === "text") add(a, markdown(e.id + ":" + i, b.text || ""));
            else if (b.type === "thinking") {
              var d = add(a, el("details", "thinking")); add(d, el("summary", null, "Thinking")); add(d, markdown(e.id + ":" + i, b.thinking || ""));
            } else if (b.type === "toolCall") add(a, toolCall(b));
            else if (b.type === "image") add(a, imageEl(b));
          });
          if (m.errorMessage) add(a, el("div", "tool error", m.errorMessage));
          var u2 = m.usage;
          if (u2) add(a, el("div", "meta", fmtNum(u2.input) + " in \u00b7 " + fmtNum(u2.output) + " out \u00b7 " + fmtCost(u2.cost && u2.cost.total) + (m.stopReason && m.stopReason !== "stop" && m.stopReason !== "toolUse" ? " \u00b7 " + m.stopReason : "")));
          return a;
        }
        if (m.role === "toolResult" || m.role === "system") return null;
        if (m.role === "bashExecution") {
          var b = card(e, "user", "Shell"); add(b, el("pre", "out", "$ " + (m.command || "") + "\n" + (m.output || ""))); return b;
        }
        var o = card(e, "", m.role || "message"); contentBlocks(o, m.content, e.id); return o;
      case "model_change": return el("div", "event", "Model: " + e.provider + "/" + e.modelId);
      case "thinking_level_change": return el("div", "event", "Thinking level: " + e.thinkingLevel);
      case "compaction": {
        var s = el("details", "summary"); add(s, el("summary", null, "Compaction (" + fmtNum(e.tokensBefore) + " tokens before)")); add(s, markdown(e.id + ":s", e.summary || "")); return s;
      }
      case "branch_summary": {
        var bs = el("details", "summary"); add(bs, el("summary", null, "Branch summary")); add(bs, markdown(e.id + ":s", e.summary || "")); return bs;
      }
      case "custom_message": { var cm = card(e, "", e.customType || "custom"); contentBlocks(cm, e.content, e.id); return cm; }
      case "label": return e.label ? el("div", "event", "Label: " + e.label) : null;
      case "session_info": return e.name ? el("div", "event", "Session name: " + e.name) : null;
      default: return null;
    }
  }
  var main = el("main"), list = el("div"), token = 0;
  function show(leafId) {
    var my = ++token;
    leaf = leafId;
    while (list.firstChild) list.removeChild(list.firstChild);
    var path = leafId ? pathTo(leafId) : [];
    indexResults(path);
    // Batches: the first one is 60 entries (a screenful and more), later ones take about
    // 10 ms of script time each (at least one entry), so a long session never blocks the page.
    var i = 0, first = true;
    (function batch() {
      if (my !== token) return;
      var t0 = now(), end = first ? Math.min(path.length, i + 60) : path.length, from = i;
      var frag = doc.createDocumentFragment();
      for (; i < end; i++) {
        if (!first && i > from && now() - t0 > 10) break;
        var n = render(path[i]); if (n) frag.appendChild(n);
      }
      list.appendChild(frag);
      if (first) { first = false; mark("pi-first-render"); }
      if (i < path.length) setTimeout(batch, 0); else { doc.body.setAttribute("data-rendered", "1"); mark("pi-render-done"); }
    })();
    markActive();
  }

  // ---- sidebar tree -------------------------------------------------------------------------
  var side = el("nav"); side.id = "side";
  var filter = "default", query = "", nodes = [];
  add(side, el("h2", null, "Conversation tree"));
  var search = add(side, el("input")); search.type = "search"; search.placeholder = "Search messages";
  var fbar = add(side, el("div", "filters"));
  [["default", "Messages"], ["user", "User only"], ["tools", "With tools"], ["all", "Everything"]].forEach(function (f) {
    var bt = add(fbar, el("button", f[0] === filter ? "on" : "", f[1]));
    bt.addEventListener("click", function () {
      filter = f[0];
      Array.prototype.forEach.call(fbar.children, function (c) { c.className = c === bt ? "on" : ""; });
      buildTree();
    });
  });
  var tree = add(side, el("div"));
  search.addEventListener("input", function () { query = search.value.toLowerCase(); buildTree(); });
  function label(e) {
    var m = e.message;
    if (e.type === "message" && m) {
      if (m.role === "user") return ["you", textOf(m.content)];
      if (m.role === "assistant") {
        var t = textOf(m.content), calls = (Array.isArray(m.content) ? m.content : []).filter(function (b) { return b && b.type === "toolCall"; }).map(function (b) { return b.name; });
        return ["pi", t || (calls.length ? "[" + calls.join(", ") + "]" : "")];
      }
      if (m.role === "toolResult") return ["tool", m.toolName + ": " + textOf(m.content)];
      return [m.role, textOf(m.content)];
    }
    if (e.type === "compaction") return ["compaction", e.summary || ""];
    if (e.type === "model_change") return ["model", e.provider + "/" + e.modelId];
    return [e.type, e.label || e.name || ""];
  }
  function visible(e) {
    var m = e.message;
    if (filter === "all") return true;
    if (e.type === "compaction" || e.type === "branch_summary") return filter !== "user";
    if (e.type !== "message" || !m) return false;
    if (filter === "user") return m.role === "user";
    if (filter === "tools") return m.role === "user" || m.role === "assistant" || m.role === "toolResult";
    return m.role === "user" || m.role === "assistant";
  }
  function buildTree() {
    while (tree.firstChild) tree.removeChild(tree.firstChild);
    nodes = [];
    var stack = roots.slice().reverse().map(function (r) { return [r, 0]; }), count = 0;
    var frag = doc.createDocumentFragment();
    while (stack.length && count < 5000) {
      var item = stack.pop(), e = item[0], depth = item[1];
      var kids = children[e.id] || [];
      var show_ = visible(e);
      var lb = label(e);
      if (show_ && query && (lb[1] || "").toLowerCase().indexOf(query) < 0) show_ = false;
      if (show_) {
        var b = el("button", "node"); b.setAttribute("data-id", e.id);
        b.style.paddingLeft = 6 + Math.min(depth, 12) * 12 + "px";
        add(b, el("span", "k", lb[0])); b.appendChild(doc.createTextNode(String(lb[1]).slice(0, 120)));
        b.title = String(lb[1]).slice(0, 400);
        b.addEventListener("click", (function (id) { return function () { show(deepestLeaf(id)); var t = doc.getElementById("e-" + id); if (t) t.scrollIntoView(); }; })(e.id));
        frag.appendChild(b); nodes.push(b); count++;
      }
      var d = kids.length > 1 ? depth + 1 : depth;
      for (var k = kids.length - 1; k >= 0; k--) stack.push([kids[k], d]);
    }
    if (stack.length) frag.appendChild(el("div", "more", "(tree cut at 5000 entries)"));
    tree.appendChild(frag);
    markActive();
  }
  function markActive() {
    var on = Object.create(null);
    if (leaf) pathTo(leaf).forEach(function (e) { on[e.id] = 1; });
    nodes.forEach(function (n) { n.className = on[n.getAttribute("data-id")] ? "node active" : "node"; });
  }

  var app = el("div"); app.id = "app";
  add(main, stats(), list);
  add(app, side, main);
  doc.body.appendChild(app);
  show(leaf);
  buildTree();
})();
