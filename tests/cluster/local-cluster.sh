#!/usr/bin/env bash
# A real multi-node Kubernetes cluster on this machine, from binaries, for Fluence.
#
#   tests/cluster/local-cluster.sh up        control plane, kube-proxy, cluster DNS, N kubelets
#   tests/cluster/local-cluster.sh load      import the built images into every node's containerd
#   tests/cluster/local-cluster.sh deploy    kubectl apply -k tests/cluster/overlay (deploy/, local image)
#   tests/cluster/local-cluster.sh status    processes, nodes, Fluence's pods
#   tests/cluster/local-cluster.sh down      delete pods, stop everything, remove what it made
#   tests/cluster/local-cluster.sh env       print KUBECONFIG=... for a shell
#   tests/cluster/local-cluster.sh missing   what this machine lacks for `up`, or nothing
#   tests/cluster/local-cluster.sh cdi       why containers cannot get CDI devices here, or nothing
#
# Needs (root, a cgroup v1 or v2 host):
#   $KUBEBUILDER_ASSETS (default /usr/local/kubebuilder/bin): etcd, kube-apiserver (1.36),
#       kube-controller-manager, kube-scheduler, kube-proxy, kubelet, kubectl
#       (envtest's assets have no kubelet or kube-proxy: build those two from the same
#       Kubernetes source, `make WHAT="cmd/kubelet cmd/kube-proxy"`, into that folder)
#   containerd 1.6+ with containerd-shim-runc-v2 and ctr: $CONTAINERD_BIN, a folder holding the
#       three, or else the first on $PATH. DRA drivers hand devices to containers through CDI,
#       which needs containerd 1.7 or later (Debian bookworm's is 1.6.20; containerd 2.x builds
#       from its source with Go, docs/dra.md says how)
#   runc, CNI plugins bridge/host-local/loopback ($CNI_BIN, default
#       /usr/lib/cni), iptables, iproute2, openssl, util-linux (unshare, nsenter), python3
#   the images of tests/cluster/images.sh (load and deploy use them)
#
# The layout (shared/LOCAL-CLUSTER.md records why each piece is there):
#   - a host-only bridge flc-host with /32s: the API server on 10.213.0.1:6443 (pods reach
#     it there and through the kubernetes Service), node-N on 10.213.0.(10+N);
#   - each node: its own containerd (root, state, socket, a base OCI spec with no rlimits),
#     its own CNI bridge cni-flN with pod subnet 10.244.N.0/24, its own kubelet (root dir,
#     ports, pod logs dir, cgroup root /fluence-node-N); containerd and kubelet share a
#     private mount namespace in which /var/lib/kubelet/device-plugins,
#     /var/lib/kubelet/plugins_registry, /var/lib/kubelet/plugins, /var/run/cdi and
#     /var/log/containers are the node's own folders, so two kubelets on one host keep
#     their own device-plugin and DRA plugin sockets, CDI specs and log folders;
#   - one kube-proxy (both nodes share the host's network), services in 10.96.0.0/24;
#   - cluster_dns.py on 10.213.0.1:53 answers <service>.<namespace>.svc names from the API.
# Everything lives under $FLUENCE_CLUSTER_DIR (default /var/tmp/fluence-cluster); `down`
# removes it all and restores net.ipv4.ip_forward.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${FLUENCE_CLUSTER_DIR:-/var/tmp/fluence-cluster}
KUBE_BIN=${KUBEBUILDER_ASSETS:-/usr/local/kubebuilder/bin}
CNI_BIN=${CNI_BIN:-/usr/lib/cni}
CONTAINERD_BIN=${CONTAINERD_BIN:-}
# containerd finds its shim on $PATH: the chosen folder goes first, for every command here.
[[ -n "$CONTAINERD_BIN" ]] && PATH=$CONTAINERD_BIN:$PATH
NODES=${FLUENCE_CLUSTER_NODES:-2}
FEATURE_GATES=GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true
RUNTIME_CONFIG=scheduling.k8s.io/v1alpha2=true
HOST_DEV=flc-host
API_IP=10.213.0.1
API_PORT=6443
SERVICE_CIDR=10.96.0.0/24
CLUSTER_CIDR=10.244.0.0/16
ETCD_PORT=12379
PAUSE_IMAGE=localhost/fluence-local/pause:1
CGROUP_CONTROLLERS=(cpu cpuacct cpuset memory devices freezer blkio pids systemd)
# Host paths a kubelet, its plugins or containerd use whatever the kubelet's --root-dir: each
# node's mount namespace gets its own folder there (node_up); `down` removes the ones it made.
FIXED_DIRS=(/var/lib/kubelet/device-plugins /var/lib/kubelet/plugins_registry
            /var/lib/kubelet/plugins /var/run/cdi /var/log/containers)
