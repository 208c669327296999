"""`kcc serve` and `kcc wyoming`: flags, each with a KCC_* environment default.

--workers is the number of syntheses that run at once (threads in one process: the compiled
circuits are shared read-only and release the GIL), not uvicorn worker processes. Each worker
faults in its own generator arena (WORKER_MEMORY_BYTES), so more workers than the available
memory holds are refused at start.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

from kcc.speech.request import add_request_args, language_code
from kcc.speech.serve.limits import HttpLimits, Limits

ENV = "KCC_"
LIMITS, HTTP = Limits(), HttpLimits()          # the defaults, written once (docs/LIMITS.md reads them too)

# --workers: one cap and one memory budget for every door that runs workers (kcc.speech.worker_budget).
from kcc.speech.worker_budget import (MAX_WORKERS, SERVER_BASE_BYTES, WORKER_MEMORY_BYTES,  # noqa: E402,F401
                                     MemoryBudgetError, check_memory)
from kcc.speech.cli.exits import Exit  # noqa: E402


def _env(name: str, default, kind=str):
    value = os.environ.get(ENV + name)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        # read while the parser is built, before kcc.speech.cli.run: exit as the table says for usage
        print(f"kcc: environment {ENV + name}={value!r} is not a valid {kind.__name__}", file=sys.stderr)
        raise SystemExit(Exit.USAGE) from None


def _common(p: argparse.ArgumentParser, port: int) -> None:
    from kcc.speech.cli.args import add_speech_args
    add_speech_args(p)
    p.set_defaults(lang=_env("LANG", "auto"))        # as `kcc say`: from the voice, else the text's script
    p.add_argument("--host", default=_env("HOST", "127.0.0.1"), help="address to listen on ($KCC_HOST)")
    p.add_argument("--port", type=int, default=_env("PORT", port, int), help="($KCC_PORT)")
    add_request_args(p, "voice", defaults={"voice": _env("VOICE", None)})     # a request without one: this ($KCC_VOICE)
    p.add_argument("--voice-alias", default=_env("VOICE_ALIASES", None), metavar="A=V,...",
                   help="OpenAI voice name -> catalog voice, replacing the built-in table ($KCC_VOICE_ALIASES)")
    p.add_argument("--workers", type=int, default=_env("WORKERS", LIMITS.workers, int),
                   help="syntheses at once ($KCC_WORKERS)")
    p.add_argument("--max-queue", type=int, default=_env("MAX_QUEUE", LIMITS.max_queue, int),
                   help="requests waiting for a worker before 503 ($KCC_MAX_QUEUE)")
    p.add_argument("--request-timeout", type=float, default=_env("REQUEST_TIMEOUT", LIMITS.request_timeout_s, float),
                   help="seconds one request may take, queue included ($KCC_REQUEST_TIMEOUT)")
    p.add_argument("--chunk-phonemes", type=int, default=_env("CHUNK_PHONEMES", LIMITS.chunk_phonemes, int),
                   help="longest chunk of a stream synthesised at once; bounds one step past a deadline (a whole "
                        "file is chunked as `kcc say` chunks it) ($KCC_CHUNK_PHONEMES)")
    p.add_argument("--first-chunk-phonemes", type=int,
                   default=_env("FIRST_CHUNK_PHONEMES", LIMITS.first_chunk_phonemes, int),
                   help="a stream's first chunk's most phonemes: it ends early, at a sentence, clause or comma "
                        "of the text, so the first audio comes early ($KCC_FIRST_CHUNK_PHONEMES)")
    p.add_argument("--first-lead-ms", type=int, default=_env("FIRST_LEAD_MS", -1, int),
                   help="the most silence before a stream's first phoneme (the model puts ~300 ms there); "
                        "-1 (default): the model's. Shorter comes sooner but costs the first word's onset "
                        "(Whisper WER 3.8%% -> 16.2%% at 100 ms) ($KCC_FIRST_LEAD_MS)")
    p.add_argument("--languages", default=_env("LANGUAGES", None), metavar="L,...",
                   help="languages whose G2P is loaded and warmed before the server says ready (besides "
                        "--lang); default: every language of the offered voices ($KCC_LANGUAGES)")
    p.add_argument("--max-open", type=int, default=_env("MAX_OPEN", 0, int),
                   help="open connections, idle ones included (past it the oldest idle one is closed); 0 (default): "
                        "sized below the process's file limit, at most 2048 ($KCC_MAX_OPEN)")


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("serve", help="OpenAI-compatible speech server (HTTP) with a web page at /")
    _common(p, 8880)
    add_request_args(p, "max_chars", defaults={"max_chars": _env("MAX_CHARS", HTTP.max_input_chars, int)})
    p.add_argument("--max-body", type=int, default=_env("MAX_BODY", HTTP.max_body_bytes, int), help="bytes ($KCC_MAX_BODY)")
    p.add_argument("--max-connections", type=int, default=_env("MAX_CONNECTIONS", HTTP.max_connections, int),
                   help="requests in flight before 503 ($KCC_MAX_CONNECTIONS)")
    p.add_argument("--shutdown-timeout", type=float, default=_env("SHUTDOWN_TIMEOUT", 30.0, float),
                   help="seconds SIGTERM waits for requests in flight ($KCC_SHUTDOWN_TIMEOUT)")
    p.add_argument("--api-key", default=_env("API_KEY", None), metavar="KEY",
                   help="require 'Authorization: Bearer KEY' on every route but /health, /ready and the web page "
                        "($KCC_API_KEY; prefer the environment: a flag shows in the process list)")
    p.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                   help="let web pages of ORIGIN (https://app.example) call this server from a browser; "
                        "repeatable; none by default ($KCC_CORS_ORIGINS, comma-separated)")
    p.add_argument("--allowed-host", action="append", default=None, metavar="NAME",
                   help="a Host name to answer besides localhost / 127.0.0.1 / [::1] (a loopback server refuses "
                        "others: DNS rebinding); repeatable ($KCC_ALLOWED_HOSTS, comma-separated)")
    p.add_argument("--tls-cert", default=_env("TLS_CERT", None), metavar="PEM",
                   help="serve HTTPS with this certificate (chain) file; with --tls-key ($KCC_TLS_CERT)")
    p.add_argument("--tls-key", default=_env("TLS_KEY", None), metavar="PEM",
                   help="the certificate's private key, readable by its owner only ($KCC_TLS_KEY)")
    p.set_defaults(fn=run_serve)
    p = subparsers.add_parser("wyoming", help="Wyoming protocol TTS server (Home Assistant)")
    _common(p, 10200)
    p.add_argument("--uri", default=_env("WYOMING_URI", None), help="tcp://HOST:PORT (default from --host/--port)")
    p.set_defaults(fn=run_wyoming)


def threads_per_synthesis(workers: int) -> int:
    """Kernel threads for each of `workers` concurrent syntheses: the cores shared out, so busy
    workers do not oversubscribe them. OpenMP barriers stall on an oversubscribed CPU: on the
    2-core dev machine at a load of 8, one 20-phoneme chunk took 1.8-1.9 s at 1 thread and
    4.1-8.1 s at 2 (interleaved runs). One worker gets every core."""
    from kcc.model.loader import available_cores
    return max(1, available_cores() // max(1, workers))


def check_settings(args) -> None:
    """Refuse settings the server cannot honour, naming the flag (a ValueError: kcc exits 2)."""
    from kcc.speech.text import MAX_PHONEMES
    checks = [("--workers", args.workers, 1, MAX_WORKERS), ("--max-queue", args.max_queue, 0, 10_000),
              ("--request-timeout", args.request_timeout, 0.1, 86_400),
              ("--chunk-phonemes", args.chunk_phonemes, 10, MAX_PHONEMES),
              ("--first-chunk-phonemes", args.first_chunk_phonemes, 1, args.chunk_phonemes),
              ("--first-lead-ms", args.first_lead_ms, -1, 10_000), ("--max-open", args.max_open, 0, 1_000_000),
              ("--port", args.port, 0, 65_535)]
    checks += [(flag, getattr(args, attr), lo, hi) for flag, attr, lo, hi in (
        ("--max-chars", "max_chars", 1, 1_000_000), ("--max-body", "max_body", 64, 1 << 30),
        ("--max-connections", "max_connections", 1, 100_000), ("--shutdown-timeout", "shutdown_timeout", 0, 3600))
        if hasattr(args, attr)]
    for flag, value, lo, hi in checks:
        if not lo <= value <= hi:
            raise ValueError(f"{flag} {value} is outside [{lo}, {hi}]")
    check_memory(args.workers)


def lead_frames(ms: int) -> int | None:
    """--first-lead-ms as whole frames (25 ms each, at least 1: the boundary token keeps one); -1: None."""
    from kcc.model.kokoro import SAMPLE_RATE, SAMPLES_PER_FRAME
    return None if ms < 0 else max(1, -(-ms * SAMPLE_RATE // (1000 * SAMPLES_PER_FRAME)))


def build_service(args):
    """Synthesizer, G2P per language, voices: everything both servers share."""
    from kcc.model.loader import available_cores
    from kcc.speech import voices as voices_mod
    from kcc.speech.cli.args import checkpoint_of
    from kcc.speech.engine import load_synthesizer
    from kcc.speech.g2p.g2p import G2PFactory
    from kcc.speech.serve.service import Limits, SpeechService
    from kcc.speech.serve.voice_set import VoiceSet, parse_aliases
    from kcc.speech.serve.warmup import Warmup, advertised_languages
    check_settings(args)
    args.lang = language_code(args.lang)  # every spelling the README lists; RequestError names the others
    dirs = [Path(d) for d in args.voices_dir] or [Path(d) for d in filter(None, [_env("VOICES_DIR", None)])]
    catalog = voices_mod.voice_catalog(dirs)
    aliases = parse_aliases(args.voice_alias) if args.voice_alias else None
    voices = VoiceSet(catalog, aliases, args.voice or None, loader=lambda spec: voices_mod.load_pack(spec, dirs),
                      language=args.lang)
    g2ps, lock, make_g2p = {}, threading.Lock(), G2PFactory(args.g2p, args.lexicon)

    def g2p_for(lang: str):
        with lock:
            if lang not in g2ps:
                g2ps[lang] = make_g2p(lang)
            return g2ps[lang]

    g2p_for(args.lang)                    # the default language fails at start, not per request
    synth = load_synthesizer(checkpoint_of(args), args.max_frames,
                             native=args.native, threads=args.threads or threads_per_synthesis(args.workers),
                             precision=args.precision)
    limits = Limits(workers=args.workers, max_queue=args.max_queue, request_timeout_s=args.request_timeout,
                    chunk_phonemes=args.chunk_phonemes, first_chunk_phonemes=args.first_chunk_phonemes,
                    first_lead_frames=lead_frames(args.first_lead_ms),
                    cores=0 if args.threads else available_cores())
    service = SpeechService(synth, g2p_for, voices, limits, default_language=args.lang)
    voice_languages = [v["language"] for v in voices.listing()]
    named = named_languages(args.languages)
    service.warmup = Warmup(service, advertised_languages(args.lang, voice_languages, named),
                            required=[args.lang, *(named or [])])
    return service


def named_languages(text: str | None) -> list[str] | None:
    """--languages 'en-us,ja' -> the languages (kcc.speech.languages codes); a name kcc does not
    know is a ValueError naming it and the known ones."""
    from kcc.speech.languages import LANGUAGES
    if not text:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LANGUAGES]
    if unknown:
        raise ValueError(f"--languages {','.join(unknown)}: not a language kcc speaks (one of {', '.join(LANGUAGES)})")
    return names


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")


def _listed(flag_values, env_name: str) -> list[str]:
    """A repeatable flag, or its comma-separated KCC_* variable when the flag is not given."""
    if flag_values:
        return list(flag_values)
    return [v.strip() for v in (_env(env_name, "") or "").split(",") if v.strip()]


def access_from_args(args):
    """The HTTP server's access policy from --api-key / --cors-origin / --allowed-host and their
    KCC_* variables (kcc.speech.serve.security)."""
    from kcc.speech.serve.security import access_for
    return access_for(args.host, args.api_key, _listed(args.cors_origin, "CORS_ORIGINS"),
                      _listed(args.allowed_host, "ALLOWED_HOSTS"))


def listener_limits(args):
    """The Listener's limits for either server: the file limit raised first, so the cap is sized from it."""
    from kcc.speech.serve.listener import ListenerLimits, open_limit, raise_fd_limit
    fd_limit = raise_fd_limit()
    return ListenerLimits(max_open=args.max_open or open_limit(fd_limit))


