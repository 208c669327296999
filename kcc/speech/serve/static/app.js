// The kcc web page: streams speech over POST /v1/audio/speech (stream_format "sse", pcm), plays
// each delta as it arrives through Web Audio, and highlights the word being spoken from the
// speech.audio.words events. The download asks for the same speech (same seed: same audio) as a
// whole file in the chosen format. A server started with --api-key answers 401 to /v1/*: the
// page then asks for the key in a small form and sends it as `Authorization: Bearer KEY`.
"use strict";
const RATE = 24000;
const $ = (id) => document.getElementById(id);
const player = {
  ctx: null, start: 0, next: 0, words: [], spans: [], abort: null, done: false, last: null,
  run: 0,            // which Speak the page is in: an older run's highlight loop and handlers stop
  speaking: false,   // the speaking state: "speaking…", Stop enabled, the highlight loop running
  frame: 0,          // the highlight loop's pending animation frame
};
window.kcc = player;   // for tests and the curious: player.played() is seconds heard so far

player.played = () => (player.ctx && player.start ? Math.max(0, player.ctx.currentTime - player.start) : 0);

// The API key lives in sessionStorage: it goes with the tab, not with the browser profile.
const KEY_SLOT = "kcc.apiKey";
const keyWaiters = [];   // requests that got 401, each waiting for the next key typed into the form

function keyNeeded(sent) {
  // A key that was sent and refused is forgotten (unless a newer one replaced it meanwhile).
  if (sent !== null && sessionStorage.getItem(KEY_SLOT) === sent) sessionStorage.removeItem(KEY_SLOT);
  $("key-status").textContent = sent !== null ? "key refused" : "";
  $("key-forget").hidden = true;
  $("key-form").hidden = false;
  $("key").focus();
}

function keyAccepted() {
  $("key-form").hidden = true;
  $("key-status").textContent = "";
  $("key").value = "";
  $("key-forget").hidden = false;
}

async function api(path, init = {}) {
  // fetch() for /v1/*, with the key when the page has one. On 401 it waits for a key from the
  // form and tries again once per key typed: a refused key never makes it ask the server again
  // by itself.
  for (;;) {
    const sent = sessionStorage.getItem(KEY_SLOT);
    const headers = { ...init.headers, ...(sent !== null ? { Authorization: `Bearer ${sent}` } : {}) };
    const resp = await fetch(path, { ...init, headers });
    if (resp.status !== 401) {
      if (sent !== null) keyAccepted();
      return resp;
    }
    keyNeeded(sent);
    await nextKey(init.signal);
  }
}

function nextKey(signal) {
  // Resolves when a key is typed into the form; a request stopped meanwhile stops waiting.
  return new Promise((resolve, reject) => {
    keyWaiters.push(resolve);
    signal?.addEventListener("abort", () => {
      const at = keyWaiters.indexOf(resolve);
      if (at >= 0) keyWaiters.splice(at, 1);
      reject(signal.reason);
    }, { once: true });
  });
}

// What an HTTP header can carry as the server compares it: printable ASCII, no space at the ends
// (fetch would trim those, or throw on anything past Latin-1).
const SENDABLE_KEY = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/;

function useKey(event) {
  event.preventDefault();
  const key = $("key").value;
  if (!SENDABLE_KEY.test(key)) {
    $("key-status").textContent = "not a key this page can send: printable ASCII, no space at either end";
    return;
  }
  sessionStorage.setItem(KEY_SLOT, key);
  $("key-status").textContent = "checking…";
  const waiting = keyWaiters.splice(0);
  if (waiting.length) waiting.forEach((resolve) => resolve());
  else api("/v1/models");   // nobody waiting (a stopped request): check the key on its own
}

function forgetKey() {
  sessionStorage.removeItem(KEY_SLOT);
  $("key-forget").hidden = true;
  $("status").textContent = "API key forgotten";
}

function request(extra) {
  return {
    model: "kokoro", input: $("text").value, voice: $("voice").value, speed: Number($("speed").value),
    ...($("lang").value ? { lang_code: $("lang").value } : {}), ...extra,
  };
}

async function loadVoices() {
  // One group per language (the server lists each voice's language and its name); the first
  // choice sends no voice, so the server speaks each text in its language's own voice.
  const doc = await (await api("/v1/audio/voices")).json();
  $("voice").add(new Option("default voice of the text's language", "", true, true));
  const groups = new Map();
  for (const v of doc.voices) {
    const key = v.language || "";
    if (!groups.has(key)) {
      const g = document.createElement("optgroup");
      g.label = v.language_name ? `${v.language_name} (${v.language})` : (v.language || "other");
      groups.set(key, g);
    }
    groups.get(key).appendChild(new Option(`${v.name}${v.gender ? " (" + v.gender + ")" : ""}`, v.id));
  }
  for (const key of [...groups.keys()].sort()) {
    $("voice").appendChild(groups.get(key));
    if (key) $("lang").add(new Option(groups.get(key).label, key));
  }
}

