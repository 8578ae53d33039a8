#!/usr/bin/env bash
# Fuzz seedd-proto's sans-IO wire codecs with cargo-fuzz (libFuzzer): runs every target of
# fuzz/ for SECONDS_PER_TARGET seconds (default 20), one after the other, and prints
# executions, executions/s and corpus size per target.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Exits non-zero if a target crashes (panic, failed assertion, sanitizer report, timeout,
# out-of-memory); it prints the panic and the path of the saved input (fuzz/artifacts/...).
#
# Environment:
#   FUZZ_TARGETS           space-separated targets (default: all three)
#   SEEDD_FUZZ_SANITIZER   address (default) | none | leak | ...   (cargo fuzz --sanitizer)
#   SEEDD_FUZZ_TARGET_DIR  build dir        (default $HOME/.cache/seedd/fuzz-target)
#   SEEDD_FUZZ_CORPUS      corpus root dir  (default $HOME/.cache/seedd/fuzz-corpus)
#   SEEDD_FUZZ_LOGS        libFuzzer logs   (default $HOME/.cache/seedd/fuzz-logs)
#
# Only stable Rust is needed: cargo fuzz passes nightly-only flags (-Zsanitizer, sancov), which
# stable rustc accepts with RUSTC_BOOTSTRAP=1 (the ASan runtime ships with stable's rust-std).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-20}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET]" >&2
    exit 2
fi
read -r -a targets <<< "${FUZZ_TARGETS:-frames messages handshake_responder}"
sanitizer="${SEEDD_FUZZ_SANITIZER:-address}"
corpus_root="${SEEDD_FUZZ_CORPUS:-$HOME/.cache/seedd/fuzz-corpus}"
log_dir="${SEEDD_FUZZ_LOGS:-$HOME/.cache/seedd/fuzz-logs}"

export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
    env -u CARGO_TARGET_DIR cargo install cargo-fuzz --locked
fi

# Fuzz builds use other RUSTFLAGS than the workspace: keep them in their own target dir.
export CARGO_TARGET_DIR="${SEEDD_FUZZ_TARGET_DIR:-$HOME/.cache/seedd/fuzz-target}"
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never
mkdir -p "$corpus_root" "$log_dir"

echo "== seed corpus -> $corpus_root" >&2
cargo run -q --manifest-path fuzz/Cargo.toml --example seed_corpus -- "$corpus_root"

echo "== building fuzz targets (sanitizer: $sanitizer)" >&2
cargo fuzz build --sanitizer "$sanitizer"

# libFuzzer options per target: inputs longer than a handshake are useless; frames and
# messages may grow up to a full gossip message (len_control still grows them gradually).
fuzz_args() {
    case "$1" in
        handshake_responder) echo "-max_len=81" ;;
        *) echo "-max_len=65600" ;;
    esac
}

status=0
summary=()
for target in "${targets[@]}"; do
    log="$log_dir/$target.log"
    mkdir -p "$corpus_root/$target"
    echo "== fuzzing $target for ${secs}s (log: $log)" >&2
    rc=0
    # shellcheck disable=SC2046
    cargo fuzz run --sanitizer "$sanitizer" "$target" "$corpus_root/$target" -- \
        -max_total_time="$secs" -timeout=10 -print_final_stats=1 $(fuzz_args "$target") \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    corpus=$(find "$corpus_root/$target" -type f | wc -l)
    if [ "$rc" -eq 0 ]; then
        result=ok
    else
        status=1
        result="CRASH (exit $rc)"
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        echo "!! $target failed; full output in $log" >&2
        # The panic message or the sanitizer/libFuzzer report.
        grep -m 1 -A 6 -E "panicked at|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|^==[0-9]+== ?ERROR" \
            "$log" >&2 || grep -v '^#[0-9]' "$log" | tail -n 30 >&2
        if [ -n "$artifact" ]; then
            echo "!! crash input: $artifact" >&2
            echo "!! hex: $(od -An -tx1 -v "$artifact" | tr -d ' \n' | head -c 2000)" >&2
            echo "!! reproduce: RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo fuzz run --sanitizer $sanitizer $target $artifact" >&2
            result="$result: $artifact"
        fi
    fi
    summary+=("$(printf '%-20s %6ss %12s execs %9s execs/s %6s inputs  %s' \
        "$target" "$secs" "${execs:-?}" "${rate:-?}" "$corpus" "$result")")
done

echo
echo "target               time        executions        rate   corpus  result"
printf '%s\n' "${summary[@]}"
exit "$status"
