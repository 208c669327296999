"""Who may use the HTTP server: the Host allow-list, the API key, the JSON content type (and the
web page's own headers, PAGE_HEADERS).

Any web page the user visits can send requests to a server on their machine. Three checks,
ASGI layers around the routes (CORS, off unless origins are given, is Starlette's
CORSMiddleware between the first and the second):
- Host allow-list (`HostCheck`): a server bound to a loopback address answers only Host
  headers that name loopback (localhost, 127.0.0.1, [::1], any port) plus `--allowed-host`
  names, so a DNS-rebinding page (its own name resolving to 127.0.0.1) gets 421; a Host that is
  not `name[:port]` at all ('localhost:80@evil.example') gets 400 on every server;
- API key (`ApiKeyCheck`): with `--api-key`, every route but /health, /ready and the web page
  itself (/, /static/...) needs `Authorization: Bearer KEY`, as OpenAI clients send it
  (compared in constant time); otherwise 401 with OpenAI's error JSON;
- JSON content type (`JsonOnly`): a POST must say `Content-Type: application/json` (415
  otherwise), so a cross-site "simple" request (text/plain, form data: sent without a CORS
  preflight) cannot start a synthesis.
And transport: with `--tls-cert` / `--tls-key` (check_tls) the server speaks HTTPS only.
"""
from __future__ import annotations

import hmac
import ipaddress
import os
import re
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.middleware.cors import CORSMiddleware

from kcc.speech.serve.middleware import error_response
from kcc.speech.serve.request import ApiError

# The web page's response headers: its script and style come from /static only (no inline code,
# nothing from elsewhere), no page may frame it (clickjacking the key form), it sends no referrer.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Open without a key: the probes, and the web page with its static files (it asks for the key itself).
OPEN_PATHS = ("/health", "/ready", "/")        # exact paths
OPEN_PREFIX = "/static/"


