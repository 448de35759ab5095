#!/usr/bin/env bash
# bench_query.sh: VSL query evaluation, records/s over every request group of a full
# ring, with PCRE2 (this tree) against std::regex (BASE, by default the last revision
# before the PCRE2 wrapper): the same bench_query.cpp built against both libraries,
# run alternately on the same ring in one run. Prints each query's ratio
# (PCRE2 / std::regex) and the geometric mean over the regex queries; both builds must
# select the same groups.
#
# Usage: bench/bench_query.sh [BUILD_DIR] [RUNS] [BASE]   (build-bench, 3, see above)
# The baseline is built Release in BUILD_DIR-regex-base from `git archive BASE`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench_query
. "$ROOT/bench/lib.sh"
BUILD=${1:-$ROOT/build-bench}
RUNS=${2:-3}
cd "$ROOT"
BASE=${3:-$(git log -1 --format=%H --diff-filter=A -- ringlog/include/ringlog/regex.hpp)^}
BASE=$(git rev-parse --short "$BASE")
NEW=$BUILD/bench/bench_query
WRITER=$BUILD/support/tail_writer
bench_build "$BUILD" bench_query tail_writer
[ -x "$NEW" ] && [ -x "$WRITER" ] || die "missing $NEW or $WRITER"

# The baseline: BASE's tree with this bench_query.cpp (it uses the public query API only).
BDIR=$BUILD-regex-base
if [ "$(cat "$BDIR/rev" 2>/dev/null)" != "$BASE" ]; then
  rm -rf "$BDIR"
  mkdir -p "$BDIR/src"
  git archive "$BASE" | tar -x -C "$BDIR/src"
  echo "$BASE" >"$BDIR/rev"
fi
cmp -s bench/bench_query.cpp "$BDIR/src/bench/bench_query.cpp" || cp bench/bench_query.cpp "$BDIR/src/bench/"
(cd "$BDIR/src" && bench_build "$BDIR/build" bench_query)
OLD=$BDIR/build/bench/bench_query

bench_workdir
"$WRITER" fill "$WORK/ring" $((16 << 20)) >/dev/null
echo "load before: $(load); new: $(git rev-parse --short HEAD) (PCRE2), base: $BASE (std::regex); $RUNS runs"
for r in $(seq "$RUNS"); do
  "$OLD" "$WORK/ring" 3 >"$WORK/old.$r"
  "$NEW" "$WORK/ring" 3 >"$WORK/new.$r"
done
head -1 "$WORK/new.1"
/usr/bin/python3 - "$WORK" "$RUNS" <<'PY'
import math, re, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
def read(kind):
    out = {}
    for r in range(1, runs + 1):
        for line in open(f"{work}/{kind}.{r}"):
            m = re.match(r"query (\d+): (\d+) records/s, (\d+) groups matched: (.*)", line)
            if m:
                out.setdefault(int(m[1]), []).append((float(m[2]), int(m[3]), m[4]))
    return out
old, new = read("old"), read("new")
logs, bad = [], False
print(f"{'query':<48} {'std::regex':>12} {'PCRE2':>12} {'ratio':>6}")
for i in sorted(new):
    o = statistics.median(x[0] for x in old[i]); n = statistics.median(x[0] for x in new[i])
    text = new[i][0][2]
    same = {x[1] for x in old[i]} == {x[1] for x in new[i]}
    bad |= not same
    if "~" in text:
        logs.append(math.log(n / o))
    print(f"{text:<48} {o / 1e6:>10.2f} M {n / 1e6:>10.2f} M {n / o:>5.2f}x" + ("" if same else "  DIFFERENT MATCHES"))
print(f"geometric mean over the regex queries: {math.exp(sum(logs) / len(logs)):.2f}x (PCRE2 / std::regex)")
if bad:
    print("FAIL: the two builds selected different groups")
PY
echo "load after: $(load)"
