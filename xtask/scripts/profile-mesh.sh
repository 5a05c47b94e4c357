#!/usr/bin/env bash
# Instructions (callgrind) or heap blocks (dhat) per message of the mesh hot path, on both
# sides: two `mesh_node` processes (release build) on loopback, client 01 → server 02, each
# under valgrind. A case runs at N and 2N messages; per message is the difference over N, so
# startup and shutdown cancel out. Figures are repeatable whatever the machine's load.
#
#   xtask/scripts/profile-mesh.sh callgrind|dhat oneway|c1|c64 [N]
#
# Prints `<tool> <case> client <per-msg> server <per-msg>`. See docs/performance.md.
set -euo pipefail
tool=${1:?callgrind or dhat}
case=${2:?oneway, c1 or c64}
n=${3:-20000}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${MESH_NODE:-${CARGO_TARGET_DIR:-$root/target}/release/examples/mesh_node}
[ -x "$bin" ] || { echo "build it first: cargo build --release -p zlink-runtime --example mesh_node" >&2; exit 1; }
# dhat sees only the system allocator's heap: with the example's mimalloc it counts nothing.
if [ "$tool" = dhat ] && grep -qa mi_malloc "$bin"; then
  echo "dhat counts only the system allocator: $bin uses mimalloc. Build a copy without the" >&2
  echo "#[global_allocator] lines of crates/zlink-runtime/examples/mesh_node/main.rs (into another" >&2
  echo "CARGO_TARGET_DIR) and pass it as MESH_NODE=..." >&2
  exit 1
fi

# One run of `count` messages; prints "<client total> <server total>".
run() {
  local count=$1 dir
  dir=$(mktemp -d)
  mkfifo "$dir/s.in" "$dir/c.in"
  local vg=(valgrind --tool="$tool")
  if [ "$tool" = callgrind ]; then
    vg+=(-q --callgrind-out-file="$dir/%q{SIDE}.out")
  else
    vg+=(--dhat-out-file=/dev/null)
  fi
  SIDE=server "${vg[@]}" "$bin" --port 0 --fixed-rid 02 <"$dir/s.in" >"$dir/s.log" 2>"$dir/s.err" &
  local spid=$!
  exec {sfd}>"$dir/s.in"
  until grep -q READY "$dir/s.log" 2>/dev/null; do sleep 0.2; done
  local ep
  ep=$(awk '/READY/{print $3}' "$dir/s.log")
  SIDE=client "${vg[@]}" "$bin" --port 0 --fixed-rid 01 --manual-peer "$ep" <"$dir/c.in" >"$dir/c.log" 2>"$dir/c.err" &
  local cpid=$!
  exec {cfd}>"$dir/c.in"
  until grep -q READY "$dir/c.log" 2>/dev/null; do sleep 0.2; done
  until grep -q "PEERS 1" "$dir/c.log"; do echo PEERS >&$cfd; sleep 0.5; done
  case $case in
    oneway) echo "BLAST 02 $count" >&$cfd; until grep -q BLASTED "$dir/c.log"; do sleep 0.2; done ;;
    c1) echo "ECHOS 02 $count 1" >&$cfd; until grep -q ECHOED "$dir/c.log"; do sleep 0.2; done ;;
    c64) echo "ECHOS 02 $count 64" >&$cfd; until grep -q ECHOED "$dir/c.log"; do sleep 0.2; done ;;
  esac
  grep -q "^ERR" "$dir/c.log" && { cat "$dir/c.log" >&2; exit 1; }
  echo QUIT >&$cfd; exec {cfd}>&-; wait $cpid
  echo QUIT >&$sfd; exec {sfd}>&-; wait $spid
  if [ "$tool" = callgrind ]; then
    echo "$(awk '/^summary:/{print $2}' "$dir/client.out") $(awk '/^summary:/{print $2}' "$dir/server.out")"
  else
    # "Total:     <bytes> bytes in <blocks> blocks"
    echo "$(awk '/Total:/{print $6}' "$dir/c.err" | tr -d ,) $(awk '/Total:/{print $6}' "$dir/s.err" | tr -d ,)"
  fi
  rm -rf "$dir"
}

read -r c1 s1 < <(run "$n")
read -r c2 s2 < <(run $((2 * n)))
echo "$tool $case client $(( (c2 - c1) / n )) server $(( (s2 - s1) / n ))"