function schedule(bytes) {
  const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
  if (!pcm.length) return;
  const buf = player.ctx.createBuffer(1, pcm.length, RATE);
  const ch = buf.getChannelData(0);
  for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
  const src = player.ctx.createBufferSource();
  src.buffer = buf;
  src.connect(player.ctx.destination);
  if (!player.start) player.start = player.next = player.ctx.currentTime + 0.05;
  src.start(Math.max(player.next, player.ctx.currentTime));
  player.next = Math.max(player.next, player.ctx.currentTime) + buf.duration;
}

function addWords(words) {
  for (const w of words) {
    const span = document.createElement("span");
    span.textContent = w.word;
    $("words").append(span, " ");
    player.words.push(w);
    player.spans.push(span);
  }
}

function highlight() {
  player.frame = 0;
  if (!player.speaking) return;
  const t = player.played();
  let current = -1;
  for (let i = 0; i < player.words.length; i++) {
    if (player.words[i].start_s <= t && t < player.words[i].end_s) { current = i; break; }
  }
  player.spans.forEach((s, i) => s.classList.toggle("current", i === current));
  player.current = current;
  if (!player.done || t < player.next - player.start) player.frame = requestAnimationFrame(highlight);
  else endSpeaking();                      // the end: everything received has been heard
}

function endSpeaking(status) {
  // The one way out of the speaking state (the end, Stop, an error): the highlight loop ends,
  // no word stays lit, Stop is disabled; `status` (when given) replaces "speaking…".
  player.speaking = false;
  player.done = true;
  if (player.frame) cancelAnimationFrame(player.frame);
  player.frame = 0;
  player.current = -1;
  player.spans.forEach((s) => s.classList.remove("current"));
  $("stop").disabled = true;
  if (status !== undefined) $("status").textContent = status;
}

function silence() {
  // Cut what is still scheduled to play: a closed context plays nothing more (a new one is
  // made by the next Speak).
  if (player.ctx && player.start) { player.ctx.close(); player.ctx = null; }
}

function base64Bytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function speak() {
  stop(null);
  const run = ++player.run;
  player.ctx = player.ctx || new AudioContext({ sampleRate: RATE });
  await player.ctx.resume();
  Object.assign(player, { start: 0, next: 0, words: [], spans: [], done: false, current: -1, speaking: true });
  $("words").textContent = "";
  $("status").textContent = "speaking…";
  $("stop").disabled = false;
  player.last = request({ response_format: "pcm", stream_format: "sse", seed: 0 });
  player.abort = new AbortController();
  player.frame = requestAnimationFrame(highlight);
  try {
    const resp = await api("/v1/audio/speech", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(player.last), signal: player.abort.signal,
    });
    if (!resp.ok) throw new Error((await resp.json()).error.message);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += value;
      let cut;
      while ((cut = pending.indexOf("\n\n")) >= 0) {
        const line = pending.slice(0, cut);
        pending = pending.slice(cut + 2);
        if (!line.startsWith("data: ")) continue;
        const ev = JSON.parse(line.slice(6));
        if (ev.type === "speech.audio.delta") schedule(base64Bytes(ev.audio));
        else if (ev.type === "speech.audio.words") addWords(ev.words);
        else if (ev.type === "error") throw new Error(ev.error.message);
        else if (ev.type === "speech.audio.done") $("status").textContent = `done: ${(player.next - player.start).toFixed(1)} s`;
      }
    }
    $("download").disabled = false;
  } catch (err) {
    // Stop has ended this run already (AbortError); any other error ends it here, audio and all.
    if (err.name !== "AbortError" && run === player.run) {
      silence();
      endSpeaking(`error: ${err.message}`);
    }
  } finally {
    if (run === player.run) player.done = true;   // the highlight loop ends once the rest is heard
  }
}

function stop(status = "stopped") {
  // Stop (the button), or a new Speak (status null: it sets its own).
  if (player.abort) player.abort.abort();
  player.abort = null;
  silence();
  const was = player.speaking;
  endSpeaking();
  if (was && status) $("status").textContent = status;
}

async function download() {
  const fmt = $("format").value;
  $("status").textContent = `encoding ${fmt}…`;
  const resp = await api("/v1/audio/speech", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...player.last, response_format: fmt, stream_format: "audio", stream: false }),
  });
  if (!resp.ok) { $("status").textContent = `error: ${(await resp.json()).error.message}`; return; }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(await resp.blob());
  a.download = `speech.${fmt}`;
  a.click();
  $("status").textContent = `saved speech.${fmt}`;
}

$("speed").addEventListener("input", () => { $("speed-value").textContent = Number($("speed").value).toFixed(2); });
$("speak").addEventListener("click", speak);
$("stop").addEventListener("click", () => stop());
$("download").addEventListener("click", download);
$("key-form").addEventListener("submit", useKey);
$("key-forget").addEventListener("click", forgetKey);
loadVoices();
