# Small CMake helpers shared by every folder.

# ocsd_embed_file(<target-source-var> <input-file> <symbol>)
# Turns a text file (a YANG module) into a C source defining
#   const char <symbol>[];  (NUL-terminated)
# so binaries never depend on where the file was installed.
function(ocsd_embed_file out_var input symbol)
  get_filename_component(name ${input} NAME)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embed_${symbol}.c)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${out} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding ${name}")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

# ocsd_add_test(<name> SOURCES <src...> LIBS <lib...> LABELS <label...>
#               [ARGS <arg...>] [TIMEOUT <s>])
# Builds a test executable and registers it with ctest under the labels.
# Labels: unit, property, integration, interop, bench, fuzz. The default run
# (`ctest -LE bench`) leaves benchmarks out.
function(ocsd_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
