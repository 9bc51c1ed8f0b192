# Sourced by setup.sh and fuzz.sh: ccache when present (a developer's choice, not a dependency).
# Paths are made relative to the checkout and the build folder is not hashed, so any clone or
# worktree (CI's fresh clone included) reuses the objects another compiled from the same sources;
# the sanitizer builds' -g1 would otherwise put the folder in every hash. Sets ccache_args.
ccache_args=()
if command -v ccache >/dev/null; then
  ccache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$here} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
