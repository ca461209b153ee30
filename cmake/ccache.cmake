# Included by the build and by fuzz/'s. ccache (installed by scripts/install-deps.sh) keeps rebuilds
# short, also of the precompiled header's users: it is told that the header's time stamps and
# defines may differ from the ones it cached. Paths under the repository are hashed relative to it,
# so another clone of the same commit (CI's fresh one) finds the objects a first clone compiled.
# LEANSEQ_CCACHE=OFF compiles without it (a cold build's time).
option(LEANSEQ_CCACHE "Compile through ccache where it is installed" ON)
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND LEANSEQ_CCACHE)
  get_filename_component(leanseq_repository ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${leanseq_repository}" ${CCACHE_PROGRAM})
endif()
