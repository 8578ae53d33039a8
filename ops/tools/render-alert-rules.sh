#!/usr/bin/env bash
# Print ops/alerts/seedd-rules.yml with the scrape-job selector replaced.
#
# The rules select seedd's scrape job with exactly `job=~".*seedd.*"` (see the file's header);
# this swaps that string for yours, e.g. when the job is named "radicle-seed":
#   ops/tools/render-alert-rules.sh 'job="radicle-seed"' > /etc/prometheus/rules/seedd.yml
# Usage: render-alert-rules.sh SELECTOR [RULES_FILE]
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,7p' "$0" >&2; exit 2; }
sel="$1"
file="${2:-$(dirname "$0")/../alerts/seedd-rules.yml}"
grep -qF 'job=~".*seedd.*"' "$file" || { echo "render-alert-rules: no job selector in $file" >&2; exit 1; }
SEL="$sel" python3 -c '
import os, sys
text = open(sys.argv[1], encoding="utf-8").read()
sys.stdout.write(text.replace("job=~\".*seedd.*\"", os.environ["SEL"]))
' "$file"
