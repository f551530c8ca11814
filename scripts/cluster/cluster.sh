#!/usr/bin/env bash
# A cluster of K nodes on this machine (docs/cluster.md): each node is a network namespace
# with its own UTS namespace (its own host name), its own /etc/hosts (ip netns exec's
# /etc/netns/NODE/), and one veth link into a bridge that lives in a separate "switch"
# namespace. Nothing is added to the machine's own network: the namespaces have no route
# out, so a node can reach only the other nodes' addresses (and its own loopback).
#
#   cluster.sh up [-k K] [-p PROFILE]   make the cluster (default K=4, PROFILE=10g);
#                                       an existing one of the same name is replaced
#   cluster.sh down                     remove it: kills the processes inside its nodes,
#                                       deletes namespaces, UTS mounts, hosts files, state
#                                       and Open MPI's segments named after its nodes
#   cluster.sh status                   nodes, addresses, shaping; exit 1 when not up
#   cluster.sh exec NODE CMD...         run CMD on NODE (inside its namespaces)
#   cluster.sh run [-k K] [-p P] -- CMD...  up, CMD on node 0, down (also on failure or
#                                       SIGINT/SIGTERM); exit status of CMD
#   cluster.sh kill NODE                node loss: NODE's link goes down, then every
#                                       process inside it gets SIGKILL
#   cluster.sh freeze NODE              a hung node: link down, its processes SIGSTOPped
#                                       (`down` or `kill` ends them later)
#   cluster.sh counters                 bytes and packets each node's link sent/received
#   cluster.sh nodes                    the node names, one a line
#   cluster.sh check                    exit 0 when this machine allows namespaces, else
#                                       77 with the reason (meson's SKIP)
#
# Profiles (tbf on both directions of every node link): 10g = 10 Gb/s, 1g = 1 Gb/s,
# none = unshaped veth.
# Settings: AGX_CLUSTER (name, default agx: nodes agx-n0.., switch agx-sw),
# AGX_CLUSTER_NET (first three octets of the private /24, default 10.213.0).
# After `up`, $STATE (/run/agx-cluster/NAME) holds hostfile (Open MPI), machinefile
# (MPICH), nodes, and the UTS namespace files; scripts/cluster/agent is the launcher agent.
set -euo pipefail

NAME=${AGX_CLUSTER:-agx}
NET=${AGX_CLUSTER_NET:-10.213.0}
STATE=/run/agx-cluster/$NAME
SWITCH=$NAME-sw
LOCK=/run/agx-cluster/.lock

die() { echo "cluster: $*" >&2; exit 1; }
skip() { echo "SKIP: cluster: $*" >&2; exit 77; }

[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "AGX_CLUSTER must be 1-8 lowercase letters/digits, got '$NAME'"
[[ $NET =~ ^(10\.[0-9]{1,3}\.[0-9]{1,3}|192\.168\.[0-9]{1,3})$ ]] ||
  die "AGX_CLUSTER_NET must be the first three octets of a private /24 (10.x.y or 192.168.z), got '$NET'"

node_name() { echo "$NAME-n$1"; }

# Nodes of the cluster now up (from the state dir; empty when down).
current_nodes() { [ -f "$STATE/nodes" ] && cat "$STATE/nodes" || true; }

is_node() {
  local n
  for n in $(current_nodes); do [ "$n" = "$1" ] && return 0; done
  return 1
}

# check: can this machine make namespaces? Prints the reason and exits 77 when not.
check() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth, tc)"
  local cmd
  for cmd in ip tc unshare nsenter flock; do
    command -v "$cmd" >/dev/null || skip "'$cmd' is not installed"
  done
  unshare --net --uts true 2>/dev/null || skip "this machine does not allow network/UTS namespaces (unshare --net --uts failed)"
  local probe="$NAME-probe$$"
  ip netns add "$probe" 2>/dev/null || skip "'ip netns add' is not allowed here"
  local ok=1
  ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null || ok=0
  if [ $ok = 1 ]; then
    ip -n "$probe" link add b0 type bridge 2>/dev/null || ok=2
    ip -n "$probe" link set v0 up && ip -n "$probe" link set v1 up
    tc -n "$probe" qdisc add dev v0 root tbf rate 1gbit burst 256kb latency 50ms 2>/dev/null || ok=3
  fi
  ip netns del "$probe"
  case $ok in
    0) skip "veth devices cannot be made here" ;;
    2) skip "bridge devices cannot be made here" ;;
    3) skip "tc tbf shaping is not available here" ;;
  esac
}