def is_loopback(host: str) -> bool:
    """The bind address is loopback only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# A Host header: a DNS name (letters, digits, '-', '_', '.'), an IPv4 address or a bracketed IPv6
# address, then an optional port. Anything else ('localhost:80@evil.example', 'a/b', 'x:y:z') is
# not a host and is refused, never cut down to a prefix that happens to be allowed.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?\.?))(?::[0-9]{1,5})?")


def host_name(value: str) -> str | None:
    """A Host header (or a configured name) without its port, lower case: '[::1]:8880' -> '::1',
    'LocalHost.:80' -> 'localhost'; a bare IPv6 address as itself; None when it is not a host."""
    value = value.strip().lower()
    m = _HOST.fullmatch(value)
    if m is None:
        try:
            return str(ipaddress.IPv6Address(value))
        except ValueError:
            return None
    if m["v6"] is not None:
        try:
            return str(ipaddress.IPv6Address(m["v6"]))
        except ValueError:
            return None
    return m["name"].rstrip(".")


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


async def _refuse(err: ApiError, scope, receive, send) -> None:
    await error_response(err)(scope, receive, send)


class HostCheck:
    """allowed: the names a loopback server answers; None: any well-formed Host (a public bind)."""

    def __init__(self, app, allowed: frozenset[str] | None):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            host = (_header(scope, b"host") or "").strip() or None      # empty: none given (a URI without authority)
            if host is not None and host_name(host) is None:
                return await _refuse(ApiError(400, f"Host {host[:100]!r} is not a host name with an optional port",
                                              "host"), scope, receive, send)
            if self.allowed is not None and (host is None or host_name(host) not in self.allowed):
                shown = (host or "")[:100]
                return await _refuse(ApiError(421, f"Host {shown!r} is not served here (a loopback server answers "
                                                   "only loopback names; add one with --allowed-host)", "host"),
                                     scope, receive, send)
        await self.app(scope, receive, send)


class ApiKeyCheck:
    def __init__(self, app, key: str):
        self.app, self.expected = app, f"Bearer {key}".encode()

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or path.startswith(OPEN_PREFIX)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") != "OPTIONS" and not self._open(scope.get("path", "")):
            given = (_header(scope, b"authorization") or "").encode("latin-1")
            if not hmac.compare_digest(given, self.expected):
                err = ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY' with this "
                                    "server's --api-key", code="invalid_api_key",
                               headers={"WWW-Authenticate": "Bearer"})
                return await _refuse(err, scope, receive, send)
        await self.app(scope, receive, send)


class JsonOnly:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") == "POST":
            kind = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if kind != "application/json":
                err = ApiError(415, f"Content-Type must be application/json, got {kind[:100] or 'none'!r}",
                               "content-type")
                return await _refuse(err, scope, receive, send)
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Access:
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()          # none: no CORS headers at all
    allowed_hosts: frozenset[str] | None = None  # None: any Host (a server bound to a public address)


class HostNameError(ValueError):
    """An --allowed-host that is not a host name (or address) with an optional port."""


class CorsOriginError(ValueError):
    """A --cors-origin no browser sends as an Origin, or 'null' (which every sandboxed iframe and
    local file sends: allowing it allows any page)."""


def check_cors_origin(origin: str) -> str:
    """`scheme://host[:port]` (as a browser sends Origin: no path, no trailing slash), or '*'."""
    if origin == "*":
        return origin
    if origin.strip().lower() == "null":
        raise CorsOriginError("--cors-origin null would let any sandboxed iframe or local file call this server "
                              "(browsers send 'null' for those); name the page's origin, https://app.example")
    m = re.fullmatch(r"([a-z][a-z0-9+.-]*)://([^/?#@\s]+)", origin)
    if m is None or host_name(m[2]) is None:
        raise CorsOriginError(f"--cors-origin {origin!r} is not an origin: scheme://host[:port] in lower case, "
                              "no path and no trailing slash (https://app.example)")
    return origin


def cors_warning(origins, api_key: str | None) -> str | None:
    """The warning printed when --cors-origin '*' lets every web page call the server."""
    if "*" not in origins:
        return None
    return ("kcc: WARNING: --cors-origin '*': any web page a visitor opens can call this server from their browser"
            + ("" if api_key else " and use it (set --api-key, or name the pages' origins)"))


class ApiKeyError(ValueError):
    """An --api-key no client could send: an HTTP header carries visible ASCII only."""


def check_api_key(key: str) -> str:
    """The key as given when every character is visible ASCII (0x21-0x7e): a browser (the web
    page) and most HTTP clients cannot send anything else in `Authorization`, so a key holding
    a space, a control character or non-ASCII would lock every client out."""
    bad = next((c for c in key if not "!" <= c <= "~"), None)
    if bad is not None:
        raise ApiKeyError(f"--api-key may hold only visible ASCII characters (no spaces), found {bad!r} "
                          f"at character {key.index(bad)}")
    return key


def access_for(bind_host: str, api_key: str | None, cors_origins=(), extra_hosts=()) -> Access:
    """The policy `kcc serve` runs with: the Host allow-list applies to a loopback bind."""
    if api_key:
        check_api_key(api_key)
    cors_origins = tuple(check_cors_origin(o) for o in cors_origins)
    extra = set()
    for h in extra_hosts:
        if (name := host_name(h)) is None:
            raise HostNameError(f"--allowed-host {h!r} is not a host name or address with an optional port")
        extra.add(name)
    hosts = frozenset(LOOPBACK_HOSTS | extra) if is_loopback(bind_host) else None
    if hosts is None and extra:
        hosts = frozenset(extra) | LOOPBACK_HOSTS | {host_name(bind_host) or bind_host}
    return Access(api_key or None, cors_origins, hosts)


def guarded(app, access: Access):
    """`app` inside the checks `access` asks for: Host, then CORS, then the key, then JSON."""
    app = JsonOnly(app)
    if access.api_key:
        app = ApiKeyCheck(app, access.api_key)
    if access.cors_origins:
        app = CORSMiddleware(app, allow_origins=list(access.cors_origins), allow_methods=["GET", "POST"],
                             allow_headers=["Authorization", "Content-Type"], expose_headers=["X-Kcc-Chunks"])
    return HostCheck(app, access.allowed_hosts)


def public_bind_warning(bind_host: str, api_key: str | None, tls: bool = False) -> str | None:
    """The warning printed when a server listens beyond loopback without a key, or with a key
    but without TLS (the key and the text then cross the network readable by anyone on the path)."""
    if is_loopback(bind_host) or (api_key and tls):
        return None
    if api_key:
        return (f"kcc: WARNING: listening on {bind_host}, beyond this machine, without TLS: the API key and every "
                "text travel in clear (set --tls-cert and --tls-key, or put a TLS proxy in front)")
    return (f"kcc: WARNING: listening on {bind_host}, beyond this machine, with no --api-key: anyone who can "
            "reach this port can use the server (set --api-key or KCC_API_KEY, or bind 127.0.0.1)")


def wyoming_bind_warning(uri: str) -> str | None:
    """The Wyoming protocol has no authentication: listening beyond loopback is worth a word."""
    parts = urlsplit(uri)
    if parts.scheme != "tcp" or is_loopback(parts.hostname or ""):
        return None
    return (f"kcc: WARNING: Wyoming listens on {parts.hostname}, beyond this machine; the protocol has no "
            "authentication, so anyone who can reach this port can use the server (bind 127.0.0.1 unless "
            "Home Assistant runs on another host, and then firewall the port)")


class TlsError(ValueError):
    """--tls-cert / --tls-key cannot serve HTTPS; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Tls:
    certfile: str
    keyfile: str

    def uvicorn_options(self) -> dict:
        return {"ssl_certfile": self.certfile, "ssl_keyfile": self.keyfile}


def check_tls(certfile: str | None, keyfile: str | None) -> Tls | None:
    """Both files or neither; loaded here, at start, into an SSL context as the server will, so a
    wrong path, a key that does not match the certificate or a PEM that is not one fails by name
    before the model loads (and not at the first client's handshake). A private key readable by
    other users is refused: anyone on the machine could then impersonate the server."""
    if not certfile and not keyfile:
        return None
    if not certfile or not keyfile:
        raise TlsError("HTTPS needs both --tls-cert and --tls-key")
    for flag, path in (("--tls-cert", certfile), ("--tls-key", keyfile)):
        if not os.path.isfile(path):
            raise TlsError(f"{flag} {path}: no such file")
    mode = os.stat(keyfile).st_mode
    if mode & 0o077:
        raise TlsError(f"--tls-key {keyfile} is readable by other users (mode {mode & 0o777:o}); chmod 600 it")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"--tls-cert {certfile} / --tls-key {keyfile}: not a certificate and its matching private "
                       f"key in PEM ({exc.strerror or exc})") from None
    return Tls(certfile, keyfile)
