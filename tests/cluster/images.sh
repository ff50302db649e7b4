#!/usr/bin/env bash
# Build Fluence's image, and the images a local cluster needs, with no registry.
#
#   tests/cluster/images.sh [all|bases|fluence|pause|braket|archives] ...   (all: every image)
#   tests/cluster/images.sh check-flux     only check the Flux install (below), build nothing
#
# What it makes (podman's local store, and docker-archives under $FLUENCE_CLUSTER_DIR/images
# that tests/cluster/local-cluster.sh loads into each node's containerd):
#   localhost/fluence-local/debian:bookworm     Debian bookworm (python3 3.11, pip, venv) from
#                                               mmdebstrap + podman import: the Python base of
#                                               the Containerfile and the workload image
#   localhost/fluence-local/flux-sched:bookworm that base with a flux-sched built outside the
#                                               repository ($FLUX_PREFIX, default /opt/flux) and
#                                               the Debian libraries it links against
#   localhost/fluence-local/pause:1             the pod sandbox image (pause.c, static)
#   ghcr.io/flux-framework/fluence:0.1.0        the Containerfile, built from the two bases,
#                                               also tagged localhost/fluence-local/fluence:0.1.0
#                                               (the name tests/cluster/overlay deploys)
#   ghcr.io/flux-framework/fluence-example-braket-qaoa:0.1.0   (braket) the QAOA example
#
# Needs: podman, buildah, mmdebstrap, gcc (static glibc), and flux-core with flux-sched
# installed under $FLUX_PREFIX, checked before the flux-sched base is built:
#   - flux-core built with that very prefix (./configure --prefix=$FLUX_PREFIX): its prefix
#     is compiled into libflux-core.so, which looks for its modules and connectors there;
#   - of flux-sched, at least lib/flux/libreapi_cli.so and the libfluxion-data.so it links
#     against (`fluence plugins --check` fails the build without Fluxion);
#   - a symlinked $FLUX_PREFIX is read through the link.
# The sandbox this was written in lacks CAP_SYS_RESOURCE, so podman runs with a
# containers.conf that sets no ulimits (CONTAINERS_CONF, unless already set).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${FLUENCE_CLUSTER_DIR:-/var/tmp/fluence-cluster}
FLUX_PREFIX=${FLUX_PREFIX:-/opt/flux}
FLUX_SOURCE=$(readlink -f "$FLUX_PREFIX" || echo "$FLUX_PREFIX")  # where the files really are
FLUX_IMAGE_PREFIX=$FLUX_PREFIX  # where the image holds them: flux-core's own prefix (check_flux)
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -1)

DEBIAN_IMAGE=localhost/fluence-local/debian:bookworm
FLUX_IMAGE=localhost/fluence-local/flux-sched:bookworm
PAUSE_IMAGE=localhost/fluence-local/pause:1
FLUENCE_IMAGE=ghcr.io/flux-framework/fluence:$VERSION
LOCAL_FLUENCE_IMAGE=localhost/fluence-local/fluence:$VERSION   # tests/cluster/overlay's name
BRAKET_IMAGE=ghcr.io/flux-framework/fluence-example-braket-qaoa:$VERSION

say() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }

podman_conf() {
    if [[ -z "${CONTAINERS_CONF:-}" ]]; then
        mkdir -p "$STATE"
        printf '[containers]\ndefault_ulimits = []\n' > "$STATE/containers.conf"
        export CONTAINERS_CONF=$STATE/containers.conf
    fi
}

have_image() { podman image exists "$1"; }

# Debian bookworm's python3 is 3.11, the version Fluence needs. The host's own
# extra CAs (a TLS-inspecting proxy's, say) go in too, so pip inside the build
# reaches PyPI as the host does; a machine without any adds nothing.
debian_base() {
    if have_image "$DEBIAN_IMAGE" && [[ -z "${REBUILD:-}" ]]; then
        say "$DEBIAN_IMAGE present"; return
    fi
    command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap)"
    local tar=$STATE/images/debian-bookworm.tar
    mkdir -p "$STATE/images"
    local hooks=()
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        hooks+=(--customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"'
                --customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/"'
                --customize-hook='chroot "$1" update-ca-certificates')
    fi
    say "mmdebstrap bookworm -> $tar"
    mmdebstrap --variant=minbase --format=tar \
        --include=python3,python3-pip,python3-venv,ca-certificates \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "${hooks[@]}" bookworm "$tar"
    podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$tar" "$DEBIAN_IMAGE" >/dev/null
    rm -f "$tar"
    say "$DEBIAN_IMAGE: $(podman run --rm "$DEBIAN_IMAGE" python3 --version)"
}