down_locked() {
  local n pids
  for n in $(current_nodes) $(ip netns list | awk -v p="^$NAME-(n[0-9]+|sw)\$" '$1 ~ p {print $1}'); do
    if [ -e "/run/netns/$n" ]; then
      pids=$(ip netns pids "$n" 2>/dev/null || true)
      [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    fi
  done
  # The killed processes must be gone before the namespaces go (else their sockets linger).
  local tries=0
  for n in $(ip netns list | awk -v p="^$NAME-(n[0-9]+|sw)\$" '$1 ~ p {print $1}'); do
    while [ -n "$(ip netns pids "$n" 2>/dev/null)" ] && [ $tries -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
    ip netns del "$n" 2>/dev/null || true
  done
  # Open MPI's shared-memory segments are named after the host (vader_segment.NODE.*);
  # a killed job leaves them in /dev/shm, which all nodes share. Their processes are gone.
  for f in /dev/shm/vader_segment."$NAME"-n*; do
    [ -e "$f" ] || continue
    [[ $(basename "$f") =~ ^vader_segment\.$NAME-n[0-9]+\. ]] && rm -f "$f"
  done
  if [ -d "$STATE" ]; then
    for f in "$STATE"/*.uts; do
      [ -e "$f" ] || continue
      umount "$f" 2>/dev/null || true
    done
    rm -rf "$STATE"
  fi
  for d in /etc/netns/"$NAME"-n*; do
    [ -d "$d" ] || continue
    [[ $(basename "$d") =~ ^$NAME-n[0-9]+$ ]] && rm -rf "$d"
  done
  rmdir /etc/netns 2>/dev/null || true
}

shape() {  # shape NAMESPACE DEVICE PROFILE
  case $3 in
    none) ;;
    10g) tc -n "$1" qdisc replace dev "$2" root tbf rate 10gbit burst 4mb latency 20ms ;;
    1g)  tc -n "$1" qdisc replace dev "$2" root tbf rate 1gbit burst 512kb latency 50ms ;;
    *) die "unknown profile '$3' (10g, 1g, none)" ;;
  esac
}

up_locked() {
  local k=$1 profile=$2 i n
  down_locked
  mkdir -p "$STATE"
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link set lo up
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  : > "$STATE/nodes.tmp"
  {
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    for ((i = 0; i < k; i++)); do echo "$NET.$((i + 1)) $(node_name $i)"; done
  } > "$STATE/hosts"
  for ((i = 0; i < k; i++)); do
    n=$(node_name $i)
    echo "$n" >> "$STATE/nodes.tmp"
    mv "$STATE/nodes.tmp" "$STATE/nodes"; cp "$STATE/nodes" "$STATE/nodes.tmp"  # down sees partial clusters
    ip netns add "$n"
    ip -n "$n" link set lo up
    ip -n "$SWITCH" link add "p$i" type veth peer name eth0 netns "$n"
    ip -n "$SWITCH" link set "p$i" master br0
    ip -n "$SWITCH" link set "p$i" up
    ip -n "$n" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$n" link set eth0 up
    shape "$n" eth0 "$profile"          # what the node sends
    shape "$SWITCH" "p$i" "$profile"    # what the node receives
    touch "$STATE/$n.uts"
    unshare --uts="$STATE/$n.uts" hostname "$n"
    mkdir -p "/etc/netns/$n"
    cp "$STATE/hosts" "/etc/netns/$n/hosts"
  done
  rm -f "$STATE/nodes.tmp"
  for n in $(current_nodes); do echo "$n slots=8"; done > "$STATE/hostfile"
  for n in $(current_nodes); do echo "$n:8"; done > "$STATE/machinefile"
  echo "$profile" > "$STATE/profile"
  # Every node must reach every other one before the cluster counts as up.
  for n in $(current_nodes); do
    ip netns exec "$n" python3 - "$NET" "$k" <<'PY' || die "node $n cannot reach the others"
import socket, sys, time
net, k = sys.argv[1], int(sys.argv[2])
for i in range(k):  # a connect to a closed port answers RST: the address is reachable
    a = f"{net}.{i + 1}"
    end = time.time() + 5
    while True:
        s = socket.socket(); s.settimeout(2)
        try:
            s.connect((a, 9)); s.close(); break
        except ConnectionRefusedError:
            break
        except OSError as e:
            if time.time() > end: sys.exit(f"{a}: {e}")
            time.sleep(0.1)
PY
  done
}

locked() {  # locked FUNCTION ARGS...: one cluster operation at a time on this machine
  mkdir -p /run/agx-cluster
  exec 9>"$LOCK"
  flock -w 60 9 || die "another cluster operation holds $LOCK"
  "$@"
  exec 9>&-
}

parse_up_args() {
  K=4; PROFILE=10g
  while [ $# -gt 0 ]; do
    case $1 in
      -k) K=${2:?-k needs a node count}; shift 2 ;;
      -p) PROFILE=${2:?-p needs a profile}; shift 2 ;;
      --) shift; break ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  [[ $K =~ ^[0-9]+$ ]] && [ "$K" -ge 1 ] && [ "$K" -le 64 ] || die "-k must be 1..64, got '$K'"
  case $PROFILE in 10g|1g|none) ;; *) die "unknown profile '$PROFILE' (10g, 1g, none)" ;; esac
  REST=("$@")
}

node_exec() {  # node_exec NODE CMD...
  local n=$1; shift
  is_node "$n" || die "'$n' is not a node of cluster '$NAME' (nodes: $(current_nodes | tr '\n' ' '))"
  exec ip netns exec "$n" nsenter --uts="$STATE/$n.uts" -- "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  check) check ;;
  up)
    parse_up_args "$@"
    check
    trap 'down_locked' ERR
    locked up_locked "$K" "$PROFILE"
    trap - ERR
    echo "cluster $NAME: $K nodes ($(current_nodes | tr '\n' ' ')) on $NET.0/24, profile $PROFILE; state in $STATE"
    ;;
  down) locked down_locked ;;
  status)
    [ -f "$STATE/nodes" ] || { echo "cluster $NAME is down"; exit 1; }
    echo "cluster $NAME, profile $(cat "$STATE/profile")"
    for n in $(current_nodes); do
      printf '%s  %s  host name %s  qdisc: %s\n' "$n" \
        "$(ip -n "$n" -4 -o addr show dev eth0 | awk '{print $4}')" \
        "$(nsenter --uts="$STATE/$n.uts" hostname)" \
        "$(tc -n "$n" qdisc show dev eth0 | head -1)"
    done
    ;;
  exec)
    [ $# -ge 2 ] || die "usage: cluster.sh exec NODE CMD..."
    node_exec "$@"
    ;;
  run)
    parse_up_args "$@"
    [ ${#REST[@]} -gt 0 ] || die "usage: cluster.sh run [-k K] [-p P] -- CMD..."
    check
    trap 'locked down_locked' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    locked up_locked "$K" "$PROFILE"
    rc=0
    ip netns exec "$(node_name 0)" nsenter --uts="$STATE/$(node_name 0).uts" -- "${REST[@]}" || rc=$?
    exit $rc
    ;;
  kill|freeze)
    [ $# -eq 1 ] || die "usage: cluster.sh $cmd NODE"
    is_node "$1" || die "'$1' is not a node of cluster '$NAME'"
    # The node vanishes from the network first: no FIN or RST of its dying sockets
    # reaches the others, as with a host that crashes or loses power.
    ip -n "$1" link set eth0 down
    pids=$(ip netns pids "$1")
    sig=KILL; [ "$cmd" = kill ] || sig=STOP
    [ -z "$pids" ] || kill -$sig $pids
    echo "cluster: $1 is off the network; SIG$sig sent to $(echo $pids | wc -w) processes in it"
    ;;
  counters)
    for n in $(current_nodes); do
      ip netns exec "$n" sh -c 'd=/sys/class/net/eth0/statistics; echo "$1 tx_bytes $(cat $d/tx_bytes) rx_bytes $(cat $d/rx_bytes) tx_packets $(cat $d/tx_packets) rx_packets $(cat $d/rx_packets)"' _ "$n"
    done
    ;;
  nodes) current_nodes ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
