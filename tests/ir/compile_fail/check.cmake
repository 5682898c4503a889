# A misspelled attribute name is a compile error: compiles attr_names.cc once per case
# with the project's compiler and include paths. Case 0 (the spec's names) must compile, so
# that a failure of the others is about the names, not the setup; cases 1..5 must fail,
# each naming the misspelled identifier.
#   cmake -DCXX=... -DSOURCE_DIR=... -DGENERATED_DIR=... -P check.cmake
set(file ${CMAKE_CURRENT_LIST_DIR}/attr_names.cc)
set(expected_0 "")
set(expected_1 "strides")
set(expected_2 "strides")
set(expected_3 "Required")
set(expected_4 "strides")
set(expected_5 "bias")
foreach(case RANGE 0 5)
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only -DCASE=${case} -I${SOURCE_DIR} -I${GENERATED_DIR} ${file}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(case EQUAL 0)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "case 0 (correct names) does not compile:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "case ${case} compiled, but it misspells a name")
  elseif(NOT err MATCHES "${expected_${case}}")
    message(FATAL_ERROR "case ${case} failed without naming '${expected_${case}}':\n${err}")
  else()
    message(STATUS "case ${case}: refused as expected")
  endif()
endforeach()