# Whether the install under $FLUX_PREFIX can make a working image; dies saying what to do.
check_flux() {
    local core lib
    [[ -d $FLUX_SOURCE ]] || die "FLUX_PREFIX=$FLUX_PREFIX does not exist: build flux-core, then \
flux-sched against it, both with that prefix (flux-core: ./configure --prefix=$FLUX_PREFIX; \
flux-sched: cmake -DCMAKE_INSTALL_PREFIX=$FLUX_PREFIX), or point FLUX_PREFIX at the install"
    [[ $FLUX_SOURCE == "$FLUX_PREFIX" ]] \
        || say "FLUX_PREFIX=$FLUX_PREFIX is a link to $FLUX_SOURCE: the install is read there"
    compgen -G "$FLUX_SOURCE/lib/libflux-core.so*" >/dev/null || die "no flux-core under \
FLUX_PREFIX=$FLUX_PREFIX (lib/libflux-core.so): flux-sched runs on the flux-core it was built \
against, installed with the same prefix; build flux-core with ./configure \
--prefix=$FLUX_PREFIX && make install, then flux-sched against it"
    core=$(sed -n 's/^prefix=//p' "$FLUX_SOURCE/lib/pkgconfig/flux-core.pc" 2>/dev/null | head -1)
    [[ -n $core ]] || die "no lib/pkgconfig/flux-core.pc under FLUX_PREFIX=$FLUX_PREFIX, which \
records the prefix flux-core was built with: install flux-core there with make install"
    if [[ $core != "$FLUX_PREFIX" && $core != "$FLUX_SOURCE" ]]; then
        die "flux-core under FLUX_PREFIX=$FLUX_PREFIX was built with --prefix=$core, which \
libflux-core.so looks in for its modules and connectors: the image's Flux would not start. \
Rebuild flux-core and flux-sched with --prefix=$FLUX_PREFIX, or set FLUX_PREFIX=$core"
    fi
    FLUX_IMAGE_PREFIX=$core
    for lib in lib/flux/libreapi_cli.so "lib*/libfluxion-data.so*"; do
        compgen -G "$FLUX_SOURCE/$lib" >/dev/null || die "no $lib under \
FLUX_PREFIX=$FLUX_PREFIX: the least flux-sched install Fluence needs is lib/flux/libreapi_cli.so \
and the libfluxion-data.so it links against (make install of flux-sched, built against the \
flux-core there)"
    done
    [[ $core == /opt/flux ]] || say "flux-core's prefix is $core, not /opt/flux: \
tests/cluster/overlay's FLUENCE_FLUX_VIEW_PATH must name $core for Flux in a Job"
}

# The Debian packages that hold every library the flux-sched install links against.
flux_runtime_packages() {
    find "$FLUX_SOURCE" -type f \( -name '*.so*' -o -perm -u+x \) -print0 \
        | xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' \
        | grep -v -e "^$FLUX_SOURCE/" -e "^$FLUX_IMAGE_PREFIX/" | sort -u \
        | while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null \
              || dpkg -S "$lib" 2>/dev/null || true; done \
        | cut -d: -f1 | sort -u | grep -v -e '^libc6$' -e '^libgcc' -e '^libstdc' || true
}

