// koe's overlay for an OBS browser source. It watches a character (or one
// client's session) read-only over /client-ws?watch_conf= (or ?watch=) and
// shows what is said: each audio piece's subtitle while the piece plays,
// the character's name, and a PNG avatar whose picture follows the piece's
// lip-sync volumes and emotions. It plays the sound itself (audio=1) or
// paces everything by the pieces' durations in silence.
//
// With ?scene=ID (a scene of /api/scenes) it shows every character of the
// scene side by side, each with its avatar and its own subtitle under it,
// the one speaking highlighted: it watches each character's session of
// the scene, and plays the pieces of all of them in one queue, in the
// order they came.
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
    scene: q.get("scene") || "",
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
    // With ?scene=: the scene as GET /api/scenes/{id} answered it, and
    // each character's subtitles in order ({conf, text}).
    scene: null,
    lines: [],
    speaking: "",             // conf_uid of the character whose piece plays
  };

  // ---- The characters shown -------------------------------------------
  //
  // A member is one character on the page: its elements, its view and
  // what its avatar shows. Without ?scene= there is one, on the page's
  // own elements; a scene makes one per character.

  function newMember(els) {
    return Object.assign({ view: null, conf: "", talking: false, blinking: false, emotion: "", fadeTimer: 0, turnViewers: [] }, els);
  }
  const single = newMember({ box: null, img, caption, nameEl, subtitle, viewersEl });
  let members = [single];

  // ---- The avatar -------------------------------------------------------

  function avatarOn(m) { return opt.avatar && m.view && m.view.avatar; }

  function showAvatar(m) {
    const a = avatarOn(m);
    if (!a) { m.img.hidden = true; m.img.removeAttribute("src"); return; }
    const e = m.emotion ? a.emotions[m.emotion] : null;
    let src;
    if (m.talking) src = (e && e.talking) || a.talking;
    else if (m.blinking && !e && a.blink) src = a.blink;
    else src = (e && e.idle) || a.idle;
    if (m.img.getAttribute("src") !== src) m.img.setAttribute("src", src);
    m.img.hidden = false;
  }

  function setTalking(m, on) {
    if (on === m.talking) return;
    m.talking = on;
    showAvatar(m);
  }

  // The pictures are fetched once, so a switch never waits for the network.
  const preloaded = [];
  function applyView(view, m) {
    m = m || single;
    m.view = view;
    m.conf = view.conf_uid;
    if (m === single) { state.view = view; state.confUID = view.conf_uid; }
    m.nameEl.textContent = opt.showName ? view.name : "";
    const img = m.img;
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
    showAvatar(m);
  }

  // Blinking: now and then, for a moment, while nothing is spoken.
  function scheduleBlink() {
    const wait = opt.blink * (0.7 + 0.6 * Math.random());
    setTimeout(() => {
      for (const m of members) {
        const a = avatarOn(m);
        if (a && a.blink && !m.talking && !(playing && playing.member === m) && !m.emotion) {
          m.blinking = true; showAvatar(m);
          setTimeout(() => { m.blinking = false; showAvatar(m); }, 150);
        }
      }
      scheduleBlink();
    }, wait);
  }

  // ---- Subtitles --------------------------------------------------------

  // spoken drops the marks a reply carries for koe rather than for its
  // audience: emotion keywords ("[joy]", which move the avatar) and
  // citation marks ("[1]", "[2, 3]", which koe's page lists under the
  // reply), with the space before them.
  function spoken(text, m) {
    const kws = m.view && Array.isArray(m.view.emotion_keywords) ? m.view.emotion_keywords : [];
    const esc = kws.map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const marks = ["\\d+(?:\\s*,\\s*\\d+)*"].concat(esc);
    const re = new RegExp("\\s*\\[\\s*(?:" + marks.join("|") + ")\\s*\\]", "gi");
    return text.replace(re, "").replace(/\s{2,}/g, " ").trim();
  }

  // showViewers names the viewers a live chat turn answers (the
  // conversation-chain-start's viewers), next to the subtitle.
  function showViewers(m, list) {
    m.viewersEl.textContent = opt.showViewers && list && list.length ? "→ " + list.join(", ") : "";
  }

  function showSubtitle(m, text) {
    clearTimeout(m.fadeTimer);
    m.subtitle.textContent = text;
    m.caption.classList.toggle("hidden", text === "");
    if (text !== "") {
      state.subtitles.push(text);
      if (state.scene) state.lines.push({ conf: m.conf, text });
    }
  }

  // After a member's last piece: its subtitle stays opt.fade, then fades
  // out and its avatar drops its emotion.
  function fadeLater(m) {
    clearTimeout(m.fadeTimer);
    m.fadeTimer = setTimeout(() => {
      m.caption.classList.add("hidden");
      m.emotion = ""; showAvatar(m);
    }, opt.fade);
  }

  // setSpeaking highlights the member whose piece plays (a scene).
  function setSpeaking(m) {
    state.speaking = m ? m.conf : "";
    for (const x of members) if (x.box) x.box.classList.toggle("speaking", x === m);
  }

  // ---- Playback ---------------------------------------------------------

  const queue = [];
  let playing = null; // the piece playing: {seq, member, el, start, duration, volumes, slice, timer}
  let generation = 0; // bumped by stop(): pieces of before are dropped

  // A member's turnViewers are the viewers the turn being received
  // answers; each of its pieces carries them to when it plays.
  function enqueue(m, frame) {
    frame.viewers = m.turnViewers;
    frame.member = m;
    queue.push(frame);
    if (!playing && queue.length === 1) next();
  }

  // stop drops everything of member m queued and playing, at once (an
  // interrupt, a lost connection); the other members' pieces go on.
  function stop(m) {
    // A piece being started (its sound loading) is dropped too: the
    // generation tells it; what is left of the queue starts again below.
    generation++;
    for (let i = queue.length - 1; i >= 0; i--) if (queue[i].member === m) queue.splice(i, 1);
    if (playing && playing.member === m) {
      clearTimeout(playing.timer);
      if (playing.el) playing.el.pause();
      playing = null;
      state.slice = -1;
      setSpeaking(null);
    }
    if (!playing && queue.length > 0) next();
    clearTimeout(m.fadeTimer);
    showSubtitle(m, "");
    showViewers(m, []);
    m.emotion = ""; m.talking = false;
    showAvatar(m);
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
  function pieceEmotion(actions, m) {
    const a = avatarOn(m);
    if (!a || !actions || !Array.isArray(actions.expressions)) return null;
    for (const x of actions.expressions) {
      const k = JSON.stringify(x);
      if (a.emotions[k]) return k;
    }
    return null;
  }

  async function next() {
    const frame = queue[0];
    if (!frame) { setSpeaking(null); return; }
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
    const m = frame.member;
    const seq = ++state.chunk;
    setSpeaking(members.length > 1 ? m : null);
    if (frame.display_text && frame.display_text.name && opt.showName && m === single) m.nameEl.textContent = frame.display_text.name;
    const e = pieceEmotion(frame.actions, m);
    if (e) m.emotion = e;
    // A later part of a sentence streamed in parts has no display_text:
    // its sentence's subtitle stays up.
    if (frame.display_text) { showViewers(m, frame.viewers); showSubtitle(m, spoken(text, m)); }
    else clearTimeout(m.fadeTimer);
    const p = playing = { seq, member: m, el, text, start: performance.now(), duration, volumes, slice, timer: 0 };
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
      setTalking(p.member, false);
      // The member's subtitle fades unless its next piece is already
      // waiting.
      if (!queue.some((f) => f.member === p.member)) fadeLater(p.member);
      next();
      return;
    }
    const a = avatarOn(p.member);
    const i = Math.min(Math.floor(t / p.slice), p.volumes.length - 1);
    state.slice = i;
    setTalking(p.member, Boolean(a) && i >= 0 && p.volumes[i] >= a.threshold);
    p.timer = setTimeout(() => tick(p), Math.max(1, p.slice - (t % p.slice)));
  }

  // pending is how many pieces are queued or playing.
  state.pending = () => queue.length + (playing ? 1 : 0);

  // A click in the page (OBS: Interact) lets sound play again.
  document.addEventListener("pointerdown", () => { if (state.audio === "blocked") state.audio = "on"; });

  // ---- Connection -------------------------------------------------------

  // Each member has its own connection (a scene: one per character), and
  // its own patience when it is lost.
  const backoff = (c) => { const d = c.retry; c.retry = Math.min(c.retry * 2, 8000); return d; };

  async function fetchView(conf) {
    const r = await fetch("/api/characters/" + encodeURIComponent(conf) + "/overlay", { cache: "no-store" });
    if (!r.ok) throw new Error("overlay view: HTTP " + r.status);
    return r.json();
  }

  // target is the single member's watch query; the default character's
  // conf_uid is asked for first (again after every lost connection: it
  // may have changed).
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

  // connect keeps member m's connection open until the returned function
  // is called; query returns its watch query.
  function connect(m, query) {
    const c = { retry: 500, quickUsed: false, closed: false, ws: null }; // quickUsed: reconnected at once since the last turn followed
    const open = async () => {
      let qs;
      try {
        qs = await query();
      } catch (err) {
        if (!c.closed) setTimeout(open, backoff(c));
        return;
      }
      if (c.closed) return;
      const proto = location.protocol === "https:" ? "wss://" : "ws://";
      // The token, when koe has one, is the cookie koe set when this page
      // was opened with ?token=, as for koe's own page.
      const ws = c.ws = new WebSocket(proto + location.host + "/client-ws?" + qs);
      ws.onopen = () => {
        c.retry = 500; state.connects++;
        m.connected = true;
        if (members.every((x) => x.connected)) state.connection = "connected";
      };
      // koe closes with 1012 ("service restart") when it drains for a
      // restart: another instance (or this one, back) takes the watch at
      // once; after any other close the overlay waits longer each time.
      ws.onclose = (ev) => {
        m.connected = false;
        if (c.closed) return;
        state.connection = "reconnecting";
        // At once after a 1012, but not again before a turn has been
        // followed: a load balancer may send the overlay back to the
        // instance that drains, which greets and closes again.
        const quick = ev.code === 1012 && !c.quickUsed;
        if (quick) c.quickUsed = true;
        const delay = quick ? 0 : backoff(c);
        state.reconnects.push({ code: ev.code, delay });
        stop(m);
        setTimeout(open, delay);
      };
      ws.onmessage = (ev) => {
        if (c.closed) return;
        let msg;
        try { msg = JSON.parse(ev.data); } catch (e) { return; }
        if (msg.type === "audio" || msg.type === "control") c.quickUsed = false;
        handle(m, msg);
      };
    };
    open();
    return () => { c.closed = true; if (c.ws) c.ws.close(); };
  }

  function handle(m, msg) {
    switch (msg.type) {
      case "audio":
        enqueue(m, msg);
        break;
      case "control":
        if (msg.text === "interrupt") stop(m);
        if (msg.text === "conversation-chain-start") {
          m.turnViewers = Array.isArray(msg.viewers) ? msg.viewers.filter((v) => typeof v === "string") : [];
        }
        break;
      case "set-model-and-conf":
        // The character seen (for a client watcher, the one its speaker
        // talks as now): its name and pictures, as configured now. A
        // scene's members keep the character they were made for.
        if (msg.conf_uid && m === single) fetchView(msg.conf_uid).then((v) => applyView(v, m), () => {});
        break;
    }
  }

  // ---- A scene ----------------------------------------------------------

  // el makes an element of the page.
  function el(tag, cls, parent) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }

  // showScene shows scene sc's characters side by side, each watched on
  // its session of the scene, in place of the scene shown before.
  let sceneRow = null, sceneClose = [];
  function showScene(sc) {
    for (const close of sceneClose) close();
    for (const m of members) stop(m);
    if (sceneRow) sceneRow.remove();
    state.scene = sc;
    stage.hidden = true;
    const row = sceneRow = el("div", "", document.body);
    row.id = "scene";
    row.className = stage.className === "top" ? "top" : "bottom";
    members = sc.characters.map((ch) => {
      const box = el("div", "member", row);
      box.dataset.conf = ch.conf_uid;
      const mimg = el("img", "avatar", box);
      mimg.alt = "";
      mimg.hidden = true;
      const cap = el("div", "caption hidden", box);
      const m = newMember({ box, img: mimg, caption: cap, nameEl: el("div", "name text", cap), viewersEl: el("div", "viewers text", cap), subtitle: el("div", "subtitle text", cap) });
      m.conf = ch.conf_uid;
      m.nameEl.textContent = opt.showName ? ch.name : "";
      return m;
    });
    sceneClose = members.map((m, i) => {
      fetchView(m.conf).then((v) => applyView(v, m), () => {});
      const uid = sc.characters[i].client_uid;
      return connect(m, async () => uid ? "watch=" + encodeURIComponent(uid) : "watch_conf=" + encodeURIComponent(m.conf));
    });
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  // startScene shows the scene of ?scene=ID; with ?scene=current, the
  // scene running (or paused) now, and the next one when another starts:
  // the list of scenes is read every two seconds.
  async function startScene() {
    if (opt.scene !== "current") {
      for (;;) {
        try {
          showScene(await getJSON("/api/scenes/" + encodeURIComponent(opt.scene)));
          return;
        } catch (err) {
          await new Promise((res) => setTimeout(res, 2000));
        }
      }
    }
    const look = async () => {
      try {
        const list = await getJSON("/api/scenes");
        const sc = (list.scenes || []).find((x) => x.state !== "ended");
        if (sc && (!state.scene || state.scene.id !== sc.id)) showScene(sc);
      } catch (err) { /* koe is away: look again */ }
      setTimeout(look, 2000);
    };
    look();
  }

  scheduleBlink();
  if (opt.scene) startScene();
  else connect(single, target);
})();
