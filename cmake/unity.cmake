# Batched compilation ("unity" build): a target's .cpp files are compiled a few at a time, each
# batch as one translation unit that includes them. Every translation unit pays for loading the
# precompiled <torch/torch.h> (several seconds) and for generating LibTorch's inline code that it
# uses; a batch pays once for all its files. The sources stay as they are (diagnostics name them);
# a file with its own compile definitions or options, or marked SKIP_UNITY_BUILD_INCLUSION (CMake's
# name for it), is compiled alone.
#
# CMake's own UNITY_BUILD writes absolute paths into the batch files, so another clone of the same
# commit would miss the compiler cache; these batch files name their sources relative to
# themselves and are rewritten only when their list changes. LEANSEQ_UNITY=OFF compiles file by
# file (quicker to rebuild after editing one file of a large target).
option(LEANSEQ_UNITY "Compile each target's sources in batches (a clean build in a fraction of the time)" ON)
set(LEANSEQ_UNITY_BATCH 8 CACHE STRING "Most .cpp files compiled as one translation unit when LEANSEQ_UNITY is ON")

# Batches `target`'s sources once its directory is read, so that the source properties set after
# the target is made (compile definitions, options) are seen.
function(leanseq_unity target)
  if(LEANSEQ_UNITY)
    # (a deferred call reads its variables when it runs: the name is written into it now)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL leanseq_unity_now [[${target}]])")
  endif()
endfunction()

function(leanseq_unity_now target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(batch_dir ${CMAKE_CURRENT_BINARY_DIR}/unity/${target})
  set(batched "")
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
    if(NOT path MATCHES "\\.cpp$")
      continue()
    endif()
    get_source_file_property(definitions ${path} COMPILE_DEFINITIONS)
    get_source_file_property(options ${path} COMPILE_OPTIONS)
    get_source_file_property(alone ${path} SKIP_UNITY_BUILD_INCLUSION)
    if(definitions OR options OR alone)
      continue()
    endif()
    list(APPEND batched ${path})
  endforeach()
  list(LENGTH batched count)
  if(count LESS 2)
    return()
  endif()
  # As many batches as the limit needs, of about equal size (10 files: two of 5, not 8 and 2).
  math(EXPR batch_count "(${count} + ${LEANSEQ_UNITY_BATCH} - 1) / ${LEANSEQ_UNITY_BATCH}")
  math(EXPR per_batch "(${count} + ${batch_count} - 1) / ${batch_count}")
  set(position 0)
  foreach(path IN LISTS batched)
    math(EXPR last "${position} / ${per_batch}")
    file(RELATIVE_PATH relative ${batch_dir} ${path})
    string(APPEND content_${last} "#include \"${relative}\"\n")
    math(EXPR position "${position} + 1")
  endforeach()
  set(batches "")
  foreach(index RANGE ${last})
    file(CONFIGURE OUTPUT ${batch_dir}/batch_${index}.cpp CONTENT "${content_${index}}" @ONLY)
    list(APPEND batches ${batch_dir}/batch_${index}.cpp)
  endforeach()
  target_sources(${target} PRIVATE ${batches})
  # Batches of an earlier configuration with more files.
  file(GLOB written ${batch_dir}/batch_*.cpp)
  foreach(file IN LISTS written)
    string(REGEX REPLACE ".*batch_([0-9]+)\\.cpp$" "\\1" number ${file})
    if(number GREATER last)
      file(REMOVE ${file})
    endif()
  endforeach()
  # GCC warns of a type from an anonymous namespace in another type when the first is declared in
  # an included file, as each source is in its batch: not a hazard there (one translation unit).
  set_source_files_properties(${batches} PROPERTIES COMPILE_OPTIONS -Wno-subobject-linkage)
  # The files stay in the target (for IDEs and for the batch's dependencies) but are not compiled alone.
  set_source_files_properties(${batched} PROPERTIES HEADER_FILE_ONLY ON)
endfunction()
