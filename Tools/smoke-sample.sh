#!/usr/bin/env bash
# Smoke test of the sample app under a real pseudo-terminal (tmux), as a person would use it:
#  1. type "hello", Tab to [ Send ], Enter: the row reaches "delivered";
#  2. against a server that always fails, send two messages, quit with Ctrl-C while they are
#     pending; start again against a healed server: they show as resumed (↻) and get delivered;
#  3. with standard output not a terminal, it refuses with a clear message.
# Every wait is bounded; the whole script takes ~15 s. Usage: Tools/smoke-sample.sh [BINARY]
set -euo pipefail
bin=${1:-.build/debug/courier-sample}
work=$(mktemp -d)
session=courier-smoke-$$
port=$((20000 + $$ % 20000))
trap 'tmux kill-session -t $session 2>/dev/null || true; rm -rf "$work"' EXIT

screen() { tmux capture-pane -p -t "$session" 2>/dev/null || true; }
# wait_for TEXT SECONDS: poll the screen until TEXT shows, or fail showing the screen.
wait_for() {
  local deadline=$((SECONDS + $2))
  until screen | grep -qF -- "$1"; do
    if (( SECONDS >= deadline )); then echo "smoke: timed out waiting for '$1'; screen was:"; screen; exit 1; fi
    sleep 0.2
  done
}
start() { tmux new-session -d -s "$session" -x 100 -y 20 "$bin --directory $work/log --port $port --max-delay 1 $*"; }
stop_with() { tmux send-keys -t "$session" "$1"; local d=$((SECONDS + 10)); while tmux has-session -t "$session" 2>/dev/null; do (( SECONDS < d )) || { echo "smoke: did not quit"; exit 1; }; sleep 0.2; done; }

# 1. hello → delivered
start --failure-rate 0.5
wait_for "[ Send ]" 20
tmux send-keys -t "$session" "hello"
wait_for "hello_" 5
tmux send-keys -t "$session" Tab
tmux send-keys -t "$session" Enter
wait_for "delivered after" 30
screen > "$work/delivered.txt"
stop_with q
echo "smoke: hello delivered: $(grep -o 'hello .*delivered after[^)]*)' "$work/delivered.txt" | tr -s ' ')"

# 2. pending across a restart
start --failure-rate 1
wait_for "[ Send ]" 20
for m in "persist one" "persist two"; do tmux send-keys -t "$session" "$m"; tmux send-keys -t "$session" Enter; done
wait_for "persist two" 5
wait_for "failed (500)" 10
stop_with C-c
start --failure-rate 0
wait_for "↻ persist one" 10
wait_for "0 pending" 30
echo "smoke: resumed after restart: $(screen | grep -c '↻ persist.*delivered after') of 2 delivered"
stop_with C-c

# 3. not a terminal
if out=$("$bin" --directory "$work/log2" --port $((port + 1)) < /dev/null 2>&1 | cat); then echo "smoke: expected a failure without a TTY"; exit 1; fi
echo "$out" | grep -q "needs a terminal" || { echo "smoke: unclear message without a TTY: $out"; exit 1; }
echo "smoke: refuses without a terminal: ok"
echo "smoke: all 3 checks passed"
