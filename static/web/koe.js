// koe's text chat page: the Open-LLM-VTuber protocol plus koe's token stream.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), statusEl = $("status"), text = $("text"), stopBtn = $("stop");
  const histories = $("histories"), characters = $("characters");
  let ws, reply = null, replyText = "", inTurn = false, retry = 500;
  // muted drops the tokens of a reply the user stopped: those already on
  // the wire still arrive, up to the next conversation-chain-start.
  let muted = false;

  function bubble(kind, content, who) {
    const el = document.createElement("div");
    el.className = "msg " + kind;
    if (who) { const w = document.createElement("span"); w.className = "who"; w.textContent = who; el.append(w); }
    el.append(document.createTextNode(content));
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  }
  function setStatus(t, cls) { statusEl.textContent = t; statusEl.className = "status " + (cls || ""); }
  function send(msg) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg)); }
  function setTurn(on) { inTurn = on; stopBtn.disabled = !on; }
  function endReply() {
    if (reply) reply.classList.add("interrupted");
    setTurn(false); reply = null; muted = true;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(proto + location.host + "/client-ws");
    ws.onopen = () => {
      retry = 500; setStatus("connected", "ok");
      ["fetch-configs", "fetch-history-list", "create-new-history"].forEach((type) => send({ type }));
    };
    ws.onclose = () => { setStatus("disconnected, retrying…", "bad"); setTurn(false); setTimeout(connect, retry); retry = Math.min(retry * 2, 8000); };
    ws.onmessage = (ev) => handle(JSON.parse(ev.data));
  }

  function handle(m) {
    switch (m.type) {
      case "control":
        if (m.text === "conversation-chain-start") { setTurn(true); reply = null; replyText = ""; muted = false; }
        if (m.text === "conversation-chain-end") { setTurn(false); reply = null; send({ type: "fetch-history-list" }); }
        break;
      case "token":
        if (muted) break;
        if (!reply) reply = bubble("ai", "", "");
        replyText += m.content; reply.lastChild.textContent = replyText;
        log.scrollTop = log.scrollHeight;
        break;
      case "audio":
        // Text-only pieces need no playback; tell the server at the end.
        break;
      case "backend-synth-complete":
        send({ type: "frontend-playback-complete" });
        break;
      case "error":
        bubble("error", m.message); setTurn(false);
        break;
      case "set-model-and-conf":
        document.title = "koe · " + m.conf_name;
        characters.dataset.current = m.conf_name;
        break;
      case "config-files":
        characters.replaceChildren(...m.configs.map((c) => new Option(c.name, c.filename)));
        break;
      case "history-list":
        histories.replaceChildren(new Option("new conversation", ""),
          ...m.histories.map((h) => new Option((h.latest_message.content || "").slice(0, 40) + " · " + h.timestamp, h.uid)));
        break;
      case "history-data":
        log.replaceChildren();
        m.messages.forEach((r) => { const b = bubble(r.role === "human" ? "human" : "ai", r.content, r.name); if (r.interrupted) b.classList.add("interrupted"); });
        break;
    }
  }

  $("form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = text.value.trim();
    if (!t) return;
    if (inTurn) {
      // The new input cancels the running turn; tell the server what was heard.
      if (reply) send({ type: "interrupt-signal", text: replyText });
      endReply();
    }
    bubble("human", t);
    send({ type: "text-input", text: t, images: [] });
    text.value = "";
  });
  stopBtn.addEventListener("click", () => {
    send({ type: "interrupt-signal", text: replyText });
    endReply();
  });
  $("new").addEventListener("click", () => { log.replaceChildren(); send({ type: "create-new-history" }); });
  histories.addEventListener("change", () => {
    if (histories.value) send({ type: "fetch-and-set-history", history_uid: histories.value });
    else { log.replaceChildren(); send({ type: "create-new-history" }); }
  });
  characters.addEventListener("change", () => { log.replaceChildren(); send({ type: "switch-config", file: characters.value }); send({ type: "fetch-history-list" }); });
  connect();
})();
