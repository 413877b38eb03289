#!/bin/sh
# Runs once at image build time (RUN, as uid 1000, offline): starts the gateway on loopback with
# a throw-away state folder, waits for /healthz, stops it, and keeps only Node's compile cache.
#
# openclaw.mjs enables Node's module compile cache in $TMPDIR/node-compile-cache/openclaw/
# <version>/<package.json mtime-size>/ (TMPDIR unset: /tmp). Baking it into the image saves
# a fresh container the V8 compilation of the gateway's modules on its first start. The cache
# is keyed by Node version, V8 flags and uid (1000), and entries are checked against their
# source, so a mismatch only means a cold start. A tmpfs on /tmp hides it (cold start again).
# Fails the build when the gateway cannot start: that image would be broken anyway.
set -eu

OPENCLAW_ENTRY=/opt/openclaw/node_modules/openclaw/openclaw.mjs
WARM_HOME=/tmp/agent-gateway-warm
PORT=18789
TIMEOUT_S=300

export HOME="$WARM_HOME"
export OPENCLAW_STATE_DIR="$WARM_HOME/.openclaw"
export OPENCLAW_CONFIG_PATH="$OPENCLAW_STATE_DIR/openclaw.json"
export OPENCLAW_WORKSPACE_DIR="$OPENCLAW_STATE_DIR/workspace"
export XDG_CACHE_HOME="$OPENCLAW_STATE_DIR/cache"
OPENCLAW_GATEWAY_TOKEN="warm-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export OPENCLAW_GATEWAY_TOKEN

mkdir -p "$OPENCLAW_STATE_DIR"
# The channel plugins are loaded too (Discord with a dummy token, WhatsApp unlinked; neither
# reaches its service), so their modules are in the cache: enabling a channel later hot-loads
# ~130 MB of plugin code, which takes tens of seconds uncompiled on one CPU. The Control UI is
# served from the image's copy, as the platform configures it (the control-ui-root label).
/usr/local/lib/agent-gateway/plugin-root.sh "$OPENCLAW_STATE_DIR"
cat >"$OPENCLAW_CONFIG_PATH" <<'JSON'
{
  "gateway": {
    "mode": "local", "bind": "loopback", "port": 18789, "auth": { "mode": "token" },
    "controlUi": { "root": "/opt/openclaw/node_modules/openclaw/dist/control-ui" }
  },
  "agents": { "defaults": { "skipBootstrap": true } },
  "plugins": { "entries": { "discord": { "enabled": true }, "whatsapp": { "enabled": true } } },
  "channels": {
    "discord": { "enabled": true, "token": "warm.up.not-a-real-discord-token" },
    "whatsapp": { "enabled": true }
  }
}
JSON

start=$(date +%s)
node "$OPENCLAW_ENTRY" gateway run --bind loopback --port "$PORT" >"$WARM_HOME/gateway.log" 2>&1 &
pid=$!

fail() {
  echo "warm-compile-cache: $*" >&2
  tail -n 40 "$WARM_HOME/gateway.log" >&2 || true
  kill -TERM "$pid" 2>/dev/null || true
  exit 1
}

# busybox wget: no -T (it segfaults in Debian's busybox-static 1.35).
until wget -q -O /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || fail "the gateway exited before answering /healthz"
  [ $(($(date +%s) - start)) -lt "$TIMEOUT_S" ] || fail "no /healthz after ${TIMEOUT_S}s"
  sleep 0.2
done
ready=$(($(date +%s) - start))
# Channels start after /healthz; "[gateway] ready" follows once they did (their runtime modules
# loaded). Best effort: the cache is still useful without it.
until grep -qE 'gateway\][^ ]* +[^ ]*ready[^ ]*$' "$WARM_HOME/gateway.log" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || fail "the gateway exited before it was ready"
  [ $(($(date +%s) - start)) -lt "$TIMEOUT_S" ] || break
  sleep 0.5
done
channels_ready=$(($(date +%s) - start))

# SIGTERM: graceful shutdown; Node writes the compile cache when the process exits.
kill -TERM "$pid"
wait "$pid" || true

# Keep only the compile cache: no state, logs, locks or staging folders in the image.
for entry in /tmp/* /tmp/.[!.]*; do
  [ -e "$entry" ] || continue
  [ "$entry" = /tmp/node-compile-cache ] || rm -rf "$entry"
done
[ -d /tmp/node-compile-cache/openclaw ] || fail "no compile cache was written"
echo "warm-compile-cache: gateway answered /healthz after ${ready}s, channels after ${channels_ready}s;" \
  "compile cache $(du -sh /tmp/node-compile-cache | cut -f1)"
