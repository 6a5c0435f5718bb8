// koe's chat page: the Open-LLM-VTuber protocol plus koe's token stream.
// Replies stream in as text (token frames) and are spoken as they come
// (audio frames, one per sentence, played in order). Tools the reply calls
// show inside its bubble. With the microphone on, the page streams it to
// koe, which hears when the user speaks.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), statusEl = $("status"), text = $("text"), stopBtn = $("stop");
  const histories = $("histories"), characters = $("characters"), muteBtn = $("mute"), notice = $("notice");
  let ws, reply = null, replyText = "", inTurn = false, retry = 500;
  // ignoring drops the tokens and audio of a reply the user stopped: those
  // already on the wire still arrive, up to the next conversation-chain-start.
  let ignoring = false;

  // For tests: every piece the page tried to play ({text, start, end:
  // performance.now(), duration: seconds, result: "" while playing, then
  // "ended", "stopped", "muted" or "failed: …"), and the notices shown.
  const debug = window.koeDebug = { played: [], notices: [] };

  // The names on the bubbles, from set-model-and-conf (koe's own fields):
  // the character's and the user's.
  const names = { ai: "", human: "" };

  // bubble adds a message to the chat; who is the speaker's name, by
  // default the character's or the user's as the kind says.
  function bubble(kind, content, who) {
    const el = document.createElement("div");
    el.className = "msg " + kind;
    if (!who) who = names[kind.split(" ")[0]] || "";
    if (who) { const w = document.createElement("span"); w.className = "who"; w.textContent = who; el.append(w); }
    el.append(kind === "ai" ? replyNode(content) : document.createTextNode(content));
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  }
  function setStatus(t, cls) { statusEl.textContent = t; statusEl.className = "status " + (cls || ""); }
  function send(msg) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg)); }
  function setTurn(on) { inTurn = on; updateStop(); }
  function updateStop() { stopBtn.disabled = !(inTurn || voice.current); }

  // ---- Speech ------------------------------------------------------------
  //
  // Audio pieces queue up and play one after another on one <audio>
  // element (reusing it keeps it unlocked in browsers that unlock elements,
  // not pages). Once the server has sent everything (backend-synth-complete)
  // and the queue has run dry, the page says so, once per turn.

  const player = new Audio();
  player.preload = "auto";
  const voice = {
    queue: [],       // pieces waiting: {text, audio, volumes, slice, bubble}
    current: null,   // the piece playing: {piece, url, log, last, timer}
    heard: "",       // display text of the pieces reached so far this turn
    synthDone: false,
    completeSent: false,
  };
  let soundOff = localStorage.getItem("koe.mute") === "1";
  let unlocked = false, raf = 0;
  const meter = document.createElement("span");
  meter.className = "meter";
  meter.setAttribute("aria-hidden", "true");
  for (let i = 0; i < 5; i++) meter.append(document.createElement("i"));
  const meterShape = [0.55, 0.8, 1, 0.8, 0.55];

  function resetVoice() {
    stopPlayer("stopped");
    voice.queue = []; voice.heard = ""; voice.synthDone = false; voice.completeSent = false;
    idle();
  }

  function enqueue(m) {
    voice.queue.push({
      text: (m.display_text && m.display_text.text) || "",
      audio: m.audio || null,
      volumes: Array.isArray(m.volumes) ? m.volumes : [],
      slice: m.slice_length > 0 ? m.slice_length : 20,
      bubble: reply,
    });
    playNext();
  }

  // playNext starts the next piece that can be played. Text-only pieces, and
  // every piece while muted, are passed over in order; so is a piece that
  // fails to play.
  function playNext() {
    while (!voice.current) {
      const p = voice.queue.shift();
      if (!p) { idle(); return; }
      voice.heard += p.text;
      if (p.audio && !soundOff) start(p);
    }
  }

  function start(p) {
    const entry = { text: p.text, start: performance.now(), end: 0, duration: 0, result: "" };
    debug.played.push(entry);
    let url;
    try {
      const bin = atob(p.audio), bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      url = URL.createObjectURL(new Blob([bytes], { type: "audio/wav" }));
    } catch (err) {
      entry.result = "failed: " + err.name; entry.end = performance.now();
      warn("decode");
      return;
    }
    const cur = { piece: p, url, log: entry, last: 0, timer: 0 };
    voice.current = cur;
    player.onended = () => finish(cur, "ended");
    player.onerror = () => finish(cur, "failed: " + (player.error ? "MediaError " + player.error.code : "error"), "decode");
    player.src = url;
    player.play().catch((err) => finish(cur, "failed: " + err.name, err.name === "NotAllowedError" ? "blocked" : "decode"));
    watch(cur, (p.volumes.length * p.slice) + 4000);
    speaking(p.bubble);
    updateStop();
  }

  // watch skips a piece that stops making progress, so that a stalled
  // element cannot hold the turn up.
  function watch(cur, ms) {
    cur.timer = setTimeout(() => {
      if (cur !== voice.current) return;
      if (player.currentTime > cur.last) { cur.last = player.currentTime; watch(cur, 4000); return; }
      finish(cur, "failed: stalled", "decode");
    }, ms);
  }

  // finish ends the current piece (played, failed or cut off) and moves on.
  function finish(cur, result, problem) {
    if (cur !== voice.current) return;
    stopPlayer(result);
    if (problem) warn(problem);
    playNext();
  }

  function stopPlayer(result) {
    const cur = voice.current;
    if (!cur) return;
    voice.current = null;
    clearTimeout(cur.timer);
    cur.log.end = performance.now();
    cur.log.duration = player.duration || 0;
    cur.log.result = result;
    player.onended = player.onerror = null;
    player.pause();
    player.removeAttribute("src");
    player.load();
    URL.revokeObjectURL(cur.url);
    updateStop();
  }

  // idle runs when nothing is playing and nothing is queued.
  function idle() {
    speaking(null);
    updateStop();
    if (voice.synthDone && !voice.completeSent && !ignoring) {
      voice.completeSent = true;
      send({ type: "frontend-playback-complete" });
    }
  }

  // speaking marks the bubble being spoken and drives its level meter from
  // the piece's volumes (one per slice of audio).
  function speaking(b) {
    document.querySelectorAll("#log .msg.speaking").forEach((el) => { if (el !== b) el.classList.remove("speaking"); });
    if (!b) { meter.remove(); cancelAnimationFrame(raf); raf = 0; return; }
    b.classList.add("speaking");
    if (meter.parentNode !== b) b.prepend(meter);
    if (!raf) raf = requestAnimationFrame(level);
  }
  function level() {
    const cur = voice.current;
    if (!cur) { raf = 0; return; }
    const v = cur.piece.volumes, i = Math.floor(player.currentTime * 1000 / cur.piece.slice);
    meterShape.forEach((k, j) => {
      const x = Math.min(1, Math.max(0, v[i + j - 2] || 0));
      meter.children[j].style.transform = "scaleY(" + (0.2 + 0.8 * x * k).toFixed(3) + ")";
    });
    raf = requestAnimationFrame(level);
  }

  // warn shows a small notice, once per kind of problem.
  const warnings = {
    blocked: "The browser blocked sound. Click anywhere to turn it on.",
    decode: "Some speech could not be played.",
  };
  function warn(kind) {
    if (!debug.notices.includes(kind)) tell(kind, warnings[kind]);
  }
  // tell shows a notice, every time.
  function tell(kind, message) {
    debug.notices.push(kind);
    notice.textContent = message;
    notice.hidden = false;
  }

  // Browsers allow sound once the user has interacted with the page; play
  // silence on the first interaction so that the element is unlocked
  // everywhere, and hide the notice.
  const silence = "data:audio/wav;base64,UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";
  function unlock() {
    notice.hidden = true;
    if (unlocked) return;
    unlocked = true;
    if (!voice.current) { player.src = silence; player.play().catch(() => {}); }
  }
  addEventListener("pointerdown", unlock, true);
  addEventListener("keydown", unlock, true);

  function showMute() {
    muteBtn.setAttribute("aria-pressed", String(soundOff));
    muteBtn.title = soundOff ? "Speech is off: click to turn it on" : "Speech is on: click to mute";
    muteBtn.setAttribute("aria-label", soundOff ? "Unmute speech" : "Mute speech");
  }
  muteBtn.addEventListener("click", () => {
    soundOff = !soundOff;
    localStorage.setItem("koe.mute", soundOff ? "1" : "0");
    showMute();
    if (soundOff) { notice.hidden = true; stopPlayer("muted"); playNext(); }
  });
  showMute();

  // stopReply stops the reply at once: playback, queue, and whatever of it
  // is still on the wire. With interrupt, the bubble keeps what the user
  // got of it: with sound on, the pieces heard (those played and the one
  // playing); muted, the text shown. With signal (the default), the server
  // is told that, so the history keeps just that too.
  function stopReply(interrupt, signal = interrupt) {
    if (interrupt && inTurn) {
      const got = soundOff ? replyText : voice.heard;
      if (signal) send({ type: "interrupt-signal", text: got });
      if (reply) {
        if (got !== replyText) { replyText = got; cutText(reply, got); }
        reply.classList.add("interrupted");
      }
    }
    ignoring = true; // before idle: no playback-complete for a stopped reply
    endTools();
    dropPending();
    voice.queue = [];
    stopPlayer("stopped");
    idle();
    setTurn(false); reply = null;
  }

  // ---- Microphone ----------------------------------------------------------
  //
  // With the mic on, the page streams it to koe: 16-bit PCM in binary
  // frames at the AudioContext's rate, declared first with
  // raw-audio-config. koe's voice detection cuts the stream into
  // utterances: at the end of one it sends mic-audio-end, then the
  // transcript (user-input-transcription), then the answer. Speech during a
  // reply makes koe stop the reply itself (control: interrupt). The mic
  // keeps streaming while a reply plays, so that the user can talk over it;
  // the browser's echo cancellation keeps the reply out of the microphone.

  const micBtn = $("mic");
  const mic = {
    on: false,     // the user turned it on, and it has not failed since
    paused: false, // koe said stop-mic (and has not said start-mic since)
    gen: 0,        // counts starts and stops: a start that was overtaken gives up
    ctx: null, stream: null, src: null, node: null, rate: 0,
    sentOn: null,  // the WebSocket that raw-audio-config was sent on
    pending: null, // the human bubble of an utterance being transcribed
  };
  // For tests: the mic's state ("off", "starting", "on", "paused"), the
  // AudioContext's rate, the chunks and bytes sent, chunks dropped because
  // the connection was backed up, the loudest level seen (0..1) and the
  // name of the last error.
  debug.mic = { state: "off", rate: 0, heard: 0, chunks: 0, bytes: 0, dropped: 0, peak: 0, error: "" };
  // Chunks are dropped rather than queued without bound when the
  // connection cannot keep up (over 10 s of 48 kHz audio waiting).
  const micBacklog = 1 << 20;

  function showMic(state) {
    debug.mic.state = state;
    micBtn.dataset.state = state;
    micBtn.setAttribute("aria-pressed", String(state !== "off"));
    micBtn.setAttribute("aria-label", state === "off" ? "Turn the microphone on" : "Turn the microphone off");
    micBtn.title = {
      off: "Microphone off: click to talk to koe",
      starting: "Starting the microphone…",
      on: "Listening: click to turn the microphone off",
      paused: "koe paused the microphone: click to turn it off",
    }[state];
    if (state !== "on") micBtn.style.setProperty("--level", "0");
  }

  async function micOn() {
    const gen = ++mic.gen;
    mic.on = true;
    showMic("starting");
    const md = navigator.mediaDevices;
    if (!md || !md.getUserMedia || !window.AudioWorkletNode) {
      micFailed(window.isSecureContext ? "This browser cannot stream the microphone."
        : "The microphone needs a secure page: open koe on https or on localhost.");
      return;
    }
    // Created during the click, so that the browser lets it run; the
    // worklet loads while the browser opens the microphone.
    let ctx;
    try { ctx = mic.ctx = new AudioContext(); } catch (err) { micFailed(err); return; }
    const [media, mod] = await Promise.allSettled([
      md.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true, channelCount: 1 } }),
      ctx.audioWorklet.addModule("mic-worklet.js"),
    ]);
    const stream = media.status === "fulfilled" ? media.value : null;
    if (gen !== mic.gen) { stopTracks(stream); return; } // turned off meanwhile
    if (!stream) { micFailed(media.reason); return; }
    mic.stream = stream;
    if (mod.status === "rejected") { micFailed(mod.reason); return; }
    try {
      mic.src = ctx.createMediaStreamSource(stream);
      // No outputs: the node is a sink, which the browser runs without
      // connecting it to the speakers.
      mic.node = new AudioWorkletNode(ctx, "koe-mic",
        { numberOfInputs: 1, numberOfOutputs: 0, channelCount: 1, channelCountMode: "explicit" });
    } catch (err) { micFailed(err); return; }
    mic.node.port.onmessage = (ev) => micChunk(ev.data);
    mic.src.connect(mic.node);
    stream.getAudioTracks().forEach((tr) => tr.addEventListener("ended", () => {
      if (gen === mic.gen) micFailed("The microphone stopped: it was unplugged or taken away.");
    }));
    ctx.resume().catch(() => {});
    mic.rate = debug.mic.rate = ctx.sampleRate;
    showMic(mic.paused ? "paused" : "on");
  }

  function micOff() {
    mic.gen++;
    mic.on = mic.paused = false;
    if (mic.node) { mic.node.port.onmessage = null; mic.node.disconnect(); }
    if (mic.src) mic.src.disconnect();
    stopTracks(mic.stream);
    if (mic.ctx) mic.ctx.close().catch(() => {});
    mic.ctx = mic.stream = mic.src = mic.node = mic.sentOn = null;
    showMic("off");
  }

  function stopTracks(stream) {
    if (stream) stream.getTracks().forEach((tr) => tr.stop());
  }

  // micFailed turns the mic off and says why.
  function micFailed(err) {
    micOff();
    debug.mic.error = typeof err === "string" ? err : (err && err.name) || String(err);
    tell("mic", micProblem(err));
  }
  function micProblem(err) {
    if (typeof err === "string") return err;
    switch (err && err.name) {
      case "NotAllowedError": case "SecurityError":
        return "The microphone is blocked: allow it for this page in the browser's settings.";
      case "NotFoundError": case "OverconstrainedError":
        return "No microphone was found.";
      case "NotReadableError": case "AbortError":
        return "The microphone could not be opened: another program may be using it.";
    }
    return "The microphone could not be started: " + ((err && (err.message || err.name)) || err);
  }

  // micChunk sends a chunk of PCM from the worklet, declaring the rate
  // first on each connection.
  function micChunk(d) {
    debug.mic.heard++; // every chunk the worklet delivered, sent or not
    const x = d.level > 0 ? Math.min(1, Math.max(0, (20 * Math.log10(d.level) + 60) / 50)) : 0;
    debug.mic.peak = Math.max(debug.mic.peak, x);
    if (mic.paused || !ws || ws.readyState !== WebSocket.OPEN) { micBtn.style.setProperty("--level", "0"); return; }
    micBtn.style.setProperty("--level", x.toFixed(2));
    if (mic.sentOn !== ws) {
      send({ type: "raw-audio-config", sample_rate: mic.rate });
      mic.sentOn = ws;
    }
    if (ws.bufferedAmount > micBacklog) { debug.mic.dropped++; return; }
    ws.send(d.pcm);
    debug.mic.chunks++;
    debug.mic.bytes += d.pcm.byteLength;
  }

  // pauseMic follows koe's start-mic and stop-mic. They only pause and
  // resume a mic the user turned on: koe says start-mic on every connect,
  // and browsers open a microphone only on the user's click.
  function pauseMic(pause) {
    if (!mic.on) return;
    mic.paused = pause;
    if (debug.mic.state !== "starting") showMic(pause ? "paused" : "on");
  }

  micBtn.addEventListener("click", () => { if (mic.on) micOff(); else micOn(); });
  showMic("off");

  // The user's utterance: a bubble waits for its transcript from
  // mic-audio-end on, and goes if there is none (nothing was recognised,
  // or the turn was stopped first).
  function heardUtterance() {
    dropPending();
    mic.pending = bubble("human pending", "…");
  }
  function transcribed(t) {
    if (!t) { dropPending(); return; }
    if (!mic.pending) { bubble("human", t); return; }
    mic.pending.lastChild.textContent = t;
    mic.pending.classList.remove("pending");
    mic.pending = null;
    log.scrollTop = log.scrollHeight;
  }
  function dropPending() {
    if (mic.pending) mic.pending.remove();
    mic.pending = null;
  }

  // bargedIn: koe stopped the reply because the user spoke over it. The
  // page stops it as Stop does, but tells koe nothing: koe has ended the
  // turn already. (koe's history then keeps all the speech it had sent of
  // the reply, which can be more than was heard.)
  function bargedIn() {
    stopReply(true, false);
  }

  // ---- Tools ---------------------------------------------------------------
  //
  // A reply may call tools. Each call is an entry inside the reply's bubble,
  // at the point of the reply where it was made, updated in place by its
  // tool_id (OLV's tool_call_status); while steps run, koe's status events
  // show in a line under the bubble. Server text goes in as text only.

  const tools = new Map(); // tool_id → entry, for the current reply
  const steps = { tasks: new Map(), error: "", el: null }; // task_id → what it is doing
  let said = ""; // display text of the audio pieces received this turn

  // walk matches streamed text t from i against display text d from j, as
  // far as they agree, and returns where each stopped. The pieces' display
  // texts cover the stream exactly, but show a think block's tags as
  // parentheses.
  function walk(t, d, i, j) {
    while (i < t.length && j < d.length) {
      if (d[j] === "(" && t.startsWith("<think>", i)) i += 7;
      else if (d[j] === ")" && t.startsWith("</think>", i)) i += 8;
      else if (t[i] === d[j]) i++;
      else break;
      j++;
    }
    return [i, j];
  }

  // ---- Marks in replies ---------------------------------------------------
  //
  // A reply carries marks for koe, not for its reader: citation marks
  // ("[1]", "[2, 3]": the documents are listed under the bubble) and the
  // model's emotion keywords ("[joy]", from the character's emotionMap).
  // Each text node of a reply keeps the text as sent (raw, which every
  // offset here counts in) and shows it without its marks; a mark still
  // streaming in ("[1", "[jo") is held back until it is complete.
  const marks = { keywords: [], raw: new WeakMap() };
  function readable(s) {
    const kws = marks.keywords.map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const mark = "\\[\\s*(?:" + ["\\d+(?:\\s*,\\s*\\d+)*"].concat(kws).join("|") + ")\\s*\\]";
    let out = s.replace(new RegExp("^\\s*" + mark + "\\s*", "i"), "").replace(new RegExp("\\s*" + mark, "gi"), "");
    const open = /\[([^\]\n]{0,24})$/.exec(out);
    if (open) {
      const inside = open[1].trim().toLowerCase();
      if (/^[\d,\s]*$/.test(open[1]) || marks.keywords.some((k) => k.toLowerCase().startsWith(inside))) out = out.slice(0, open.index).trimEnd();
    }
    return out;
  }
  function rawOf(n) { return marks.raw.has(n) ? marks.raw.get(n) : n.data; }
  function setRaw(n, raw) { marks.raw.set(n, raw); n.data = readable(raw); }
  function replyNode(raw) { const n = document.createTextNode(""); setRaw(n, raw); return n; }

  function textNodes(b) { return [...b.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE); }

  // appendText adds streamed text after whatever the bubble shows last.
  function appendText(b, s) {
    let n = b.lastChild;
    if (!n || n.nodeType !== Node.TEXT_NODE) { n = replyNode(""); b.append(n); }
    setRaw(n, rawOf(n) + s);
  }

  // cutText makes the bubble's text got (a prefix of what it shows, as
  // display text), keeping its tool entries.
  function cutText(b, got) {
    const nodes = textNodes(b);
    let j = 0;
    nodes.forEach((n, k) => {
      const end = k === nodes.length - 1 ? got.length : walk(rawOf(n), got, 0, j)[1];
      setRaw(n, got.slice(j, end));
      j = end;
    });
  }

  // callOffset is where in the streamed text the reply's tool calls come
  // now. koe sends a call's frames after the audio of everything said
  // before it, but tokens as they come: the next cycle's text may already
  // be shown, so the place is where the audio received so far ends.
  function callOffset() {
    const [i, j] = walk(replyText, said, 0, 0);
    return j === said.length ? i : replyText.length;
  }

  // placeAt puts el at offset k of the bubble's text, after the entries
  // already there.
  function placeAt(b, k, el) {
    let pos = 0;
    for (const n of textNodes(b)) {
      const raw = rawOf(n), end = pos + raw.length;
      if (k < end) {
        if (k > pos) {
          const tail = replyNode(raw.slice(k - pos));
          setRaw(n, raw.slice(0, k - pos));
          n.after(tail);
          b.insertBefore(el, tail);
        } else b.insertBefore(el, n);
        return;
      }
      pos = end;
    }
    b.append(el);
  }

  const toolStates = { running: "running", completed: "done", error: "error" };

  function toolCall(m) {
    const state = toolStates[m.status];
    // Like OLV's client, drop a frame that lacks what identifies it.
    if (!m.tool_id || !m.tool_name || !state || !m.timestamp) return;
    const id = String(m.tool_id);
    let e = tools.get(id);
    if (!e) {
      e = toolEntry(id);
      tools.set(id, e);
      if (!reply) reply = bubble("ai", "", "");
      placeAt(reply, callOffset(), e.el);
      log.scrollTop = log.scrollHeight;
    }
    e.name.textContent = String(m.tool_name);
    const content = typeof m.content === "string" ? m.content : "";
    if (m.status === "running") showPart(e.input, "Input", strip(content, "Input: "));
    else if (m.status === "completed") showPart(e.output, "Output", content);
    else showPart(e.output, "Error", strip(content, "Error: "));
    setToolState(e, state);
  }

  function toolEntry(id) {
    const el = document.createElement("details");
    el.className = "tool";
    el.dataset.toolId = id;
    const summary = document.createElement("summary");
    const name = document.createElement("span"), badge = document.createElement("span");
    name.className = "tool-name"; badge.className = "badge";
    summary.append(name, " ", badge);
    const input = toolPart(), output = toolPart();
    el.append(summary, input.box, output.box);
    return { el, name, badge, input, output };
  }
  function toolPart() {
    const box = document.createElement("div"), label = document.createElement("div"), pre = document.createElement("pre");
    box.className = "tool-part"; label.className = "tool-label";
    box.hidden = true;
    box.append(label, pre);
    return { box, label, pre };
  }
  function showPart(part, label, content) {
    part.label.textContent = label;
    part.pre.textContent = pretty(content);
    part.box.hidden = false;
  }
  function setToolState(e, state) {
    e.el.dataset.state = state;
    e.badge.textContent = state;
  }
  function strip(s, prefix) { return s.startsWith(prefix) ? s.slice(prefix.length) : s; }
  // pretty indents JSON objects and arrays; anything else stays as sent.
  function pretty(s) {
    try {
      const v = JSON.parse(s);
      if (v !== null && typeof v === "object") return JSON.stringify(v, null, 2);
    } catch { /* not JSON */ }
    return s;
  }

  // step follows koe's status events: the line shows the latest step still
  // running, or else the last one that failed, until another starts or the
  // turn ends.
  function step(c) {
    if (!c || typeof c !== "object" || !c.task_id) return;
    const id = String(c.task_id), what = typeof c.content === "string" ? c.content : "";
    // The reply itself shows that the model is answering.
    if (id.startsWith("llm:")) return;
    steps.tasks.delete(id);
    if (c.state === "start") steps.error = "";
    if (c.state === "start" || c.state === "progress") steps.tasks.set(id, what);
    if (c.state === "error") {
      const details = typeof c.error_details === "string" ? c.error_details : "";
      steps.error = what && details ? what + ": " + details : what || details || "failed";
    }
    showStep();
  }
  function showStep() {
    const running = steps.tasks.size > 0;
    const t = running ? [...steps.tasks.values()].at(-1) || "Working…" : steps.error;
    if (!t) { if (steps.el) steps.el.remove(); steps.el = null; return; }
    if (!reply) reply = bubble("ai", "", "");
    if (!steps.el) {
      steps.el = document.createElement("div");
      steps.el.setAttribute("role", "status");
    }
    if (steps.el.previousSibling !== reply) reply.after(steps.el);
    steps.el.className = "step " + (running ? "running" : "error");
    steps.el.textContent = t;
    log.scrollTop = log.scrollHeight;
  }

  // endTools ends the reply's tool use: calls still shown as running were
  // cut off, and the status line goes.
  function endTools() {
    askGone();
    tools.forEach((e) => { if (e.el.dataset.state === "running") setToolState(e, "stopped"); });
    tools.clear();
    steps.tasks.clear();
    steps.error = "";
    showStep();
  }

  // ---- Questions -------------------------------------------------------------
  //
  // While tools run, the character may ask something (koe's ask event): a
  // yes before a tool that changes things, or an MCP server's question.
  // It is said aloud like the reply; here it also shows under the reply
  // with buttons. A click answers by the question's id; typed or spoken
  // words answer it too, and while it waits they do not stop the reply.
  const asking = { id: "", el: null };
  function askShown(m) {
    if (!m.ask_id) return;
    askGone();
    if (!reply) reply = bubble("ai", "", "");
    const el = document.createElement("div");
    el.className = "ask";
    el.setAttribute("role", "group");
    el.dataset.askId = String(m.ask_id);
    el.dataset.kind = String(m.kind || "");
    const q = document.createElement("p");
    q.className = "ask-text";
    q.textContent = String(m.text || "");
    el.setAttribute("aria-label", q.textContent);
    const buttons = document.createElement("div");
    buttons.className = "ask-buttons";
    const add = (label, answer, cls) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.className = cls || "";
      b.addEventListener("click", () => send(Object.assign({ type: "ask-answer", ask_id: String(m.ask_id) }, answer)));
      buttons.append(b);
    };
    if (m.kind === "confirm") {
      add("Yes", { action: "accept" }, "ask-yes");
      add("No", { action: "decline" }, "ask-no");
    } else {
      for (const o of Array.isArray(m.options) ? m.options : []) add(String(o), { action: "accept", text: String(o) }, "ask-option");
      add("Decline", { action: "decline" }, "ask-no");
      add("Cancel", { action: "cancel" }, "ask-cancel");
    }
    el.append(q, buttons);
    reply.after(el);
    asking.id = String(m.ask_id); asking.el = el;
    log.scrollTop = log.scrollHeight;
  }
  // askEnded shows how the question ended and takes its buttons away.
  function askEnded(m) {
    if (!asking.el || String(m.ask_id) !== asking.id) return;
    asking.el.dataset.action = String(m.action || "");
    askGone();
  }
  function askGone() {
    if (asking.el) asking.el.querySelector(".ask-buttons")?.remove();
    asking.id = ""; asking.el = null;
  }

  // ---- Documents -----------------------------------------------------------
  //
  // The character's documents (its knowledge base) go up through koe's REST
  // API, one file per request, with the page's own credentials (the token
  // cookie, when koe has a token); their ingest shows live from koe's
  // status events. A file attached to the chat goes over the WebSocket and
  // rides with the next message. Server text goes in as text only.

  const docs = {
    conf: "", max: 0, tasks: new Map(), last: { text: "", error: false },
    list: $("doc-list"), refused: $("doc-refused"), status: $("doc-status"), summary: $("doc-summary"),
  };
  debug.uploads = 0; // uploads finished (taken or refused), for tests

  function count(n) { return Number(n || 0).toLocaleString("en-US"); }
  function bytes(n) {
    if (n < 1024) return n + " bytes";
    return n < 1 << 20 ? (n / 1024).toFixed(1) + " KB" : (n / (1 << 20)).toFixed(1) + " MB";
  }
  function docsURL(id) {
    return "/api/characters/" + encodeURIComponent(docs.conf) + "/documents" + (id ? "/" + encodeURIComponent(id) : "");
  }
  // MCP servers that need the user to log in (OAuth): a line each under
  // the header with the consent link, from /api/mcp/servers when the page
  // connects and koe's mcp-servers events after. The browser comes back
  // to koe's /oauth/callback, and the line goes when the server connects.
  const mcpLogins = $("mcp-logins");
  function showMCP(servers) {
    mcpLogins.replaceChildren();
    for (const s of Array.isArray(servers) ? servers : []) {
      if (s.state !== "needs authorization") continue;
      const line = document.createElement("div");
      line.className = "mcp-login";
      line.dataset.server = String(s.name);
      let link = null;
      try { link = s.authorize_url ? new URL(s.authorize_url) : null; } catch { link = null; }
      if (link && (link.protocol === "https:" || link.protocol === "http:")) {
        line.append("MCP server " + s.name + " needs you to log in: ");
        const a = document.createElement("a");
        a.href = link.href; a.target = "_blank"; a.rel = "noopener noreferrer";
        a.textContent = "log in to " + link.host;
        line.append(a);
      } else {
        line.append("MCP server " + s.name + " needs authorization" + (s.error ? ": " + s.error : "; koe is preparing a login link…"));
      }
      mcpLogins.append(line);
    }
    mcpLogins.hidden = !mcpLogins.firstChild;
  }
  async function refreshMCP() {
    try {
      const r = await api("/api/mcp/servers");
      if (r.ok) showMCP(Array.isArray(r.body) ? r.body : []);
    } catch { /* the next event brings it */ }
  }

  // api sends a request and reads its JSON answer ({} if there is none).
  async function api(url, opts) {
    const r = await fetch(url, Object.assign({ credentials: "same-origin" }, opts));
    let body = {};
    try { body = await r.json(); } catch { /* not JSON */ }
    return { ok: r.ok, status: r.status, body: body && typeof body === "object" ? body : {} };
  }

  async function refreshDocs() {
    if (!docs.conf) return;
    const conf = docs.conf;
    try {
      const r = await api(docsURL());
      if (conf !== docs.conf) return; // the character changed meanwhile
      if (!r.ok) { docs.summary.textContent = "(" + (r.body.error || "HTTP " + r.status) + ")"; return; }
      if (r.body.max_file_bytes > 0) docs.max = r.body.max_file_bytes;
      showDocs(Array.isArray(r.body.documents) ? r.body.documents : [], r.body.tokens);
    } catch (err) { docs.summary.textContent = "(could not be listed: " + err.message + ")"; }
  }

  function showDocs(list, tokens) {
    docs.summary.textContent = list.length ? "(" + list.length + " · " + count(tokens) + " tokens)" : "(none)";
    docs.list.replaceChildren(...list.map((d) => {
      const li = document.createElement("li"), name = document.createElement("span"), size = document.createElement("span");
      const del = document.createElement("button");
      li.dataset.id = String(d.id);
      name.className = "doc-name"; name.textContent = String(d.name);
      if (d.title && d.title !== d.name) name.title = String(d.title);
      size.className = "doc-size";
      size.textContent = count(d.tokens) + " tokens · " + count(d.chunks) + (d.chunks === 1 ? " chunk" : " chunks");
      del.type = "button"; del.textContent = "Delete"; del.setAttribute("aria-label", "Delete " + d.name);
      del.addEventListener("click", () => deleteDoc(String(d.id), del));
      li.append(name, size, del);
      return li;
    }));
  }

  async function deleteDoc(id, btn) {
    btn.disabled = true;
    try {
      const r = await api(docsURL(id), { method: "DELETE" });
      if (!r.ok && r.status !== 404) refusedDoc({ filename: id, reason: r.body.error || "HTTP " + r.status });
    } catch (err) { refusedDoc({ filename: id, reason: "could not be deleted: " + err.message }); }
    refreshDocs();
  }

  function refusedDoc(f) {
    const li = document.createElement("li");
    li.textContent = String(f.filename || "file") + ": " + String(f.reason || "refused");
    docs.refused.append(li);
  }

  // uploadDocs sends files one by one: a request carries at most
  // knowledge.max_file_bytes, and each file is taken or refused alone.
  async function uploadDocs(files) {
    if (!docs.conf || !files.length) return;
    docs.refused.replaceChildren();
    for (const f of files) {
      try {
        if (docs.max && f.size > docs.max) {
          // koe would end the connection of a body this large.
          refusedDoc({ filename: f.name, reason: "the file is " + bytes(f.size) + "; knowledge.max_file_bytes allows " + bytes(docs.max) });
          continue;
        }
        const form = new FormData();
        form.append("file", f, f.name);
        const r = await api(docsURL(), { method: "POST", body: form });
        if (Array.isArray(r.body.refused)) r.body.refused.forEach(refusedDoc);
        if (!r.ok && !Array.isArray(r.body.refused)) refusedDoc({ filename: f.name, reason: r.body.error || "HTTP " + r.status });
      } catch (err) {
        refusedDoc({ filename: f.name, reason: "could not be sent: " + err.message });
      } finally {
        debug.uploads++;
      }
      await refreshDocs();
    }
  }

  // docStep follows the status events of ingests (task ids "ingest:…"):
  // the line shows the latest still running, else how the last one ended.
  function docStep(c) {
    const id = String(c.task_id), what = typeof c.content === "string" ? c.content : "";
    docs.tasks.delete(id);
    if (c.state === "start" || c.state === "progress") docs.tasks.set(id, what);
    if (c.state === "end") docs.last = { text: what, error: false };
    if (c.state === "error") {
      const details = typeof c.error_details === "string" ? c.error_details : "";
      docs.last = { text: what && details ? what + ": " + details : what || details || "failed", error: true };
    }
    const running = docs.tasks.size > 0;
    docs.status.textContent = running ? [...docs.tasks.values()].at(-1) : docs.last.text;
    docs.status.className = "doc-status" + (!running && docs.last.error ? " error" : "");
  }

  const drop = $("drop"), docInput = $("doc-files"), attachInput = $("attach-files");
  docInput.addEventListener("change", () => { const files = [...docInput.files]; docInput.value = ""; uploadDocs(files); });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    uploadDocs([...((e.dataTransfer && e.dataTransfer.files) || [])]);
  });

  // Attach to this chat: each file goes as attach-file, base64, and koe
  // answers file-attached or file-refused.
  $("attach").addEventListener("click", () => attachInput.click());
  attachInput.addEventListener("change", () => { const files = [...attachInput.files]; attachInput.value = ""; files.forEach(attachFile); });
  function attachFile(f) {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result), comma = url.indexOf(",");
      send({ type: "attach-file", name: f.name, mime: f.type || "", data: comma >= 0 ? url.slice(comma + 1) : "" });
    };
    reader.onerror = () => fileChip("📎 " + f.name + ": could not be read", true);
    reader.readAsDataURL(f);
  }
  function fileChip(t, refused) { bubble("file" + (refused ? " refused" : ""), t); }
  function fileAttached(m) {
    const f = m.file || {};
    fileChip("📎 " + String(f.name) + " · " + count(f.tokens) + " tokens · [" + String(f.document) + "]", false);
    send({ type: "fetch-history-list" });
  }
  function fileRefused(m) {
    fileChip("📎 " + String(m.filename || "file") + ": " + String(m.reason || "refused"), true);
  }

  // citations lists the documents a reply cited, under its bubble:
  // "[1] Title — file, p. 3 / section".
  function citations(list) {
    if (!Array.isArray(list) || !list.length) return;
    const ai = document.querySelectorAll("#log .msg.ai"), b = ai[ai.length - 1];
    if (!b) return;
    const ol = document.createElement("ol");
    ol.className = "citations";
    for (const c of list) {
      const li = document.createElement("li");
      let where = [c.file || c.url || "", c.page > 0 ? "p. " + c.page : ""].filter(Boolean).join(", ");
      if (c.section) where += (where ? " / " : "") + c.section;
      li.textContent = "[" + String(c.document) + "] " + String(c.title || c.file || c.url || "") + (where ? " — " + where : "");
      ol.append(li);
    }
    let at = b;
    while (at.nextElementSibling && at.nextElementSibling.matches(".step, .citations")) at = at.nextElementSibling;
    at.after(ol);
    log.scrollTop = log.scrollHeight;
  }

  // ---- Memory --------------------------------------------------------------
  //
  // The memory panel shows what koe keeps of a long conversation: the
  // summaries of older turns, live from koe's memory-state (sent after every
  // turn, every new summary, a history switch and on request); the
  // compression rate of the next summaries, which the user can change for
  // this session; and on request the exact context of the last LLM call.
  // Server text goes in as text only.

  const memory = {
    panel: $("memory"), toggle: $("memory-toggle"), count: $("memory-count"), about: $("memory-about"),
    list: $("memory-summaries"), empty: $("memory-empty"), totals: $("memory-totals"),
    pending: $("memory-pending"), error: $("memory-error"), rate: $("memory-rate"), rateValue: $("memory-rate-value"),
    serverRate: 0.3, // the rate koe last said the session has
    // The rate the user chose (0: none): set again after a switch of
    // character, a reconnect or a reload, which start at the configured
    // rate in koe.
    chosen: 0,
    // Requests whose answer may be an error frame, in the order sent:
    // {kind: "rate", rate} or {kind: "context"}. Error frames carry no
    // request id; koe answers a connection's requests in order, so an
    // error that comes while one waits is its refusal.
    waiting: [],
  };
  const ctxView = {
    box: $("context"), status: $("context-status"), totals: $("context-totals"),
    list: $("context-messages"), when: $("context-when"),
  };
  // A message longer than this is folded: its first line shows, the rest
  // opens on a click.
  const foldAt = 240;

  function plural(n, one, many) { return count(n) + " " + (n === 1 ? one : many); }
  function rateText(r) { return Number(r || 0).toFixed(2); }
  function percent(x) { return Math.round(Number(x || 0) * 100) + "%"; }

  // turnsText names a summary's turns: "turns 1–3", or "turn 4" alone.
  function turnsText(turns) {
    if (!Array.isArray(turns) || !turns.length) return "no turns";
    const a = turns[0], b = turns[turns.length - 1];
    return a === b ? "turn " + a : "turns " + a + "–" + b;
  }

  function showMemory(m) {
    const list = Array.isArray(m.summaries) ? m.summaries : [];
    const t = m.totals || {};
    memory.list.replaceChildren(...list.map(summaryItem));
    memory.empty.hidden = list.length > 0;
    memory.count.textContent = list.length ? String(list.length) : "";
    memory.about.textContent = m.turns > 0 ? plural(m.turns, "turn", "turns") + " so far" : "";
    memory.about.title = m.policy ? "Memory policy: " + m.policy : "";
    const saved = (t.original_chars || 0) - (t.summary_chars || 0);
    memory.totals.textContent = list.length
      ? plural(t.summaries, "summary covers ", "summaries cover ") + plural(t.turns_covered, "turn", "turns") +
        " · " + count(t.original_chars) + " → " + count(t.summary_chars) + " characters · " +
        count(saved) + " saved (" + percent(t.saving) + ")"
      : "";
    memory.totals.hidden = !list.length;
    const pending = m.pending > 0 ? m.pending : 0;
    memory.pending.textContent = pending ? plural(pending, "summary", "summaries") + " being written" : "";
    memory.pending.hidden = !pending;
    if (typeof m.compression_rate === "number" && m.compression_rate > 0) {
      memory.serverRate = m.compression_rate;
      const w = memory.waiting.findIndex((x) => x.kind === "rate" && Math.abs(x.rate - m.compression_rate) < 1e-9);
      if (w >= 0) { memory.waiting.splice(w, 1); showMemoryError(""); memory.chosen = m.compression_rate; saveSession(); }
      // A slider the user is holding is left where the user has it.
      if (!memory.rate.matches(":active")) showRate(m.compression_rate);
    }
  }

  function summaryItem(s) {
    const li = document.createElement("li"), head = document.createElement("div");
    const turns = document.createElement("span"), stats = document.createElement("span"), text = document.createElement("p");
    const turnList = Array.isArray(s.turns) ? s.turns : [];
    li.className = "summary";
    li.dataset.turns = turnList.join(",");
    li.dataset.originalChars = String(s.original_chars);
    li.dataset.summaryChars = String(s.summary_chars);
    li.dataset.rate = String(s.compression_rate);
    head.className = "summary-head";
    turns.className = "summary-turns"; turns.textContent = turnsText(turnList);
    stats.className = "summary-stats";
    const got = s.original_chars > 0 ? s.summary_chars / s.original_chars : 0;
    stats.textContent = count(s.original_chars) + " → " + count(s.summary_chars) + " characters (" + percent(got) + ") · rate " + rateText(s.compression_rate);
    stats.title = "Written to about " + percent(s.compression_rate) + " of the turns' length" + (s.created_at ? ", at " + s.created_at : "");
    text.className = "summary-text"; text.textContent = String(s.summary || "");
    head.append(turns, " ", stats);
    li.append(head, text);
    return li;
  }

  function showRate(r) {
    memory.rate.value = String(r);
    memory.rateValue.textContent = rateText(memory.rate.value);
  }

  function showMemoryError(t) {
    memory.error.textContent = t;
    memory.error.hidden = !t;
  }

  // resetMemory empties the panel for another conversation; koe's
  // memory-state for it follows (the server sends it after a history
  // switch; after anything else the page asks). The last context stays
  // blank until asked for: the last call may belong to the conversation
  // left.
  function resetMemory(ask) {
    showMemory({ summaries: [], totals: {}, pending: 0, turns: 0 });
    showMemoryError("");
    clearContext();
    ctxView.status.textContent = "Refresh to see the last LLM call.";
    if (ask) send({ type: "fetch-memory-state" });
  }

  // memoryError takes an error frame that answers one of the panel's
  // requests; it reports whether it did.
  function memoryError(m) {
    const w = memory.waiting.shift();
    if (!w) return false;
    const t = String(m.message || "refused");
    if (w.kind === "rate") {
      showMemoryError("koe kept the rate at " + rateText(memory.serverRate) + ": " + t);
      showRate(memory.serverRate);
    } else {
      clearContext();
      ctxView.status.textContent = t;
    }
    return true;
  }

  function showPanel(open) {
    memory.panel.hidden = !open;
    memory.toggle.setAttribute("aria-pressed", String(open));
    localStorage.setItem("koe.memory", open ? "1" : "0");
  }
  memory.toggle.addEventListener("click", () => showPanel(memory.panel.hidden));
  $("memory-close").addEventListener("click", () => { showPanel(false); memory.toggle.focus(); });
  showPanel(localStorage.getItem("koe.memory") === "1");

  memory.rate.addEventListener("input", () => { memory.rateValue.textContent = rateText(memory.rate.value); });
  memory.rate.addEventListener("change", () => {
    const rate = Number(memory.rate.value);
    if (!ws || ws.readyState !== WebSocket.OPEN) { showRate(memory.serverRate); return; }
    memory.waiting.push({ kind: "rate", rate });
    send({ type: "set-compression-rate", rate });
  });

  // ---- Last context ----------------------------------------------------------

  function fetchContext() {
    if (!ws || ws.readyState !== WebSocket.OPEN) { ctxView.status.textContent = "Not connected."; return; }
    ctxView.status.textContent = "Loading…";
    memory.waiting.push({ kind: "context" });
    send({ type: "fetch-context" });
  }

  function clearContext() {
    ctxView.status.textContent = "";
    ctxView.totals.replaceChildren();
    ctxView.list.replaceChildren();
    ctxView.when.textContent = "";
  }

  function showContext(c) {
    const w = memory.waiting.findIndex((x) => x.kind === "context");
    if (w >= 0) memory.waiting.splice(w, 1);
    clearContext();
    const when = c.time ? new Date(c.time) : null;
    ctxView.when.textContent = String(c.model || "") + (when && !isNaN(when) ? " · " + when.toLocaleTimeString() : "");
    const lines = [
      ["context-tokens", "≈ " + count(c.estimated_tokens) + " tokens of a " + count(c.budget) + " budget (window " + count(c.context_window) + ")" +
        (c.tool_tokens > 0 ? ", tools " + count(c.tool_tokens) : "")],
      ["context-turns", plural(c.summaries, "summary", "summaries") + " · " + plural(c.raw_turns, "raw turn", "raw turns")],
      ["context-dropped", "dropped: " + plural(c.dropped_turns, "turn", "turns") + ", " + plural(c.dropped_summaries, "summary", "summaries")],
    ];
    if (c.usage) lines.push(["context-usage", "the LLM counted " + count(c.usage.prompt_tokens) + " prompt and " + count(c.usage.completion_tokens) + " answer tokens"]);
    if (c.calibration > 0 && Math.abs(c.calibration - 1) > 0.005) lines.push(["context-calibration", "counts calibrated ×" + Number(c.calibration).toFixed(2)]);
    ctxView.totals.replaceChildren(...lines.map(([id, t]) => {
      const d = document.createElement("div");
      d.id = id; d.textContent = t;
      return d;
    }));
    ctxView.list.replaceChildren(...(Array.isArray(c.messages) ? c.messages : []).map(contextItem));
  }

  function contextItem(msg) {
    const li = document.createElement("li"), head = document.createElement("div");
    const role = document.createElement("span"), tokens = document.createElement("span");
    li.className = "ctx-msg";
    li.dataset.role = String(msg.role);
    li.dataset.tokens = String(msg.tokens);
    head.className = "ctx-head";
    role.className = "ctx-role";
    role.textContent = String(msg.role) + (msg.tool_call_id ? " · " + String(msg.tool_call_id) : "");
    tokens.className = "ctx-tokens"; tokens.textContent = plural(msg.tokens, "token", "tokens");
    head.append(role, " ", tokens);
    li.append(head);
    const content = String(msg.content || "");
    if (content.length > foldAt) {
      const fold = document.createElement("details"), sum = document.createElement("summary");
      fold.className = "ctx-fold";
      const first = content.split("\n", 1)[0];
      sum.textContent = first.length > 100 ? first.slice(0, 100) + "…" : first + " …";
      fold.append(sum, contentBlock(content));
      li.append(fold);
    } else if (content) {
      li.append(contentBlock(content));
    }
    for (const tc of Array.isArray(msg.tool_calls) ? msg.tool_calls : []) {
      const call = document.createElement("pre");
      call.className = "ctx-call";
      call.textContent = "→ " + String(tc.name) + " " + String(tc.arguments || "") + (tc.id ? "  (" + String(tc.id) + ")" : "");
      li.append(call);
    }
    return li;
  }
  function contentBlock(t) {
    const pre = document.createElement("pre");
    pre.className = "ctx-content";
    pre.textContent = t;
    return pre;
  }

  ctxView.box.addEventListener("toggle", () => { if (ctxView.box.open) fetchContext(); });
  $("context-refresh").addEventListener("click", fetchContext);

  // ---- Connection ----------------------------------------------------------
  //
  // A lost connection is opened again, and the new one goes on where the
  // old one was: the same character (if the user switched), the same
  // conversation (fetch-and-set-history), the same compression rate (if
  // the user chose one), the same client_uid (so that an overlay
  // following this session keeps following it). A reload goes on there
  // too, but with a new client_uid. Behind a load
  // balancer it may reach another koe instance; they share the histories.
  // koe closes with 1012 ("service restart") when it drains for a
  // restart: the page reconnects at once then, and with a growing delay
  // after any other close. Messages typed meanwhile wait, shown as
  // waiting, and go out once the conversation is back.

  const serviceRestart = 1012;
  const maxQueued = 20;
  const session = {
    clientUID: "", // koe's name for this page's session
    file: "",      // the character file the user switched to ("": koe's default)
    conf: "",      // that character's conf_uid, as koe last said
    history: "",   // the conversation open now ("": none yet)
    reopening: "", // the conversation being opened again on connecting
    lost: false,   // the character could not be loaded again on connecting
    connects: 0,
    restoring: false, // waiting for the conversation to be back before sending
    queued: [],       // {text, el}: typed while disconnected
    quickUsed: false, // reconnected at once since the conversation was last back
  };
  // For tests: each reconnect ({code, delay}), each conversation reopened
  // ({history, ok}), and the session.
  debug.reconnects = []; debug.restored = []; debug.session = session;

  // The tab remembers where it is, through reloads (sessionStorage: this
  // tab only, so that two tabs can hold two conversations): the
  // character, the conversation and the chosen compression rate.
  const savedKey = "koe.session";
  function saveSession() {
    const s = { file: session.file, conf: session.conf, history: session.history, rate: memory.chosen };
    try { sessionStorage.setItem(savedKey, JSON.stringify(s)); } catch { /* storage off or full: a reload starts afresh */ }
  }
  function loadSession() {
    let s = null;
    try { s = JSON.parse(sessionStorage.getItem(savedKey) || "null"); } catch { /* unreadable: start afresh */ }
    if (!s || typeof s !== "object") return;
    const str = (v) => (typeof v === "string" ? v : "");
    session.file = str(s.file); session.conf = str(s.conf); session.history = str(s.history);
    if (typeof s.rate === "number" && s.rate > 0) memory.chosen = s.rate;
  }

  // Requests whose refusal needs more than an error bubble wait in
  // memory.waiting with the panel's (koe answers in order): a switch of
  // character ({kind: "switch", prev, restore}) and the opening of a
  // conversation ({kind: "history"}).
  function expect(w) { memory.waiting.push(w); }
  function settle(kind) {
    const i = memory.waiting.findIndex((w) => w.kind === kind);
    if (i >= 0) memory.waiting.splice(i, 1);
  }

  function switchCharacter(file, restore) {
    expect({ kind: "switch", prev: session.file, restore });
    session.file = file;
    send({ type: "switch-config", file });
  }

  // switchRefused: koe could not load the character. On connecting (the
  // character file is gone, or broken since), koe's default character
  // goes on, in a new conversation; otherwise the one before stays.
  function switchRefused(w, m) {
    const why = String(m.message || "refused");
    if (w.restore) {
      session.lost = true;
      tell("restore", "The character of this tab could not be loaded again: " + why + ". The default character goes on, in a new conversation.");
      session.file = "";
    } else {
      bubble("error", why);
      session.file = w.prev;
      if ([...characters.options].some((o) => o.value === w.prev)) characters.value = w.prev;
    }
    saveSession();
  }

  function openHistory(uid) {
    session.history = uid;
    expect({ kind: "history" });
    send({ type: "fetch-and-set-history", history_uid: uid });
    saveSession();
  }

  // historyRefused: the conversation could not be opened (deleted
  // meanwhile, or its character is gone): say so and go on in a new one.
  function historyRefused(m) {
    if (session.reopening) debug.restored.push({ history: session.reopening, ok: false });
    session.reopening = "";
    if (!session.lost) tell("restore", "The conversation could not be reopened: " + String(m.message || "refused") + ". A new one begins.");
    session.history = "";
    saveSession();
    send({ type: "create-new-history" });
    resetMemory(true);
  }

  function sendChosenRate() {
    if (!memory.chosen) return;
    memory.waiting.push({ kind: "rate", rate: memory.chosen });
    send({ type: "set-compression-rate", rate: memory.chosen });
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    const query = session.clientUID ? "?client_uid=" + encodeURIComponent(session.clientUID) : "";
    // koe.v1 asks for koe's own events (token deltas, memory-state) on
    // top of the Open-LLM-VTuber message set.
    const sock = ws = new WebSocket(proto + location.host + "/client-ws" + query, ["koe.v1"]);
    sock.onopen = () => {
      retry = 500; setStatus("connected", "ok");
      session.connects++;
      session.lost = false;
      send({ type: "fetch-configs" });
      refreshMCP();
      if (session.file) switchCharacter(session.file, true);
      send({ type: "fetch-history-list" });
      session.restoring = true;
      if (session.history) {
        session.reopening = session.history;
        openHistory(session.history);
        resetMemory(false); // koe sends the conversation's memory-state
      } else {
        send({ type: "create-new-history" });
        resetMemory(true); // a new connection is a new session, at the configured rate
      }
      sendChosenRate();
    };
    sock.onclose = (ev) => {
      if (sock !== ws) return;
      // At once after a 1012, but not again before a connection has
      // worked: a load balancer may send the page back to the instance
      // that is draining.
      const quick = ev.code === serviceRestart && !session.quickUsed;
      const delay = quick ? 0 : retry;
      if (quick) session.quickUsed = true; else retry = Math.min(retry * 2, 8000);
      debug.reconnects.push({ code: ev.code, delay });
      setStatus(ev.code === serviceRestart ? "koe is restarting, reconnecting…" : "disconnected, retrying…", "bad");
      resetVoice(); dropPending(); endTools(); setTurn(false); reply = null;
      session.restoring = false;
      memory.waiting = [];
      setTimeout(connect, delay);
    };
    sock.onmessage = (ev) => { if (sock === ws) handle(JSON.parse(ev.data)); };
  }

  // restored: the conversation is back (or a new one began); what was
  // typed meanwhile goes out now, in order.
  function restored() {
    if (!session.restoring) return;
    session.restoring = false;
    session.quickUsed = false;
    const q = session.queued;
    session.queued = [];
    for (const item of q) {
      item.el.classList.remove("queued");
      log.append(item.el); // after the conversation as koe stored it
      send({ type: "text-input", text: item.text, images: [] });
    }
    log.scrollTop = log.scrollHeight;
  }

  // sendText sends a typed message, or keeps it for when the connection
  // is back.
  function sendText(t) {
    if (ws && ws.readyState === WebSocket.OPEN && !session.restoring) {
      bubble("human", t);
      send({ type: "text-input", text: t, images: [] });
      return true;
    }
    if (session.queued.length >= maxQueued) {
      tell("queue", "Not connected to koe: " + maxQueued + " messages are waiting already. Try again once it is back.");
      return false;
    }
    const el = bubble("human queued", t);
    el.title = "Waiting for the connection to koe: sent once it is back";
    session.queued.push({ text: t, el });
    return true;
  }

  // showHistories lists the character's conversations, the open one
  // chosen. Each is named by koe's title for it (the first words of its
  // first message), else by the start of its latest message, and by when
  // it was last active.
  function showHistories(list) {
    histories.replaceChildren(new Option("new conversation", ""), ...(Array.isArray(list) ? list : []).map((h) => {
      const latest = String((h.latest_message && h.latest_message.content) || "");
      const name = String(h.title || "") || clip(latest, 40) || "(empty)";
      const o = new Option(name + " · " + when(String(h.timestamp || "")), String(h.uid));
      o.title = name;
      return o;
    }));
    histories.value = [...histories.options].some((o) => o.value === session.history) ? session.history : "";
  }
  function clip(t, n) {
    t = t.replace(/\s+/g, " ").trim();
    return t.length > n ? t.slice(0, n - 1) + "…" : t;
  }
  // when words a history's timestamp (local time, to the second, no
  // zone) short: the time today, else the day and the time.
  function when(ts) {
    const d = new Date(ts);
    if (isNaN(d)) return ts;
    const today = new Date().toDateString() === d.toDateString();
    return d.toLocaleString(undefined, today ? { hour: "2-digit", minute: "2-digit" }
      : { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  }

  function handle(m) {
    switch (m.type) {
      case "control":
        if (m.text === "conversation-chain-start") { resetVoice(); endTools(); setTurn(true); reply = null; replyText = ""; said = ""; ignoring = false; }
        if (m.text === "conversation-chain-end") {
          dropPending(); endTools(); setTurn(false); reply = null; send({ type: "fetch-history-list" });
          if (ctxView.box.open && !memory.panel.hidden) fetchContext();
        }
        if (m.text === "interrupt") bargedIn();
        if (m.text === "mic-audio-end") heardUtterance();
        if (m.text === "start-mic" || m.text === "stop-mic") pauseMic(m.text === "stop-mic");
        break;
      case "user-input-transcription":
        transcribed(ignoring ? "" : m.text);
        break;
      case "token":
        if (ignoring) break;
        if (!reply) reply = bubble("ai", "", "");
        replyText += m.content; appendText(reply, m.content);
        log.scrollTop = log.scrollHeight;
        break;
      case "audio":
        if (ignoring) break;
        said += (m.display_text && m.display_text.text) || "";
        enqueue(m);
        break;
      case "tool_call_status":
        if (!ignoring) toolCall(m);
        break;
      case "ask":
        if (!ignoring) askShown(m);
        break;
      case "ask-end":
        askEnded(m);
        break;
      case "status":
        if (m.content && String(m.content.task_id || "").startsWith("ingest:")) docStep(m.content);
        else if (!ignoring) step(m.content);
        break;
      case "file-attached":
        fileAttached(m);
        break;
      case "file-refused":
        fileRefused(m);
        break;
      case "citations":
        citations(m.citations);
        break;
      case "mcp-servers":
        showMCP(m.servers);
        break;
      case "backend-synth-complete":
        if (ignoring) break;
        voice.synthDone = true;
        playNext();
        break;
      case "error": {
        prompts.sent = false;
        const w = memory.waiting[0];
        if (w && w.kind === "switch") { memory.waiting.shift(); switchRefused(w, m); break; }
        if (w && w.kind === "history") { memory.waiting.shift(); historyRefused(m); break; }
        if (memoryError(m)) break;
        // A failed turn still ends with conversation-chain-end.
        bubble("error", m.message);
        break;
      }
      case "memory-state":
        showMemory(m);
        break;
      case "context":
        showContext(m);
        break;
      case "set-model-and-conf":
        if (m.client_uid) session.clientUID = String(m.client_uid);
        document.title = "koe · " + m.conf_name;
        marks.keywords = m.model_info && m.model_info.emotionMap ? Object.keys(m.model_info.emotionMap) : [];
        characters.dataset.current = m.conf_name;
        names.ai = String(m.character_name || ""); names.human = String(m.human_name || "");
        session.conf = String(m.conf_uid || ""); saveSession();
        if (m.conf_uid !== docs.conf) { docs.conf = String(m.conf_uid || ""); docs.refused.replaceChildren(); refreshDocs(); }
        break;
      case "config-files":
        characters.replaceChildren(...m.configs.map((c) => new Option(c.name, c.filename)));
        if (session.file) characters.value = session.file;
        break;
      case "config-switched":
        settle("switch");
        break;
      case "history-list":
        showHistories(m.histories);
        break;
      case "history-data":
        settle("history");
        // Only messages: tool calls are shown live, not kept in the list.
        endTools();
        log.replaceChildren();
        m.messages.forEach((r) => { const b = bubble(r.role === "human" ? "human" : "ai", r.content, r.name); if (r.interrupted) b.classList.add("interrupted"); });
        if (session.reopening) debug.restored.push({ history: session.reopening, ok: true });
        session.reopening = "";
        histories.value = session.history;
        restored();
        break;
      case "new-history-created":
        session.history = String(m.history_uid || "");
        saveSession();
        restored();
        break;
      case "mcp-prompts":
        showPrompts(m);
        break;
      case "message":
        promptSent(m.content);
        // The human message of a turn names the history it is stored in
        // (a first turn after a switch of character starts one).
        if (m.content && m.content.type === "human" && m.content.additional_kwargs && m.content.additional_kwargs.history_uid) {
          session.history = String(m.content.additional_kwargs.history_uid);
          saveSession();
        }
        break;
    }
  }

  $("form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = text.value.trim();
    if (!t) return;
    if (asking.id) {
      // It answers the question the reply waits on: the reply goes on.
      if (sendText(t)) text.value = "";
      return;
    }
    // The new input cancels the running reply; tell the server what was heard.
    if (inTurn || voice.current) stopReply(true);
    dropPending(); // the typed message supersedes an utterance being transcribed
    if (sendText(t)) text.value = "";
  });
  stopBtn.addEventListener("click", () => stopReply(true));
  // Leaving the conversation silences it; the server stops the turn itself.
  function leave() { stopReply(false); log.replaceChildren(); }
  function newHistory() { leave(); session.history = ""; saveSession(); send({ type: "create-new-history" }); resetMemory(true); }
  $("new").addEventListener("click", newHistory);
  histories.addEventListener("change", () => {
    if (histories.value) {
      stopReply(false); resetMemory(false);
      openHistory(histories.value);
    }
    else newHistory();
  });
  characters.addEventListener("change", () => {
    leave();
    session.history = ""; // the next turn starts a history
    switchCharacter(characters.value, false);
    saveSession();
    send({ type: "fetch-history-list" });
    resetMemory(true);
    sendChosenRate(); // the new character's agent starts at its configured rate
  });
  // ---- MCP prompts -------------------------------------------------------
  //
  // The prompts of the character's MCP servers, listed when the panel
  // opens; one picked is filled in and sent (use-mcp-prompt). koe gets its
  // text from the server and runs it as the user's turn; the turn's human
  // message event brings the text for the bubble.

  const prompts = { box: $("prompts"), list: $("prompt-list"), status: $("prompt-status"), form: $("prompt-form"),
    args: $("prompt-args"), title: $("prompt-title"), chosen: null, sent: false };
  prompts.box.addEventListener("toggle", () => {
    if (!prompts.box.open) return;
    prompts.form.hidden = true; prompts.list.hidden = false;
    prompts.status.textContent = "Asking the MCP servers…"; prompts.status.className = "doc-status";
    send({ type: "fetch-mcp-prompts" });
  });
  function showPrompts(m) {
    const list = Array.isArray(m.prompts) ? m.prompts : [];
    const down = Array.isArray(m.unavailable) ? m.unavailable : [];
    prompts.status.textContent = (list.length ? "" : "No prompts: the character's MCP servers offer none now.") +
      (down.length ? " " + down.join("; ") : "");
    prompts.status.className = "doc-status" + (down.length ? " error" : "");
    prompts.list.replaceChildren(...list.map((p) => {
      const li = document.createElement("li"), b = document.createElement("button");
      b.type = "button"; b.dataset.server = String(p.server); b.dataset.name = String(p.name);
      b.textContent = String(p.title || p.name) + " · " + String(p.server);
      if (p.description) { const d = document.createElement("div"); d.className = "about"; d.textContent = String(p.description); b.append(d); }
      b.addEventListener("click", () => choosePrompt(p));
      li.append(b);
      return li;
    }));
  }
  function choosePrompt(p) {
    prompts.chosen = p;
    prompts.title.textContent = String(p.title || p.name);
    prompts.args.replaceChildren(...(Array.isArray(p.arguments) ? p.arguments : []).map((a) => {
      const label = document.createElement("label"), input = document.createElement("input");
      label.append(String(a.title || a.name) + (a.required ? " *" : ""));
      input.name = String(a.name); input.required = !!a.required; input.autocomplete = "off";
      label.append(input);
      if (a.description) { const d = document.createElement("div"); d.className = "about"; d.textContent = String(a.description); label.append(d); }
      return label;
    }));
    prompts.list.hidden = true; prompts.form.hidden = false;
    const first = prompts.args.querySelector("input");
    if (first) first.focus();
  }
  prompts.form.addEventListener("submit", (e) => {
    e.preventDefault();
    const p = prompts.chosen;
    if (!p) return;
    const args = {};
    for (const input of prompts.args.querySelectorAll("input")) if (input.value !== "") args[input.name] = input.value;
    if (inTurn || voice.current) stopReply(true);
    dropPending();
    prompts.sent = true;
    send({ type: "use-mcp-prompt", mcp_prompt: { server: p.server, prompt: p.name, arguments: args } });
    prompts.box.open = false;
  });
  $("prompt-cancel").addEventListener("click", () => { prompts.form.hidden = true; prompts.list.hidden = false; });
  // promptSent shows the text of a prompt this page sent, as the user's
  // bubble, once koe has it.
  function promptSent(c) {
    if (!prompts.sent || !c || c.type !== "human") return;
    prompts.sent = false;
    bubble("human", String(c.content || ""));
  }

  loadSession();
  connect();
})();
