# The public API hides the compiler: compiles hidden_api.cc once per case with the
# project's compiler and include paths. Case 0 (the public API as a user calls it) must
# compile, so that a failure of the others is about access, not the setup; cases 1..5
# (Builder::beginGraph, addInput, addNode, Model's Impl constructor, Builder's
# constructor) must fail as private.
#   cmake -DCXX=... -DSOURCE_DIR=... -DGENERATED_DIR=... -P check.cmake
set(file ${CMAKE_CURRENT_LIST_DIR}/hidden_api.cc)
set(expected_1 "beginGraph.*private")
set(expected_2 "addInput.*private")
set(expected_3 "addNode.*private")
set(expected_4 "Model.*private")
set(expected_5 "Builder.*private")
foreach(case RANGE 0 5)
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only -DCASE=${case} -I${SOURCE_DIR} -I${GENERATED_DIR} ${file}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(case EQUAL 0)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "case 0 (the public API) does not compile:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "case ${case} compiled, but it calls what the public API hides")
  elseif(NOT err MATCHES "${expected_${case}}")
    message(FATAL_ERROR "case ${case} failed without saying '${expected_${case}}':\n${err}")
  else()
    message(STATUS "case ${case}: refused as expected")
  endif()
endforeach()
