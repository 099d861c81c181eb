#!/usr/bin/env bash
# Fuzzes every reader of user files, and the server's readers of requests and config files
# (serve_*): builds the libFuzzer targets of fuzz/ (cargo-fuzz, nightly, AddressSanitizer),
# seeds fuzz/corpus/<target>/ from the TensorFlow fixtures or small hand-written inputs (and
# the target's regression inputs), then runs each target in turn for SECONDS with one
# process, at low priority:
#
#   scripts/fuzz_all.sh SECONDS [TARGET...]     # e.g. scripts/fuzz_all.sh 600
#
# Allocations past 2 GiB and RSS past 2 GiB count as failures (OOM), as does an input that
# takes more than 10 s (timeout). libFuzzer runs in fork mode (-fork=1: one child at a time)
# and keeps going after a failure, so one run reports all it finds; reproducers land in
# fuzz/artifacts/<target>/ (minimise one with `cargo +nightly fuzz tmin TARGET FILE`, then
# commit it under fuzz/regressions/<target>/, where `cargo test -p ferroflow --test
# fuzz_regressions` replays it, or `cargo test -p ferroflow-serve --test fuzz_regressions`
# for the serve_* targets). Prints per target the executions and the crashes, OOMs and
# timeouts found; exits 1 if any target found a failure (2 if the build failed).
#
# Needs `cargo install cargo-fuzz` and a nightly toolchain (`rustup toolchain install nightly`).
set -uo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 SECONDS [TARGET...]" >&2
    exit 2
fi
secs=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz=$root/fuzz
fixtures=$root/fixtures/tf
cd "$fuzz"

all_targets=(graph_def_binary graph_def_text meta_graph npy npz event_file bundle_index checkpoint_data
    checkpoint_bundle mnist_idx jpeg png tfrecord_examples xspace saved_model keras_archive keras_config hdf5
    serve_predict_json serve_examples_json serve_batching_parameters serve_model_config serve_warmup_records)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

# Seeds larger than this slow every execution down more than they add.
max_seed=$((128 * 1024))

