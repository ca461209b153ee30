# What `cmake --install` puts under its prefix, and the .deb of `cpack -G DEB`:
#   bin/leanseq                      the command line
#   libexec/leanseq/leanseq-spm      its SentencePiece helper (found relative to bin/ and lib/)
#   lib/libleanseq.so                the stable C++ API (include/leanseq/, docs/cpp.md) as one shared
#                                    library: it exports that API's symbols only
#   include/leanseq/*.h              its headers (standard C++ types only)
#   lib/cmake/leanseq/               the CMake package: find_package(leanseq) -> leanseq::leanseq
include(CMakePackageConfigHelpers)

# One shared library made of the api layer and every layer below it. The executable keeps linking
# them statically.
leanseq_layers_below(layers api)
set(LEANSEQ_LIBRARY_LAYERS "")
set(objects "")
foreach(layer ${layers})
  list(APPEND LEANSEQ_LIBRARY_LAYERS leanseq_${layer})
  list(APPEND objects $<TARGET_OBJECTS:leanseq_${layer}>)
endforeach()
add_library(leanseq_shared SHARED ${objects})
set_target_properties(leanseq_shared PROPERTIES OUTPUT_NAME leanseq EXPORT_NAME leanseq
                      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
# (The layers' archives add only their own dependencies: their objects are all in already.)
target_link_libraries(leanseq_shared PRIVATE ${LEANSEQ_LIBRARY_LAYERS})
target_link_libraries(leanseq_shared PRIVATE ${TORCH_LIBRARIES})
target_include_directories(leanseq_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public API's symbols only (cmake/leanseq.map): the layers behind it, and the static libraries
# they carry, stay private to the library.
target_link_options(leanseq_shared PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined
                    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/leanseq.map)
set_target_properties(leanseq_shared PROPERTIES LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/leanseq.map)

install(TARGETS leanseq RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# fairseq's command names as links to leanseq, which runs the command it was started as
# (docs/fairseq.md); only on request, since they would shadow an installed fairseq.
option(LEANSEQ_FAIRSEQ_LINKS "Install fairseq-preprocess, -train, -generate, -interactive and -score as links to leanseq" OFF)
if(LEANSEQ_FAIRSEQ_LINKS)
  foreach(command fairseq-preprocess fairseq-train fairseq-generate fairseq-interactive fairseq-score fairseq-eval-lm fairseq-validate)
    install(CODE "file(CREATE_LINK leanseq \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${command}\" SYMBOLIC)")
  endforeach()
endif()
install(TARGETS leanseq-spm RUNTIME DESTINATION ${LEANSEQ_HELPER_DIR})
install(TARGETS leanseq_shared EXPORT leanseqTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
file(GLOB public_headers ${PROJECT_SOURCE_DIR}/include/leanseq/*.h)
install(FILES ${public_headers} ${PROJECT_BINARY_DIR}/generated/leanseq/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/leanseq)

set(LEANSEQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/leanseq)
install(EXPORT leanseqTargets NAMESPACE leanseq:: DESTINATION ${LEANSEQ_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/leanseqConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/leanseqConfig.cmake INSTALL_DESTINATION ${LEANSEQ_CMAKE_DIR})
# 0.x: a minor version may change the API (CHANGELOG.md says how); checkpoints keep loading.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/leanseqConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/leanseqConfig.cmake ${PROJECT_BINARY_DIR}/leanseqConfigVersion.cmake
        DESTINATION ${LEANSEQ_CMAKE_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack -G DEB (from the build directory): Depends computed from the installed files' libraries.
set(CPACK_PACKAGE_NAME leanseq)
set(CPACK_PACKAGE_VENDOR "the leanseq authors")
set(CPACK_PACKAGE_CONTACT "leanseq maintainers <leanseq@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "sequence-to-sequence models that pay less attention: train, decode and serve in C++")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What the command line runs besides shared libraries: LibTorch's fast BLAS (leanseq warns without it).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-pthread")
include(CPack)
