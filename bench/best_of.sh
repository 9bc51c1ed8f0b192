# Sourced by the bench scripts that time whole commands (dist_scaling.sh, dist_alternatives.sh).
# best TAG CMD...: runs CMD $repeat times (stdout dropped, stderr kept in $out/TAG.err) and prints
# "wall cpu" of the run with the best wall time (cpu = user + sys of every process it started).
best() {
  local tag=$1 b="999999 0" t
  shift
  for _ in $(seq "$repeat"); do
    /usr/bin/time -o "$out/time" -f "%e %U %S" "$@" > /dev/null 2> "$out/$tag.err"
    t=$(awk '{printf "%s %.2f", $1, $2 + $3}' "$out/time")
    b=$(python3 -c "a, c = '$b'.split(), '$t'.split(); print(' '.join(c if float(c[0]) < float(a[0]) else a))")
  done
  echo "$b"
}