# Copies files (no larger than max_seed) into a corpus, named after their path.
seed() {
    local dir=$1
    shift
    local f
    for f in "$@"; do
        [[ -f $f && $(stat -c %s "$f") -le $max_seed ]] || continue
        local name=${f#"$root"/}
        cp "$f" "$dir/seed-${name//\//_}"
    done
}

seed_target() {
    local t=$1 dir=$fuzz/corpus/$1
    mkdir -p "$dir"
    shopt -s nullglob globstar
    case $t in
    graph_def_binary) seed "$dir" "$fixtures"/*.pb "$fixtures"/grappler/*.pb ;;
    jpeg) seed "$dir" "$root"/fixtures/codec/*.jpg "$root"/fixtures/data/flowers_tiny/*/*.jpg ;;
    png) seed "$dir" "$root"/fixtures/codec/*.png "$root"/fixtures/data/flowers_tiny/*/*.png ;;
    tfrecord_examples) seed "$dir" "$root"/fixtures/data/*.tfrecord ;;
    xspace) seed "$dir" "$root"/fixtures/profile/*.xplane.pb ;;
    saved_model) seed "$dir" "$root"/fixtures/saved_model/*/saved_model.pb ;;
    keras_archive) seed "$dir" "$root"/fixtures/keras/*.keras "$root"/fixtures/keras/*.h5 ;;
    keras_config)
        local f
        for f in "$root"/fixtures/keras/*.keras; do
            unzip -p "$f" config.json >"$dir/seed-config-$(basename "$f" .keras).json" 2>/dev/null || true
        done
        ;;
    hdf5)
        seed "$dir" "$root"/fixtures/keras/*.h5
        local f
        for f in "$root"/fixtures/keras/*.keras; do
            [[ $(stat -c %s "$f") -le $max_seed ]] || continue
            unzip -p "$f" model.weights.h5 >"$dir/seed-weights-$(basename "$f" .keras).h5" 2>/dev/null || true
        done
        ;;
    graph_def_text) seed "$dir" "$fixtures"/**/*.pbtxt ;;
    meta_graph)
        seed "$dir" "$fixtures"/checkpoints/*/*.meta
        # Text-format meta graphs: small GraphDefs wrapped as a MetaGraphDef's graph_def.
        local f
        for f in "$fixtures"/{seed_000,mlp,softsign,xlogy,losses,edge}.pbtxt; do
            [[ -f $f ]] || continue
            { echo "meta_info_def { tags: \"serve\" }"; echo "graph_def {"; cat "$f"; echo "}"; } \
                >"$dir/seed-text-$(basename "$f" .pbtxt).meta"
        done
        ;;
    npy)
        local tmp f m
        tmp=$(mktemp -d)
        for f in "$fixtures"/**/*.npz; do
            [[ $(stat -c %s "$f") -le $max_seed ]] || continue
            local base=${f#"$fixtures"/}
            mkdir -p "$tmp/x" && unzip -q -o "$f" -d "$tmp/x" 2>/dev/null
            for m in "$tmp"/x/*.npy; do
                [[ $(stat -c %s "$m") -le $max_seed ]] && cp "$m" "$dir/seed-${base//\//_}-$(basename "$m" | tr -c 'A-Za-z0-9._\n-' _)"
            done
            rm -rf "$tmp/x"
        done
        rm -rf "$tmp"
        ;;
    npz) seed "$dir" "$fixtures"/**/*.npz ;;
    event_file)
        seed "$dir" "$fixtures"/events/*/*
        # Each record's payload alone (an Event): the target also frames its input as one
        # record with valid CRCs.
        local f off len size i
        for f in "$fixtures"/events/*/*; do
            off=0 i=0 size=$(stat -c %s "$f")
            while ((off + 12 <= size)); do
                len=$(od -An -t u8 -j "$off" -N 8 "$f" | tr -d ' ')
                ((off + 16 + len <= size)) || break
                tail -c +$((off + 13)) "$f" | head -c "$len" >"$dir/seed-event-$(basename "$f")-$i"
                off=$((off + 16 + len)) i=$((i + 1))
            done
        done
        ;;
    bundle_index) seed "$dir" "$fixtures"/checkpoints/*.index "$fixtures"/checkpoints/*/*.index ;;
    checkpoint_data) seed "$dir" "$fixtures"/checkpoints/mixed.data-00000-of-00001 ;;
    checkpoint_bundle)
        # A 2-byte little-endian index length, the index, the data file.
        local index=$fixtures/checkpoints/mixed.index data=$fixtures/checkpoints/mixed.data-00000-of-00001
        local n
        n=$(stat -c %s "$index")
        {
            printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))"
            cat "$index" "$data"
        } >"$dir/seed-mixed"
        ;;
    mnist_idx)
        seed "$dir" "$root"/crates/train/data/mnist/*labels*.gz
        # Three real digits (the images files are large): raw and gzipped.
        {
            printf '\x00\x00\x08\x03\x00\x00\x00\x03\x00\x00\x00\x1c\x00\x00\x00\x1c'
            gzip -dc "$root"/crates/train/data/mnist/t10k-images-idx3-ubyte.gz | tail -c +17 | head -c 2352
        } >"$dir/seed-three-digits-idx3-ubyte"
        gzip -9nc "$dir/seed-three-digits-idx3-ubyte" >"$dir/seed-three-digits-idx3-ubyte.gz"
        ;;
    # The server's readers (ferroflow_serve::fuzzing): small hand-written requests and config
    # files (the regression inputs below add valid and hostile ones, warmup records included).
    serve_predict_json)
        local i=0 body
        for body in '{"instances": [[[0.1, 0.2, 0.3], [1, 2, 3]]]}' \
            '{"signature_name": "serving_default", "inputs": [[[-1.5e-3, 0, 7], [1e10, 2.25, -0]]]}' \
            '{"instances": ["a", {"b64": "aGVsbG8="}]}' '{"inputs": [0.12345678901234567, 1e308, NaN, -Infinity]}' \
            '{"inputs": {"ids": [[1, 2], [3, 4]], "weights": [[0.5, 1.5], [2.5, 3.5]]}}' \
            '{"instances": [{"ids": 1, "weights": 0.5}, {"ids": 2, "weights": 1.5}]}'; do
            printf '%s' "$body" >"$dir/seed-body-$i.json"
            i=$((i + 1))
        done
        ;;
    serve_examples_json)
        printf '%s' '{"context": {"c": "x", "w": [0.5]}, "examples": [{"a": 1, "b": [1.5, 2]}, {"a": [true, 3], "s": {"b64": "aGk="}}]}' \
            >"$dir/seed-classify.json"
        printf '%s' '{"examples": [{"x": [1.0, 2.0, 3.0], "label": 1, "name": "n"}]}' >"$dir/seed-regress.json"
        ;;
    serve_batching_parameters)
        printf '%s\n' 'max_batch_size { value: 32 }' 'batch_timeout_micros { value: 1000 }' \
            'num_batch_threads { value: 4 }' 'max_enqueued_batches { value: 100 }' \
            'allowed_batch_sizes: [8, 16, 32]' 'pad_variable_length_inputs: false' >"$dir/seed-batching.txt"
        ;;
    serve_model_config)
        printf '%s\n' 'model_config_list {' '  config {' '    name: "m"' '    base_path: "/models/m"' \
            '    model_platform: "tensorflow"' '    model_version_policy { specific { versions: 1 versions: 2 } }' \
            '    version_labels { key: "stable" value: 1 }' '  }' '  config < name: "n" base_path: "/n" model_version_policy { all {} } >' \
            '}' >"$dir/seed-config.txt"
        ;;
    serve_warmup_records) ;;
    *)
        echo "unknown target '$t' (targets: ${all_targets[*]})" >&2
        return 1
        ;;
    esac
    seed "$dir" "$fuzz"/regressions/"$t"/*
    shopt -u nullglob globstar
}

echo "== building the fuzz targets (release, AddressSanitizer)"
if ! nice -n 10 cargo +nightly fuzz build; then
    echo "fuzz build failed" >&2
    exit 2
fi
bin_dir=$fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release

failed=0
summary=()
for t in "${targets[@]}"; do
    seed_target "$t" || exit 2
    mkdir -p "artifacts/$t"
    marker=$(mktemp)
    log=artifacts/$t.log
    echo "== $t: ${secs}s, corpus fuzz/corpus/$t ($(ls "corpus/$t" | wc -l) inputs), log fuzz/$log"
    # -fork=1: one child process at a time, restarted after a failure; the parent merges the
    # corpus and counts what the children found.
    # The binary built above, run directly: sources edited meanwhile do not rebuild it.
    # (`timeout`: a parent that does not stop on its own is killed well after SECONDS.)
    timeout -k 30 $((secs + 600)) nice -n 10 "$bin_dir/$t" "corpus/$t" \
        -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
        -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
    rc=$?
    # Fork mode's status lines: `#EXECS: cov: .. ft: .. corp: .. exec/s: .. oom/timeout/crash: O/T/C ..`.
    last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
    execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
    # Reproducers written during this run, by kind.
    crashes=$(find "artifacts/$t" -newer "$marker" -name 'crash-*' | wc -l)
    ooms=$(find "artifacts/$t" -newer "$marker" -name 'oom-*' | wc -l)
    timeouts=$(find "artifacts/$t" -newer "$marker" -name 'timeout-*' | wc -l)
    leaks=$(find "artifacts/$t" -newer "$marker" -name 'leak-*' | wc -l)
    rm -f "$marker"
    if [[ -n $last && $last =~ oom/timeout/crash:\ ([0-9]+)/([0-9]+)/([0-9]+) ]]; then
        # The parent's counts include failures whose reproducer duplicates an earlier one.
        ((ooms < BASH_REMATCH[1])) && ooms=${BASH_REMATCH[1]}
        ((timeouts < BASH_REMATCH[2])) && timeouts=${BASH_REMATCH[2]}
        ((crashes < BASH_REMATCH[3])) && crashes=${BASH_REMATCH[3]}
    fi
    status=ok
    if [[ -z $execs ]]; then
        status="no stats (exit $rc; see fuzz/$log)"
        execs=?
        failed=1
    elif ((crashes + ooms + timeouts + leaks > 0)); then
        status="FAILED (reproducers in fuzz/artifacts/$t/)"
        failed=1
    fi
    line=$(printf '%-25s %6ss %12s execs %4s crashes %4s ooms %4s timeouts %4s leaks  %s' \
        "$t" "$secs" "$execs" "$crashes" "$ooms" "$timeouts" "$leaks" "$status")
    echo "$line"
    summary+=("$line")
done

echo
echo "== summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
exit $failed