KUBECTL=("$KUBE_BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig")

say() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
node_ip() { echo "10.213.0.$((10 + $1))"; }
kubectl() { "${KUBECTL[@]}" "$@"; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }

# Every missing tool, named, or nothing.
missing() {
    local gone=() b
    for b in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
        [[ -x "$KUBE_BIN/$b" ]] || gone+=("$KUBE_BIN/$b")
    done
    if [[ ! -x "$KUBE_BIN/kubelet" || ! -x "$KUBE_BIN/kube-proxy" ]]; then
        gone+=("(envtest's assets have no kubelet or kube-proxy: build them from the same"
               "Kubernetes source, make WHAT=\"cmd/kubelet cmd/kube-proxy\", into $KUBE_BIN)")
    fi
    if [[ -n "$CONTAINERD_BIN" ]]; then
        for b in containerd containerd-shim-runc-v2 ctr; do
            [[ -x "$CONTAINERD_BIN/$b" ]] || gone+=("$CONTAINERD_BIN/$b (CONTAINERD_BIN)")
        done
    fi
    for b in containerd containerd-shim-runc-v2 ctr runc iptables ip openssl unshare nsenter python3; do
        command -v "$b" >/dev/null || gone+=("$b")
    done
    for b in bridge host-local loopback; do
        [[ -x "$CNI_BIN/$b" ]] || gone+=("$CNI_BIN/$b")
    done
    [[ $(id -u) == 0 ]] || gone+=("root")
    echo "${gone[*]:-}"
}

# The version of the containerd this script runs, MAJOR.MINOR.PATCH, or nothing.
containerd_version() {
    containerd --version 2>/dev/null | awk '{print $3}' | sed -e 's/^v//' -e 's/[~+-].*//'
}

# Why a container cannot be given a CDI device here (DRA drivers hand theirs that way),
# or nothing.
no_cdi() {
    local version major minor
    command -v containerd >/dev/null || { echo "no containerd on PATH or in CONTAINERD_BIN"; return; }
    version=$(containerd_version)
    IFS=. read -r major minor _ <<< "$version"
    if [[ ! "$major" =~ ^[0-9]+$ || ! "$minor" =~ ^[0-9]+$ ]]; then
        echo "cannot tell the version of $(command -v containerd) from 'containerd --version'"
    elif ((major < 1 || (major == 1 && minor < 7))); then
        echo "containerd $version ($(command -v containerd)) has no CDI, which DRA drivers use" \
             "to hand devices to containers (it came in 1.7): set CONTAINERD_BIN to a folder" \
             "with containerd 1.7+ or 2.x, containerd-shim-runc-v2 and ctr (docs/dra.md says" \
             "how to build containerd 2.x)"
    fi
}

# -- processes ---------------------------------------------------------------------------

start() {  # start NAME COMMAND...: in the background, log and pid under $STATE
    local name=$1; shift
    mkdir -p "$STATE/logs" "$STATE/pids"
    setsid "$@" > "$STATE/logs/$name.log" 2>&1 < /dev/null &
    echo $! > "$STATE/pids/$name.pid"
}

