# shellcheck shell=bash
# Shared by the offline image builds (gateway/build.sh, deploy/build-image.sh): Docker Hub is
# not reachable, so images start FROM scratch with a root filesystem staged here — the Node
# binary, the glibc libraries it and the native code in node_modules need, a static busybox,
# passwd/group, CA certificates. Source it after setting LOG_NAME (the prefix of messages).

log() { echo "${LOG_NAME:-build}: $*" >&2; }
die() {
  echo "${LOG_NAME:-build}: error: $*" >&2
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# docker build with the classic builder (no buildx on these hosts); its output goes to a log,
# shown when the build fails.
export DOCKER_BUILDKIT=0
docker_build() {
  local log_file="$1"
  shift
  if ! docker build --force-rm "$@" >"$log_file" 2>&1; then
    tail -n 60 "$log_file" >&2
    die "docker build failed (full log: $log_file)"
  fi
}

# A one-layer image from staged folders, owned by root, streamed to the engine with `docker
# import`: one pass over the files, where `docker build` with COPY sends a context, copies it
# and then hashes the copy (~24 against ~66 CPU-seconds for the gateway's ~850 MB; decision
# 0188). Usage: import_root TAG LOG_FILE TAR_ARGS... (folders with -C, --exclude, --transform).
import_root() {
  local tag="$1" log_file="$2"
  shift 2
  if ! { tar -c --owner=0 --group=0 --numeric-owner "$@" |
    docker import --change "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin" \
      - "$tag"; } >"$log_file" 2>&1; then
    tail -n 60 "$log_file" >&2
    die "docker import of $tag failed (full log: $log_file)"
  fi
}

require_build_tools() {
  command -v node >/dev/null 2>&1 || die "node is not on PATH (Node >= 24 is required)"
  command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 24 ] ||
    die "node $(node --version) at $(command -v node) is too old: Node >= 24 is required. Put a Node 24 bin folder first on PATH."
  command -v docker >/dev/null 2>&1 || die "docker CLI is not on PATH"
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
    die "the Docker engine is not reachable (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"
  local tool
  for tool in ldd sha256sum awk cmp find od flock "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"
  done
}

# A static busybox (the image has no libc-linked shell of its own): $BUSYBOX or from PATH.
find_static_busybox() {
  BUSYBOX="${BUSYBOX:-$(command -v busybox || true)}"
  [ -n "$BUSYBOX" ] && [ -x "$BUSYBOX" ] || die "no busybox found: apt-get install busybox-static (or set BUSYBOX=/path/to/static/busybox)"
  if ldd "$BUSYBOX" >/dev/null 2>&1; then
    die "$BUSYBOX is dynamically linked: install busybox-static (apt-get install busybox-static) or set BUSYBOX"
  fi
}

# LIBS: the host libraries (absolute paths) the staged executables need.
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

# Every glibc x86-64 ELF under a node_modules folder: native addons (*.node, *.so) and, with
# extra `-name` patterns (say `-path '*/native/bin/*'`), executables such as PostgreSQL's.
# Skipped: musl builds, the desktop-automation SDK of @trycua/cua-driver (needs X11, never
# loaded headless), and PostgreSQL's Perl, Python and Tcl languages (no interpreter here).
add_native_code() {
  local modules="$1" file
  shift
  while IFS= read -r -d '' file; do
    case "$file" in
      */musl*/* | */libcua_driver_sdk.so) continue ;;
      */postgresql/*plperl*.so | */postgresql/*plpython*.so | */postgresql/*pltcl*.so) continue ;;
    esac
    # Only ELF objects; skip other platforms and WebAssembly named *.so.
    [ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    # Not `ldd | grep -q`: grep's early exit fails the pipeline (pipefail, SIGPIPE) at random.
    case "$(ldd "$file" 2>/dev/null || true)" in
      *libc.so.6*) ;;
      *) continue ;;
    esac
    add_ldd "$file"
  done < <(find "$modules" -type f \( -name '*.node' -o -name '*.so' "$@" \) -print0)
}

# Copies LIBS into the staged root $1, except those under $2 (shipped inside node_modules).
stage_libs() {
  local sys="$1" shipped="$2" lib dest
  for lib in "${!LIBS[@]}"; do
    case "$lib" in
      "$shipped"/*) continue ;;
      /lib64/* | /lib/x86_64-linux-gnu/* | /usr/lib/x86_64-linux-gnu/*) ;;
      *) die "unexpected library location $lib" ;;
    esac
    dest="$sys${lib#/usr}" # merged /usr on Debian 12: keep the /lib/... path ldd printed
    mkdir -p "$(dirname "$dest")"
    cp -L "$lib" "$dest"
  done
}

# The skeleton of a root: folders, busybox and its applets, passwd/group with one user,
# nsswitch, CA certificates. Args: root, user name, uid (= gid), home.
stage_root() {
  local sys="$1" user="$2" id="$3" home="$4" applet
  mkdir -p "$sys"/{bin,sbin,etc,lib64,lib/x86_64-linux-gnu,usr/bin,usr/sbin,usr/local/bin,opt,var,etc/ssl/certs}
  install -d -m 1777 "$sys/tmp" "$sys/var/tmp"
  install -d -m 0755 "$sys/home" "$sys/root"
  cp "$BUSYBOX" "$sys/bin/busybox"
  while read -r applet; do
    [ -n "$applet" ] || continue
    [ -e "$sys/$applet" ] || [ -L "$sys/$applet" ] || ln -s /bin/busybox "$sys/$applet"
  done < <("$BUSYBOX" --list-full)
  cat >"$sys/etc/passwd" <<EOF
root:x:0:0:root:/root:/bin/sh
$user:x:$id:$id:$user:$home:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
  cat >"$sys/etc/group" <<EOF
root:x:0:
$user:x:$id:
nogroup:x:65534:
EOF
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$sys/etc/nsswitch.conf"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$sys/etc/ssl/certs/ca-certificates.crt"
  else
    log "warning: /etc/ssl/certs/ca-certificates.crt not found; the image will rely on Node's bundled CAs"
  fi
}

# A short hash of a staged tree: names, modes, owners, link targets and file contents.
tree_hash() {
  local dir="$1"
  shift
  (cd "$dir" && find "$@" -printf '%p %m %U %l\n' | LC_ALL=C sort)
  (cd "$dir" && find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