flux_base() {
    if have_image "$FLUX_IMAGE" && [[ -z "${REBUILD:-}" ]]; then
        say "$FLUX_IMAGE present"; return
    fi
    check_flux
    local packages
    # and the Python modules flux-core's bindings import (ldd cannot see those)
    packages="$(flux_runtime_packages | tr '\n' ' ') python3-cffi python3-yaml python3-jsonschema"
    say "flux-core and flux-sched from $FLUX_SOURCE to $FLUX_IMAGE_PREFIX; Debian packages they link against: $packages"
    local box
    box=$(buildah from "$DEBIAN_IMAGE")
    # shellcheck disable=SC2086
    buildah run "$box" -- sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends $packages && rm -rf /var/lib/apt/lists/*"
    buildah copy "$box" "$FLUX_SOURCE/" "$FLUX_IMAGE_PREFIX" >/dev/null
    # Where flux-sched's own image has it (the Containerfile's FLUENCE_FLUXION_LIB).
    buildah run "$box" -- sh -c "mkdir -p /usr/lib/flux \
        && ln -sf $FLUX_IMAGE_PREFIX/lib/flux/libreapi_cli.so /usr/lib/flux/libreapi_cli.so \
        && echo $FLUX_IMAGE_PREFIX/lib > /etc/ld.so.conf.d/flux.conf && ldconfig"
    buildah config --env "PATH=$FLUX_IMAGE_PREFIX/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$box"
    buildah commit --rm "$box" "$FLUX_IMAGE" >/dev/null
    say "$FLUX_IMAGE built"
}

pause_image() {
    if have_image "$PAUSE_IMAGE" && [[ -z "${REBUILD:-}" ]]; then
        say "$PAUSE_IMAGE present"; return
    fi
    local dir
    dir=$(mktemp -d)
    gcc -static -Os -o "$dir/pause" "$HERE/pause.c"
    local box
    box=$(buildah from scratch)
    buildah copy "$box" "$dir/pause" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --cmd '[]' "$box"
    buildah commit --rm "$box" "$PAUSE_IMAGE" >/dev/null
    rm -rf "$dir"
    say "$PAUSE_IMAGE built"
}

# The digest of the sources (sources.py) is a label of the image and, once archived, a file
# beside its archive: the cluster tier skips, saying so, when the tree's differs.
SOURCES_LABEL=org.fluence.local.sources

fluence_image() {
    say "podman build $FLUENCE_IMAGE from $REPO/Containerfile"
    local sources
    sources=$(python3 "$HERE/sources.py")
    # --no-cache: podman 4.3's layer cache reuses the `pip install` step although the wheels
    # it bind-mounts from the first stage changed (a rebuild after code changes gave the very
    # same image id), so a cached build can hold old code.
    podman build --no-cache -t "$FLUENCE_IMAGE" -t "$LOCAL_FLUENCE_IMAGE" -f "$REPO/Containerfile" \
        --build-arg "PYTHON_IMAGE=$DEBIAN_IMAGE" --build-arg "FLUX_SCHED_IMAGE=$FLUX_IMAGE" \
        --label "$SOURCES_LABEL=$sources" "$REPO"
}

braket_image() {
    say "podman build $BRAKET_IMAGE from examples/braket-qaoa"
    podman build --layers -t "$BRAKET_IMAGE" --build-arg "PYTHON_IMAGE=$DEBIAN_IMAGE" \
        "$REPO/examples/braket-qaoa"
}

# docker-archives for `ctr -n k8s.io images import` (one file per image).
archives() {
    mkdir -p "$STATE/images"
    local image file
    for image in "$PAUSE_IMAGE" "$DEBIAN_IMAGE" "$LOCAL_FLUENCE_IMAGE" "$BRAKET_IMAGE"; do
        have_image "$image" || { say "skip archive of $image (not built)"; continue; }
        file=$STATE/images/$(echo "$image" | tr '/:' '__').tar
        rm -f "$file"
        podman save --format docker-archive -o "$file" "$image"
        if [[ $image == "$LOCAL_FLUENCE_IMAGE" ]]; then
            podman image inspect --format "{{ index .Labels \"$SOURCES_LABEL\" }}" "$image" \
                > "$file.sources"
        fi
        say "saved $file"
    done
}

main() {
    [[ $# -gt 0 ]] || set -- all
    if [[ "$*" == check-flux ]]; then
        check_flux
        say "FLUX_PREFIX=$FLUX_PREFIX will do (flux-core's prefix: $FLUX_IMAGE_PREFIX)"
        return
    fi
    podman_conf
    command -v podman >/dev/null || die "podman is not installed (apt-get install podman buildah)"
    command -v buildah >/dev/null || die "buildah is not installed (apt-get install buildah)"
    mkdir -p "$STATE/images"
    for step in "$@"; do
        case $step in
            all) check_flux; debian_base; flux_base; pause_image; fluence_image; braket_image; archives ;;
            bases) check_flux; debian_base; flux_base; pause_image ;;
            debian) debian_base ;;
            flux) flux_base ;;
            pause) pause_image ;;
            fluence) fluence_image ;;
            braket) braket_image ;;
            archives) archives ;;
            -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
            *) die "unknown step $step (all, bases, debian, flux, pause, fluence, braket, archives, check-flux)" ;;
        esac
    done
}

main "$@"
