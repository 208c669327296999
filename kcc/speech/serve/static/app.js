// The kcc web page: streams speech over POST /v1/audio/speech (stream_format "sse", pcm), plays
// each delta as it arrives through Web Audio, and highlights the word being spoken from the
// speech.audio.words events. The download asks for the same speech (same seed: same audio) as a
// whole file in the chosen format.
"use strict";
const RATE = 24000;
const $ = (id) => document.getElementById(id);
const player = { ctx: null, start: 0, next: 0, words: [], spans: [], abort: null, done: false, last: null };
window.kcc = player;   // for tests and the curious: player.played() is seconds heard so far

player.played = () => (player.ctx && player.start ? Math.max(0, player.ctx.currentTime - player.start) : 0);

function request(extra) {
  return {
    model: "kokoro", input: $("text").value, voice: $("voice").value, speed: Number($("speed").value),
    ...($("lang").value ? { lang_code: $("lang").value } : {}), ...extra,
  };
}

async function loadVoices() {
  // One group per language (the server lists each voice's language and its name); the first
  // choice sends no voice, so the server speaks each text in its language's own voice.
  const doc = await (await fetch("/v1/audio/voices")).json();
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
  const t = player.played();
  let current = -1;
  for (let i = 0; i < player.words.length; i++) {
    if (player.words[i].start_s <= t && t < player.words[i].end_s) { current = i; break; }
  }
  player.spans.forEach((s, i) => s.classList.toggle("current", i === current));
  player.current = current;
  if (!player.done || t < player.next - player.start) requestAnimationFrame(highlight);
  else { player.spans.forEach((s) => s.classList.remove("current")); $("stop").disabled = true; }
}

function base64Bytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function speak() {
  stop();
  player.ctx = player.ctx || new AudioContext({ sampleRate: RATE });
  await player.ctx.resume();
  Object.assign(player, { start: 0, next: 0, words: [], spans: [], done: false, current: -1 });
  $("words").textContent = "";
  $("status").textContent = "speaking…";
  $("stop").disabled = false;
  player.last = request({ response_format: "pcm", stream_format: "sse", seed: 0 });
  player.abort = new AbortController();
  requestAnimationFrame(highlight);
  try {
    const resp = await fetch("/v1/audio/speech", {
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
    if (err.name !== "AbortError") $("status").textContent = `error: ${err.message}`;
  } finally {
    player.done = true;
  }
}

function stop() {
  if (player.abort) player.abort.abort();
  if (player.ctx && player.start) { player.ctx.close(); player.ctx = null; }
  player.done = true;
}

async function download() {
  const fmt = $("format").value;
  $("status").textContent = `encoding ${fmt}…`;
  const resp = await fetch("/v1/audio/speech", {
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
$("stop").addEventListener("click", stop);
$("download").addEventListener("click", download);
loadVoices();