def run_serve(args) -> int:
    from kcc.speech.serve.app import HttpLimits, create_app
    from kcc.speech.serve.connection import http_server
    from kcc.speech.serve.security import check_tls, cors_warning, public_bind_warning
    _setup_logging()
    access = access_from_args(args)
    tls = check_tls(args.tls_cert, args.tls_key)
    service = build_service(args)
    service.warmup.start()              # listening meanwhile: /ready says 'warming' until it ends
    app = create_app(service, HttpLimits(max_body_bytes=args.max_body, max_input_chars=args.max_chars,
                                         max_connections=args.max_connections), access)
    listener = listener_limits(args)
    print(f"kcc serve: {'https' if tls else 'http'}://{args.host}:{args.port}/ (POST /v1/audio/speech; "
          f"{listener.max_open} connections at most)", file=sys.stderr)
    for warning in (public_bind_warning(args.host, args.api_key, tls is not None),
                    cors_warning(access.cors_origins, access.api_key)):
        if warning:
            print(warning, file=sys.stderr)
    # Requests in flight are capped by the app (JSON 503); connections are accepted, timed and
    # capped by kcc (kcc.speech.serve.listener, .connection), not by uvicorn's limit_concurrency,
    # which counts idle connections as requests.
    http_server(app, listener=listener, host=args.host, port=args.port, access_log=False, log_level="info",
                timeout_graceful_shutdown=args.shutdown_timeout, **(tls.uvicorn_options() if tls else {})).run()
    return 0


def run_wyoming(args) -> int:
    import asyncio

    from kcc.speech.serve.security import wyoming_bind_warning
    from kcc.speech.serve.wyoming_server import serve
    _setup_logging()
    service = build_service(args)
    uri = args.uri or f"tcp://{args.host}:{args.port}"
    listener = listener_limits(args)
    # Home Assistant asks for info as it connects and then sends text at once: listen only once
    # warm, so its first request is as fast as any later one (it retries a refused connection)
    print(f"kcc wyoming: warming up before listening on {uri}", file=sys.stderr)
    service.warmup.run()
    if service.warmup.error is not None:
        service.close()
        raise service.warmup.error
    print(f"kcc wyoming: {uri} ({listener.max_open} connections at most)", file=sys.stderr)
    if (warning := wyoming_bind_warning(uri)):
        print(warning, file=sys.stderr)
    try:
        asyncio.run(serve(service, uri, listener=listener))
    except KeyboardInterrupt:
        pass
    except OSError as exc:               # the address is taken or not ours (serve binds before anything else)
        print(f"kcc wyoming: cannot listen on {uri}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.CANNOT_LISTEN
    finally:
        service.close()
    return 0
