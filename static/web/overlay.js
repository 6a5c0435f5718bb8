// koe's overlay for an OBS browser source. It watches a character (or one
// client's session) read-only over /client-ws?watch_conf= (or ?watch=) and
// shows what is said: each audio piece's subtitle while the piece plays,
// the character's name, and a PNG avatar whose picture follows the piece's
// lip-sync volumes and emotions. It plays the sound itself (audio=1) or
// paces everything by the pieces' durations in silence.
(() => {
  "use strict";

  const q = new URLSearchParams(location.search);
  const number = (name, def, lo, hi) => {
    const v = parseFloat(q.get(name));
    return Number.isFinite(v) && v >= lo && v <= hi ? v : def;
  };
  const positions = ["bottom", "top", "left", "right", "center"];
  const opt = {
    conf: q.get("conf") || "",
    client: q.get("client") || "",
    audio: q.get("audio") === "1",
    avatar: q.get("avatar") !== "0",
    showName: q.get("name") !== "0",
    showViewers: q.get("viewers") !== "0",
    fade: number("fade", 3, 0, 3600) * 1000,   // after the last piece ends
    blink: number("blink", 4, 0.5, 3600) * 1000, // mean interval while idle
  };

  const $ = (id) => document.getElementById(id);
  const stage = $("stage"), img = $("avatar"), caption = $("caption"), nameEl = $("name"), subtitle = $("subtitle"), viewersEl = $("viewers");
  stage.className = positions.includes(q.get("position")) ? q.get("position") : "bottom";

  // Look, from the URL; values the browser does not take as CSS are left
  // at their defaults rather than breaking the rule that holds them.
  const root = document.documentElement.style;
  const cssValue = (name, prop, kind) => {
    const v = q.get(name);
    if (v && CSS.supports(kind, v)) root.setProperty(prop, v);
  };
  cssValue("color", "--color", "color");
  cssValue("outline", "--outline", "color");
  cssValue("bg", "--bg", "background-color");
  cssValue("font", "--font", "font-family");
  const size = number("size", 0, 6, 400);
  if (size) root.setProperty("--size", size + "px");
  const avatarSize = number("avatar_size", 0, 5, 100);
  if (avatarSize) root.setProperty("--avatar", avatarSize + "vh");

  // What the page does, for tests and for anyone debugging a set-up in
  // the browser's console.
  const state = window.koeOverlay = {
    connection: "connecting", // connecting | connected | reconnecting
    connects: 0,              // WebSockets opened
    reconnects: [],           // each lost connection: {code, delay} (ms)
    confUID: "",
    view: null,               // GET /api/characters/:conf_uid/overlay
    audio: opt.audio ? "on" : "off", // on | off | blocked (autoplay refused)
    chunk: -1,                // audio pieces started since the page loaded
    slice: -1,                // the volume slice the avatar shows
    subtitles: [],            // every subtitle shown, in order
    played: [],               // {chunk, text, silent, ms}
  };

  // ---- The avatar -------------------------------------------------------

  let talking = false, blinking = false, emotion = "";

  function avatarOn() { return opt.avatar && state.view && state.view.avatar; }

  function showAvatar() {
    const a = avatarOn();
    if (!a) { img.hidden = true; img.removeAttribute("src"); return; }
    const e = emotion ? a.emotions[emotion] : null;
    let src;
    if (talking) src = (e && e.talking) || a.talking;
    else if (blinking && !e && a.blink) src = a.blink;
    else src = (e && e.idle) || a.idle;
    if (img.getAttribute("src") !== src) img.setAttribute("src", src);
    img.hidden = false;
  }

  function setTalking(on) {
    if (on === talking) return;
    talking = on;
    showAvatar();
  }

  // The pictures are fetched once, so a switch never waits for the network.
  const preloaded = [];
  function applyView(view) {
    state.view = view;
    state.confUID = view.conf_uid;
    nameEl.textContent = opt.showName ? view.name : "";
    const a = view.avatar;
    if (a) {
      // The avatar's box takes the idle picture's shape, so that a
      // picture of another shape (an emotion's) fits in it instead of
      // moving what is beside it.
      const idle = new Image();
      idle.onload = () => { if (idle.naturalWidth && idle.naturalHeight) img.style.aspectRatio = idle.naturalWidth + " / " + idle.naturalHeight; };
      idle.src = a.idle;
      preloaded.push(idle);
      const urls = [a.idle, a.talking, a.blink];
      for (const k in a.emotions) urls.push(a.emotions[k].idle, a.emotions[k].talking);
      for (const u of urls) {
        if (!u) continue;
        const pic = new Image();
        pic.src = u;
        preloaded.push(pic);
      }
    }
    showAvatar();
  }

  // Blinking: now and then, for a moment, while nothing is spoken.
  function scheduleBlink() {
    const wait = opt.blink * (0.7 + 0.6 * Math.random());
    setTimeout(() => {
      const a = avatarOn();
      if (a && a.blink && !talking && !playing && !emotion) {
        blinking = true; showAvatar();
        setTimeout(() => { blinking = false; showAvatar(); }, 150);
      }
      scheduleBlink();
    }, wait);
  }

  // ---- Subtitles --------------------------------------------------------

  let fadeTimer = 0;

  // spoken drops the marks a reply carries for koe rather than for its
  // audience: emotion keywords ("[joy]", which move the avatar) and
  // citation marks ("[1]", "[2, 3]", which koe's page lists under the
  // reply), with the space before them.
  function spoken(text) {
    const kws = state.view && Array.isArray(state.view.emotion_keywords) ? state.view.emotion_keywords : [];
    const esc = kws.map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const marks = ["\\d+(?:\\s*,\\s*\\d+)*"].concat(esc);
    const re = new RegExp("\\s*\\[\\s*(?:" + marks.join("|") + ")\\s*\\]", "gi");
    return text.replace(re, "").replace(/\s{2,}/g, " ").trim();
  }

  // showViewers names the viewers a live chat turn answers (the
  // conversation-chain-start's viewers), next to the subtitle.
  function showViewers(list) {
    viewersEl.textContent = opt.showViewers && list && list.length ? "→ " + list.join(", ") : "";
  }

  function showSubtitle(text) {
    clearTimeout(fadeTimer);
    subtitle.textContent = text;
    caption.classList.toggle("hidden", text === "");
    if (text !== "") state.subtitles.push(text);
  }

  // After the last piece: the subtitle stays opt.fade, then fades out and
  // the avatar drops its emotion.
  function fadeLater() {
    clearTimeout(fadeTimer);
    fadeTimer = setTimeout(() => {
      caption.classList.add("hidden");
      emotion = ""; showAvatar();
    }, opt.fade);
  }

  // ---- Playback ---------------------------------------------------------

  const queue = [];
  let playing = null; // the piece playing: {seq, el, start, duration, volumes, slice, timer}
  let generation = 0; // bumped by stop(): pieces of before are dropped

  // turnViewers are the viewers the turn being received answers; each of
  // its pieces carries them to when it plays.
  let turnViewers = [];

  function enqueue(frame) {
    frame.viewers = turnViewers;
    queue.push(frame);
    if (!playing && queue.length === 1) next();
  }

  // stop drops everything queued and playing, at once (an interrupt, a
  // lost connection).
  function stop() {
    generation++;
    queue.length = 0;
    if (playing) {
      clearTimeout(playing.timer);
      if (playing.el) playing.el.pause();
      playing = null;
    }
    clearTimeout(fadeTimer);
    showSubtitle("");
    showViewers([]);
    emotion = ""; talking = false; state.slice = -1;
    showAvatar();
  }

  // wavDuration reads a WAV file's length (ms) from its header, without
  // decoding all of it; NaN when it is not a WAV koe would send.
  function wavDuration(b64) {
    try {
      const head = atob(b64.slice(0, 4096));
      const u32 = (i) => (head.charCodeAt(i) | head.charCodeAt(i + 1) << 8 | head.charCodeAt(i + 2) << 16 | head.charCodeAt(i + 3) << 24) >>> 0;
      if (head.slice(0, 4) !== "RIFF" || head.slice(8, 12) !== "WAVE") return NaN;
      let byteRate = 0;
      for (let i = 12; i + 8 <= head.length;) {
        const id = head.slice(i, i + 4), size = u32(i + 4);
        if (id === "fmt ") byteRate = u32(i + 16);
        if (id === "data") {
          const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
          const total = b64.length / 4 * 3 - pad;
          return byteRate > 0 ? (Math.min(size, total - i - 8) / byteRate) * 1000 : NaN;
        }
        i += 8 + size + (size & 1);
      }
    } catch (e) { /* not base64 */ }
    return NaN;
  }

  // expressionKey is how the view keys an expression: its JSON.
  function pieceEmotion(actions) {
    const a = avatarOn();
    if (!a || !actions || !Array.isArray(actions.expressions)) return null;
    for (const x of actions.expressions) {
      const k = JSON.stringify(x);
      if (a.emotions[k]) return k;
    }
    return null;
  }

  async function next() {
    const frame = queue[0];
    if (!frame) { fadeLater(); return; }
    const gen = generation;
    // The piece before has ended in this task; whoever observes the page
    // (a MutationObserver) sees that before this piece begins.
    await null;
    const volumes = Array.isArray(frame.volumes) ? frame.volumes : [];
    const slice = frame.slice_length > 0 ? frame.slice_length : 20;
    const text = frame.display_text && typeof frame.display_text.text === "string" ? frame.display_text.text : "";
    let duration = typeof frame.audio === "string" ? wavDuration(frame.audio) : NaN;
    if (!Number.isFinite(duration)) duration = volumes.length * slice;
    if (!frame.audio || !(duration > 0)) {
      // A silent piece (text only): long enough to be read.
      duration = Math.min(Math.max(text.length * 60, 1000), 8000);
    }
    let el = null;
    if (opt.audio && state.audio === "on" && typeof frame.audio === "string" && frame.audio) {
      el = new Audio("data:audio/wav;base64," + frame.audio);
      try {
        await el.play();
      } catch (err) {
        el = null;
        // The browser's autoplay policy: go on in silence until someone
        // interacts with the page (OBS: Interact, then click).
        if (err && err.name === "NotAllowedError") state.audio = "blocked";
      }
    }
    if (gen !== generation) { if (el) el.pause(); return; }
    queue.shift();
    const seq = ++state.chunk;
    if (frame.display_text && frame.display_text.name && opt.showName) nameEl.textContent = frame.display_text.name;
    const e = pieceEmotion(frame.actions);
    if (e) emotion = e;
    // A later part of a sentence streamed in parts has no display_text:
    // its sentence's subtitle stays up.
    if (frame.display_text) { showViewers(frame.viewers); showSubtitle(spoken(text)); }
    else clearTimeout(fadeTimer);
    const p = playing = { seq, el, text, start: performance.now(), duration, volumes, slice, timer: 0 };
    if (el) {
      el.addEventListener("ended", () => tick(p));
      // A file the browser cannot play is paced in silence from here on.
      el.addEventListener("error", () => {
        if (p.el) { p.start = performance.now() - p.el.currentTime * 1000; p.el = null; tick(p); }
      });
    }
    tick(p);
  }

  // tick moves the avatar to the piece's current volume slice and ends the
  // piece when its time is up.
  function tick(p) {
    if (playing !== p) return;
    clearTimeout(p.timer);
    const wall = performance.now() - p.start;
    const t = p.el ? p.el.currentTime * 1000 : wall;
    // An element that stops advancing (a stalled device) does not hold
    // the overlay up for longer than the piece plus a margin.
    const done = p.el ? p.el.ended || wall > p.duration + 2000 : t >= p.duration;
    if (done) {
      if (p.el) p.el.pause();
      playing = null;
      state.played.push({ chunk: p.seq, text: p.text, silent: !p.el, ms: Math.round(performance.now() - p.start) });
      state.slice = -1;
      setTalking(false);
      next();
      return;
    }
    const a = avatarOn();
    const i = Math.min(Math.floor(t / p.slice), p.volumes.length - 1);
    state.slice = i;
    setTalking(Boolean(a) && i >= 0 && p.volumes[i] >= a.threshold);
    p.timer = setTimeout(() => tick(p), Math.max(1, p.slice - (t % p.slice)));
  }

  // pending is how many pieces are queued or playing.
  state.pending = () => queue.length + (playing ? 1 : 0);

  // A click in the page (OBS: Interact) lets sound play again.
  document.addEventListener("pointerdown", () => { if (state.audio === "blocked") state.audio = "on"; });

  // ---- Connection -------------------------------------------------------

  let retry = 500;
  let quickUsed = false; // reconnected at once since the last turn followed
  const backoff = () => { const d = retry; retry = Math.min(retry * 2, 8000); return d; };

  async function fetchView(conf) {
    const r = await fetch("/api/characters/" + encodeURIComponent(conf) + "/overlay", { cache: "no-store" });
    if (!r.ok) throw new Error("overlay view: HTTP " + r.status);
    return r.json();
  }

  // target is the watch query; the default character's conf_uid is asked
  // for first (again after every lost connection: it may have changed).
  async function target() {
    if (opt.client) return "watch=" + encodeURIComponent(opt.client);
    let conf = opt.conf;
    if (!conf) {
      const v = await fetchView("default");
      applyView(v);
      conf = v.conf_uid;
    }
    return "watch_conf=" + encodeURIComponent(conf);
  }

  async function connect() {
    let query;
    try {
      query = await target();
    } catch (err) {
      setTimeout(connect, backoff());
      return;
    }
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    // The token, when koe has one, is the cookie koe set when this page
    // was opened with ?token=, as for koe's own page.
    const ws = new WebSocket(proto + location.host + "/client-ws?" + query);
    ws.onopen = () => { retry = 500; state.connects++; state.connection = "connected"; };
    // koe closes with 1012 ("service restart") when it drains for a
    // restart: another instance (or this one, back) takes the watch at
    // once; after any other close the overlay waits longer each time.
    ws.onclose = (ev) => {
      state.connection = "reconnecting";
      // At once after a 1012, but not again before a turn has been
      // followed: a load balancer may send the overlay back to the
      // instance that drains, which greets and closes again.
      const quick = ev.code === 1012 && !quickUsed;
      if (quick) quickUsed = true;
      const delay = quick ? 0 : backoff();
      state.reconnects.push({ code: ev.code, delay });
      stop();
      setTimeout(connect, delay);
    };
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      handle(m);
    };
  }

  function handle(m) {
    if (m.type === "audio" || m.type === "control") quickUsed = false;
    switch (m.type) {
      case "audio":
        enqueue(m);
        break;
      case "control":
        if (m.text === "interrupt") stop();
        if (m.text === "conversation-chain-start") {
          turnViewers = Array.isArray(m.viewers) ? m.viewers.filter((v) => typeof v === "string") : [];
        }
        break;
      case "set-model-and-conf":
        // The character seen (for a client watcher, the one its speaker
        // talks as now): its name and pictures, as configured now.
        if (m.conf_uid) fetchView(m.conf_uid).then(applyView, () => {});
        break;
    }
  }

  scheduleBlink();
  connect();
})();