alive() { [[ -f "$STATE/pids/$1.pid" ]] && kill -0 "$(cat "$STATE/pids/$1.pid")" 2>/dev/null; }

stop() {  # stop NAME: TERM, then KILL after 20 s
    local name=$1 pid i
    [[ -f "$STATE/pids/$name.pid" ]] || return 0
    pid=$(cat "$STATE/pids/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && { say "$name did not stop, killing"; kill -KILL "$pid" || true; }
    fi
    rm -f "$STATE/pids/$name.pid"
}

wait_until() {  # wait_until SECONDS WHAT COMMAND...
    local seconds=$1 what=$2; shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${seconds}s waiting for $what"
        sleep 0.5
    done
}

# -- pieces of `up` ---------------------------------------------------------------------

pki() {
    local d=$STATE/pki
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fluence-local-ca \
        -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
        -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' \
        "IP:$API_IP,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
        > "$d/apiserver.ext"
    openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
        -CAcreateserial -days 2 -extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null
    openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
    openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
    # Static tokens: the admin, each kubelet as its node (Node authorizer), kube-proxy.
    {
        echo "$(token admin),admin,admin,system:masters"
        echo "$(token kube-proxy),system:kube-proxy,kube-proxy"
        local n
        for n in $(seq "$NODES"); do
            echo "$(token "node-$n"),system:node:node-$n,node-$n,system:nodes"
        done
    } > "$d/tokens.csv"
    chmod 600 "$d"/*.key "$d/tokens.csv"
}

token() { printf 'fluence-local-%s-%s' "$1" "$(cat "$STATE/pki/secret")"; }

kubeconfig() {  # kubeconfig FILE USER
    cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$API_IP:$API_PORT", certificate-authority: "$STATE/pki/ca.crt"}
users:
- name: $2
  user: {token: "$(token "$2")"}
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
}

host_network() {
    cat /proc/sys/net/ipv4/ip_forward > "$STATE/ip_forward.before"
    ip link add "$HOST_DEV" type bridge
    ip link set "$HOST_DEV" up
    ip addr add "$API_IP/32" dev "$HOST_DEV"
    local n
    for n in $(seq "$NODES"); do ip addr add "$(node_ip "$n")/32" dev "$HOST_DEV"; done
    echo 1 > /proc/sys/net/ipv4/ip_forward
    # Pod traffic between the nodes' bridges is routed by this host; a FORWARD policy of
    # DROP (Docker sets one) would stop it.
    iptables -I FORWARD -s "$CLUSTER_CIDR" -j ACCEPT -m comment --comment fluence-local-cluster
    iptables -I FORWARD -d "$CLUSTER_CIDR" -j ACCEPT -m comment --comment fluence-local-cluster
}

control_plane() {
    local p=$STATE/pki
    start etcd "$KUBE_BIN/etcd" --name=fluence-local --data-dir="$STATE/etcd" \
        --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
        --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
        --initial-cluster="fluence-local=http://127.0.0.1:$((ETCD_PORT + 1))" \
        --experimental-watch-progress-notify-interval=1s
    start kube-apiserver "$KUBE_BIN/kube-apiserver" \
        --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --bind-address="$API_IP" --advertise-address="$API_IP" --secure-port="$API_PORT" \
        --cert-dir="$STATE/apiserver-certs" \
        --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
        --client-ca-file="$p/ca.crt" --token-auth-file="$p/tokens.csv" \
        --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
        --service-account-issuer=https://kubernetes.default.svc \
        --service-cluster-ip-range="$SERVICE_CIDR" \
        --authorization-mode=Node,RBAC --allow-privileged=true \
        --kubelet-preferred-address-types=InternalIP \
        --feature-gates="$FEATURE_GATES" --runtime-config="$RUNTIME_CONFIG" \
        --profiling=false
    wait_until 90 "kube-apiserver /readyz" kubectl get --raw /readyz
    start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
        --kubeconfig="$STATE/admin.kubeconfig" --leader-elect=false \
        --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
        --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
        --use-service-account-credentials=true \
        --feature-gates="$FEATURE_GATES" --bind-address=127.0.0.1 --secure-port=10357 \
        --cert-dir="$STATE/kcm-certs" --profiling=false
    start kube-scheduler "$KUBE_BIN/kube-scheduler" \
        --kubeconfig="$STATE/admin.kubeconfig" --leader-elect=false \
        --feature-gates="$FEATURE_GATES" --bind-address=127.0.0.1 --secure-port=10359 \
        --profiling=false
}

kube_proxy() {
    kubeconfig "$STATE/kube-proxy.kubeconfig" kube-proxy
    cat > "$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$STATE/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: "$CLUSTER_CIDR"
hostnameOverride: node-1
bindAddress: "$API_IP"
healthzBindAddress: "127.0.0.1:10256"
metricsBindAddress: "127.0.0.1:10249"
conntrack: {maxPerCore: 0}
iptables: {localhostNodePorts: false}
EOF
    start kube-proxy "$KUBE_BIN/kube-proxy" --config="$STATE/kube-proxy.yaml"
}

cluster_dns() {
    start cluster-dns python3 "$HERE/cluster_dns.py" --listen "$API_IP" \
        --server "https://$API_IP:$API_PORT" --ca "$STATE/pki/ca.crt" --token "$(token admin)"
}

service_ca_shim() {  # only an OpenShift-derived API server needs it (service_ca_shim.py)
    start service-ca-shim python3 "$HERE/service_ca_shim.py" \
        --server "https://$API_IP:$API_PORT" --ca "$STATE/pki/ca.crt" --token "$(token admin)"
}

base_runtime_spec() {  # the default OCI spec less process.rlimits (no CAP_SYS_RESOURCE here)
    ctr oci spec | python3 -c 'import json, sys
spec = json.load(sys.stdin)
spec["process"].pop("rlimits", None)
json.dump(spec, sys.stdout, indent=1)' > "$STATE/base-runtime-spec.json"
}

cgroup_root() {  # a cgroup root of the node's own in every v1 hierarchy (or the v2 tree)
    local name=$1 c dir
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
        mkdir -p "/sys/fs/cgroup/$name"; return
    fi
    for c in "${CGROUP_CONTROLLERS[@]}"; do
        [[ -d /sys/fs/cgroup/$c ]] || continue
        dir=/sys/fs/cgroup/$c/$name
        mkdir -p "$dir"
        if [[ $c == cpuset ]]; then
            cat /sys/fs/cgroup/cpuset/cpuset.cpus > "$dir/cpuset.cpus"
            cat /sys/fs/cgroup/cpuset/cpuset.mems > "$dir/cpuset.mems"
        fi
    done
}

# The node's containerd configuration: version 3 for containerd 2.x, version 2 before.
# CDI (1.7 and later) reads only /var/run/cdi, the node's own folder in its mount namespace.
containerd_config() {
    local d=$1 version major minor cdi=""
    version=$(containerd_version)
    IFS=. read -r major minor _ <<< "$version"
    if ((major >= 2)); then
        cat > "$d/containerd.toml" <<EOF
version = 3
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[ttrpc]
  address = "$d/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
# NRI's socket is a fixed host path two containerds would share; nothing here uses NRI.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins."io.containerd.cri.v1.runtime"]
  # why these two: the version 2 configuration below
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = true
  cdi_spec_dirs = ["/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$STATE/base-runtime-spec.json"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$CNI_BIN"]
    conf_dir = "$d/cni"
EOF
        return
    fi
    if ((major == 1 && minor >= 7)); then
        cdi=$'  enable_cdi = true\n  cdi_spec_dirs = ["/var/run/cdi"]'
    fi
    cat > "$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[ttrpc]
  address = "$d/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # no lower OOM score than containerd's own: lowering one needs CAP_SYS_RESOURCE, which
  # this sandbox lacks (runc: "failed to update /proc/self/oom_score_adj")
  restrict_oom_score_adj = true
  # the pods' network namespaces under this node's state, not in the host's /run/netns
  netns_mounts_under_state_dir = true
${cdi}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$STATE/base-runtime-spec.json"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$d/cni"
EOF
}

node_up() {
    local n=$1 d=$STATE/node-$n ip
    ip=$(node_ip "$n")
    mkdir -p "$d"/{containerd,cni,cni-ipam,kubelet,certs,pod-logs,device-plugins,containers-log,cdi}
    # The kubelet finds plugins in <root-dir>/plugins_registry; a plugin's pod mounts the
    # fixed /var/lib/kubelet/plugins_registry: the node's namespace makes them one folder.
    mkdir -p "$d"/kubelet/{plugins_registry,plugins}
    # containerd and the kubelet share a mount namespace of their own.
    touch "$STATE/ns/node-$n"
    unshare --mount="$STATE/ns/node-$n" --propagation private true
    local own
    for own in device-plugins:/var/lib/kubelet/device-plugins \
               kubelet/plugins_registry:/var/lib/kubelet/plugins_registry \
               kubelet/plugins:/var/lib/kubelet/plugins cdi:/var/run/cdi \
               containers-log:/var/log/containers; do
        nsenter --mount="$STATE/ns/node-$n" -- mount --bind "$d/${own%%:*}" "${own#*:}"
    done
    cat > "$d/cni/10-fluence.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "fluence-node-$n", "plugins": [
  {"type": "bridge", "bridge": "cni-fl$n", "isGateway": true, "ipMasq": false,
   "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$d/cni-ipam",
            "ranges": [[{"subnet": "10.244.$n.0/24"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
    containerd_config "$d"
    start "containerd-$n" nsenter --mount="$STATE/ns/node-$n" -- \
        containerd --config "$d/containerd.toml"
    cgroup_root "fluence-node-$n"
    kubeconfig "$d/kubelet.kubeconfig" "node-$n"
    local dns="[]"
    [[ -z "${NO_DNS:-}" ]] && dns="[\"$API_IP\"]"
    cat > "$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$ip"
port: $((10250 + 10 * (n - 1)))
healthzBindAddress: 127.0.0.1
healthzPort: $((10248 + 10 * (n - 1)))
readOnlyPort: 0
containerRuntimeEndpoint: "unix://$d/containerd.sock"
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /fluence-node-$n
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
failSwapOn: false
enforceNodeAllocatable: []
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
clusterDNS: $dns
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: "$d/pod-logs"
serializeImagePulls: false
EOF
    wait_until 30 "containerd of node-$n" ctr --address "$d/containerd.sock" version
    start "kubelet-$n" nsenter --mount="$STATE/ns/node-$n" -- \
        "$KUBE_BIN/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
        --root-dir="$d/kubelet" --cert-dir="$d/certs" --hostname-override="node-$n" \
        --node-ip="$ip"
}

nodes_registered() { [[ $(kubectl get nodes -o name 2>/dev/null | wc -l) -eq $NODES ]]; }

up() {
    local gone
    gone=$(missing)
    [[ -z "$gone" ]] || die "missing: $gone"
    [[ ! -e "$STATE/up" ]] || die "a cluster is up already ($STATE/up): run down first"
    ip link show "$HOST_DEV" >/dev/null 2>&1 && die "$HOST_DEV exists: run down first"
    mkdir -p "$STATE/ns"
    touch "$STATE/up"
    [[ -d /var/lib/kubelet ]] || touch "$STATE/made-var-lib-kubelet"
    [[ -d /var/lib/cni ]] || touch "$STATE/made-var-lib-cni"
    local dir
    for dir in "${FIXED_DIRS[@]}"; do  # the mount points of every node's own folders
        [[ -d $dir ]] || { echo "$dir" >> "$STATE/made-dirs"; mkdir -p "$dir"; }
    done
    # mount namespaces are pinned by bind mounts on files of a private mount
    mount --bind "$STATE/ns" "$STATE/ns"
    mount --make-private "$STATE/ns"
    head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE/pki.secret.tmp"
    mkdir -p "$STATE/pki" && mv "$STATE/pki.secret.tmp" "$STATE/pki/secret"
    pki
    kubeconfig "$STATE/admin.kubeconfig" admin
    host_network
    say "control plane on https://$API_IP:$API_PORT"
    control_plane
    kube_proxy
    [[ -z "${NO_DNS:-}" ]] && cluster_dns
    service_ca_shim
    base_runtime_spec
    local n
    for n in $(seq "$NODES"); do node_up "$n"; done
    wait_until 120 "$NODES nodes registered" nodes_registered
    kubectl wait --for=condition=Ready node --all --timeout=120s >/dev/null
    wait_until 60 "the default ServiceAccount" kubectl get serviceaccount default
    say "up: $(kubectl get nodes --no-headers | awk '{print $1 "=" $2}' | tr '\n' ' ')"
    say "KUBECONFIG=$STATE/admin.kubeconfig"
}

# -- load, deploy, status ---------------------------------------------------------------

load_node() {
    local n=$1 file
    for file in "$STATE"/images/*.tar; do
        say "node-$n: import $(basename "$file")"
        ctr --address "$STATE/node-$n/containerd.sock" -n k8s.io images import \
            "$file" >/dev/null
    done
}

load() {  # every archive into every node, the nodes side by side
    local n pids=()
    compgen -G "$STATE/images/*.tar" >/dev/null \
        || die "no image archives in $STATE/images: run tests/cluster/images.sh first"
    for n in $(seq "$NODES"); do load_node "$n" & pids+=($!); done
    for n in "${pids[@]}"; do wait "$n" || die "an import failed"; done
}

deploy() {
    kubectl apply -k "$HERE/overlay"
    kubectl -n fluence-system rollout status deployment/fluence-webhook --timeout=180s
    kubectl -n fluence-system rollout status deployment/fluence --timeout=180s
    kubectl -n fluence-system rollout status daemonset/fluence-device-plugin --timeout=180s
    kubectl -n fluence-system rollout status deployment/fluence-qpu-driver --timeout=180s
    kubectl -n fluence-system rollout status daemonset/fluence-qpu-kubelet-plugin --timeout=180s
}

status() {
    local name
    for name in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy \
                cluster-dns service-ca-shim $(for n in $(seq "$NODES"); do echo "containerd-$n kubelet-$n"; done); do
        if alive "$name"; then echo "$name: running (pid $(cat "$STATE/pids/$name.pid"))"
        else echo "$name: not running"; fi
    done
    alive kube-apiserver || return 0
    kubectl get nodes -o wide || true
    kubectl get pods -A -o wide || true
}

# -- down ----------------------------------------------------------------------------------

down() {
    local n c
    set +e  # best effort: every step runs, whatever an earlier one found
    # 1. the pods, while the kubelets can still stop them; wait for containerd's tasks
    if alive kube-apiserver; then
        kubectl delete --all namespaces --field-selector \
            'metadata.name!=default,metadata.name!=kube-system,metadata.name!=kube-public,metadata.name!=kube-node-lease' \
            --wait=false >/dev/null 2>&1 || true
        kubectl delete mutatingwebhookconfigurations,validatingwebhookconfigurations --all \
            >/dev/null 2>&1 || true
        kubectl delete pods --all -A --grace-period=5 --timeout=60s >/dev/null 2>&1 || true
        for n in $(seq "$NODES"); do
            local sock=$STATE/node-$n/containerd.sock
            [[ -S $sock ]] || continue
            local deadline=$((SECONDS + 60))
            # only running tasks: a finished pod's stay listed, STOPPED, until deleted below
            while ((SECONDS < deadline)) && [[ -n "$(running_tasks "$sock")" ]]; do
                sleep 1
            done
        done
    fi
    say "down: pods gone after ${SECONDS}s"
    # 2. kubelets, then containerd (each stopping its tasks' shims), then the control plane
    for n in $(seq "$NODES"); do stop "kubelet-$n"; done
    for n in $(seq "$NODES"); do
        local sock=$STATE/node-$n/containerd.sock
        if [[ -S $sock ]]; then
            local t
            for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
                ctr --address "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
            done
            sleep 1
            for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
                ctr --address "$sock" -n k8s.io tasks delete "$t" >/dev/null 2>&1 || true
            done
        fi
        stop "containerd-$n"
    done
    stop cluster-dns
    stop service-ca-shim
    stop kube-proxy
    [[ -x "$KUBE_BIN/kube-proxy" ]] && "$KUBE_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
    stop kube-scheduler
    stop kube-controller-manager
    stop kube-apiserver
    stop etcd
    say "down: processes stopped after ${SECONDS}s"
    # shims whose containerd is gone (they outlive it by design)
    pkill_shims
    # 3. mounts (the node namespaces hold the kubelets' own), links, sysctl
    for n in $(seq "$NODES"); do
        [[ -e "$STATE/ns/node-$n" ]] && umount "$STATE/ns/node-$n" 2>/dev/null || true
        grep -o " $STATE/node-$n[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
            umount -l "$m" 2>/dev/null || true
        done
        ip link del "cni-fl$n" 2>/dev/null || true
    done
    mountpoint -q "$STATE/ns" 2>/dev/null && umount "$STATE/ns"
    ip link del "$HOST_DEV" 2>/dev/null || true
    while iptables -D FORWARD -s "$CLUSTER_CIDR" -j ACCEPT -m comment --comment fluence-local-cluster 2>/dev/null; do :; done
    while iptables -D FORWARD -d "$CLUSTER_CIDR" -j ACCEPT -m comment --comment fluence-local-cluster 2>/dev/null; do :; done
    [[ -f "$STATE/ip_forward.before" ]] && cat "$STATE/ip_forward.before" > /proc/sys/net/ipv4/ip_forward
    # 4. cgroups, depth first
    for n in $(seq "$NODES"); do
        # runc also makes the pods' cgroups in a hybrid host's cgroup2 tree (unified)
        for c in "${CGROUP_CONTROLLERS[@]}" unified ""; do
            local root=/sys/fs/cgroup/$c/fluence-node-$n
            [[ -d $root ]] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
        done
    done
    # 5. the fixed host paths, when this script made them
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
    [[ -f "$STATE/made-dirs" ]] && tac "$STATE/made-dirs" | while read -r dir; do
        rmdir "$dir" 2>/dev/null || true
    done
    [[ -f "$STATE/made-var-lib-kubelet" ]] && rm -rf /var/lib/kubelet
    [[ -f "$STATE/made-var-lib-cni" ]] && rm -rf /var/lib/cni
    local images=$STATE/images
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name images ! -name containers.conf ! -name tier.lock \
        -exec rm -rf {} + 2>/dev/null || true
    say "down: nothing left running after ${SECONDS}s; images kept in $images"
}

running_tasks() {  # running_tasks SOCKET: the ids of the node's running containers
    ctr --address "$1" -n k8s.io tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING" {print $1}'
}

pkill_shims() {  # only the shims of this cluster's containerds (their -address names them)
    local pid
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $STATE/node-" || true); do
        kill -KILL "$pid" 2>/dev/null || true
    done
}

main() {
    case "${1:-}" in
        up) up ;;
        load) load ;;
        deploy) deploy ;;
        status) status ;;
        down) down ;;
        env) echo "KUBECONFIG=$STATE/admin.kubeconfig" ;;
        missing) missing ;;
        cdi) no_cdi ;;
        -h|--help|help|"") usage ;;
        *) usage; die "unknown command $1" ;;
    esac
}

main "$@"
